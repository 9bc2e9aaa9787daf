import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CheckoutError, checkRepositoryHost, folderInside, scrub, TOKEN_USERNAME } from "./checkout.js";

describe("scrub", () => {
  it("removes the token in every form git could print it, and keeps one short line", () => {
    const token = "ghp_abcdefghijklmnop/+=";
    const basic = Buffer.from(`${TOKEN_USERNAME}:${token}`).toString("base64");
    const text = `fatal: unable to access 'https://x/${encodeURIComponent(token)}': ${token}\n> Authorization: Basic ${basic}\nagain ${basic}`;
    const out = scrub(text, token);
    expect(out).not.toContain(token);
    expect(out).not.toContain(encodeURIComponent(token));
    expect(out).not.toContain(basic);
    expect(out).not.toContain("\n");
    expect(scrub("x".repeat(1000), null)).toHaveLength(300);
  });
});

describe("folderInside", () => {
  let root: string;
  let outside: string;
  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "capstan-checkout-test-"));
    outside = await mkdtemp(join(tmpdir(), "capstan-outside-"));
    await mkdir(join(root, "templates", "compose"), { recursive: true });
    await writeFile(join(root, "file.yaml"), "x");
    await symlink(outside, join(root, "escape"));
    await symlink(join(root, "templates"), join(root, "inner-link"));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  });

  it("finds the root and nested folders", async () => {
    expect(await folderInside(root, "")).toMatch(/capstan-checkout-test-/);
    expect(await folderInside(root, "templates/compose")).toMatch(/templates\/compose$/);
  });

  it("refuses '..', symlinked folders (out of the checkout or inside it), files and missing folders", async () => {
    await expect(folderInside(root, "../x")).rejects.toThrow(CheckoutError);
    await expect(folderInside(root, "templates/../..")).rejects.toThrow(/not a plain relative path/);
    await expect(folderInside(root, "escape")).rejects.toThrow(/symbolic link/);
    await expect(folderInside(root, "inner-link/compose")).rejects.toThrow(/symbolic link/);
    await expect(folderInside(root, "file.yaml")).rejects.toThrow(/not a folder/);
    await expect(folderInside(root, "nope")).rejects.toThrow(/does not exist/);
  });
});

describe("checkRepositoryHost", () => {
  it("refuses loopback, link-local and metadata hosts unless private endpoints are allowed", async () => {
    await expect(checkRepositoryHost("http://127.0.0.1/x.git", false)).rejects.toThrow(/PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
    await expect(checkRepositoryHost("http://[::1]/x.git", false)).rejects.toThrow(/loopback/);
    await expect(checkRepositoryHost("http://169.254.169.254/x.git", false)).rejects.toThrow(/metadata|link-local/);
    await expect(checkRepositoryHost("http://localhost./x.git", false)).rejects.toThrow(/localhost/);
    await expect(checkRepositoryHost("http://127.0.0.1/x.git", true)).resolves.toBeUndefined();
    await expect(checkRepositoryHost("http://10.0.0.5/x.git", false)).resolves.toBeUndefined();
  });
});
