import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { singleFileTar } from "./tar.js";

const dir = mkdtempSync(join(tmpdir(), "capstan-tar-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("singleFileTar", () => {
  it("is an archive GNU tar extracts byte for byte, with the mode", () => {
    const content = Buffer.from('{"apps":{}}\n'.repeat(100) + "ü");
    writeFileSync(join(dir, "a.tar"), singleFileTar("caddy.json", content, 0o600));
    execFileSync("tar", ["-xf", "a.tar"], { cwd: dir });
    expect(readFileSync(join(dir, "caddy.json")).equals(content)).toBe(true);
    expect(statSync(join(dir, "caddy.json")).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "a.tar")).size % 512).toBe(0);
  });

  it("refuses names that could be paths", () => {
    for (const bad of ["../x", "a/b", "", "x y"]) expect(() => singleFileTar(bad, Buffer.from("x"))).toThrow(/unsupported file name/);
  });
});
