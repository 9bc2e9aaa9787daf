import { mkdir, mkdtemp, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TEMPLATE_DIR_LIMITS, TemplateDirError, loadTemplateDir } from "./loader.js";

const FIXTURES = fileURLToPath(new URL("./fixtures/", import.meta.url));
const GOOD = "# documentation: https://example.org\n# slogan: S.\n\nservices:\n  web:\n    image: nginx:1.27-alpine\n    environment:\n      - SERVICE_URL_WEB_80\n";

describe("loadTemplateDir on the fixture folder", () => {
  it("every template file ends in exactly one list, broken ones with their reason", async () => {
    const r = await loadTemplateDir(FIXTURES);
    expect(r.templates.map((t) => t.name)).toEqual(["whoami"]);
    expect(r.ignored).toEqual(["draft.yaml"]);
    const reasons = Object.fromEntries(r.broken.map((b) => [b.file, b.reason]));
    expect(Object.keys(reasons).sort()).toEqual(["Bad_Name.yaml", "host-port.yml", "no-slogan.yaml", "supabase-like.yaml", "whoami.yml"]);
    expect(reasons["Bad_Name.yaml"]).toMatch(/template name "Bad_Name"/);
    expect(reasons["host-port.yml"]).toMatch(/services\.web\.ports.*publishing ports on the server is not supported/);
    expect(reasons["no-slogan.yaml"]).toMatch(/# slogan: is missing/);
    expect(reasons["supabase-like.yaml"]).toMatch(/SERVICE_SUPABASEANON_KONG is not a variable Capstan fills in/);
    expect(reasons["whoami.yml"]).toBe("whoami.yaml already defines template whoami");
  });

  it("the good fixture is classified and routable", async () => {
    const [whoami] = (await loadTemplateDir(FIXTURES)).templates;
    expect(whoami!.services).toEqual([{ name: "whoami", image: "traefik/whoami:v1.10", kind: "application", routable: true, port: 80, path: null, excludeFromStatus: false }]);
    expect(whoami!.header.tags).toEqual(["test", "http"]);
  });
});

describe("loadTemplateDir limits and file kinds", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "capstan-templates-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  async function folder(name: string, files: Record<string, string>): Promise<string> {
    const d = join(dir, name);
    await mkdir(d);
    for (const [f, text] of Object.entries(files)) await writeFile(join(d, f), text);
    return d;
  }

  it("a file over the size limit is broken with its size; one at the limit loads", async () => {
    const padded = (n: number) => GOOD + "#".repeat(n - Buffer.byteLength(GOOD) - 1) + "\n";
    const d = await folder("size", { "big.yaml": padded(1025), "fits.yaml": padded(1024) });
    const r = await loadTemplateDir(d, { ...TEMPLATE_DIR_LIMITS, fileBytes: 1024 });
    expect(r.broken).toEqual([{ file: "big.yaml", reason: "1025 bytes; the limit is 1024" }]);
    expect(r.templates.map((t) => t.name)).toEqual(["fits"]);
  });

  it("more template files than the limit fail the whole folder (never a silently partial catalog)", async () => {
    const d = await folder("count", { "a.yaml": GOOD, "b.yaml": GOOD, "c.yml": GOOD, "notes.txt": "x" });
    await expect(loadTemplateDir(d, { ...TEMPLATE_DIR_LIMITS, files: 2 })).rejects.toThrow(new TemplateDirError("the folder has 3 template files; the limit is 2"));
    expect((await loadTemplateDir(d, { ...TEMPLATE_DIR_LIMITS, files: 3 })).templates).toHaveLength(3);
  });

  it("the total size is bounded too", async () => {
    const d = await folder("total", { "a.yaml": GOOD, "b.yaml": GOOD });
    await expect(loadTemplateDir(d, { ...TEMPLATE_DIR_LIMITS, totalBytes: Buffer.byteLength(GOOD) + 10 })).rejects.toThrow(TemplateDirError);
  });

  it("symbolic links are not followed, directories and non-UTF-8 files are broken", async () => {
    const d = await folder("kinds", { "ok.yaml": GOOD });
    await writeFile(join(dir, "outside.yaml"), GOOD);
    await symlink(join(dir, "outside.yaml"), join(d, "link.yaml"));
    await mkdir(join(d, "dir.yaml"));
    await writeFile(join(d, "latin1.yaml"), Buffer.from([0x23, 0x20, 0xe9, 0x0a]));
    const r = await loadTemplateDir(d);
    expect(r.templates.map((t) => t.name)).toEqual(["ok"]);
    expect(r.broken).toEqual([
      { file: "dir.yaml", reason: "not a regular file" },
      { file: "latin1.yaml", reason: "not UTF-8 text" },
      { file: "link.yaml", reason: "a symbolic link (not followed)" },
    ]);
  });

  it("a folder that cannot be read is an error", async () => {
    await expect(loadTemplateDir(join(dir, "missing"))).rejects.toThrow(/cannot read the template folder: ENOENT/);
  });
});
