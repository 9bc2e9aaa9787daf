import { mkdir, mkdtemp, readFile, rm, symlink, writeFile, lstat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { list } from "tar";
import { contextStream, resolveRepoDir, writeContextFile } from "./context.js";

let root: string;
let outside: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "capstan-ctx-"));
  outside = await mkdtemp(join(tmpdir(), "capstan-out-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
  await rm(outside, { recursive: true, force: true });
});

describe("resolveRepoDir", () => {
  it("resolves the base directory inside the clone", async () => {
    await mkdir(join(root, "apps/web"), { recursive: true });
    expect(await resolveRepoDir(root, "/apps/web")).toMatch(/apps\/web$/);
    expect(await resolveRepoDir(root, "/")).not.toMatch(/apps/);
  });

  it("refuses a base directory that is missing or leaves the clone through a symlink", async () => {
    await symlink(outside, join(root, "escape"));
    await expect(resolveRepoDir(root, "/nope")).rejects.toThrow(/does not exist/);
    await expect(resolveRepoDir(root, "/escape")).rejects.toThrow(/leaves the repository/);
  });
});

describe("writeContextFile", () => {
  it("writes generated files, replacing a repository symlink instead of writing through it", async () => {
    const victim = join(outside, "victim");
    await writeFile(victim, "original");
    await symlink(victim, join(root, "Dockerfile.capstan"));
    await writeContextFile(root, "Dockerfile.capstan", "FROM scratch\n");
    expect(await readFile(victim, "utf8")).toBe("original");
    expect((await lstat(join(root, "Dockerfile.capstan"))).isFile()).toBe(true);
    await writeContextFile(root, "conf/nginx.conf", "x");
    expect(await readFile(join(root, "conf/nginx.conf"), "utf8")).toBe("x");
  });

  it("refuses paths outside the context, also through a symlinked directory", async () => {
    await symlink(outside, join(root, "link"));
    await expect(writeContextFile(root, "../x", "x")).rejects.toThrow(/outside/);
    await expect(writeContextFile(root, "/etc/x", "x")).rejects.toThrow(/outside/);
    await expect(writeContextFile(root, "link/x", "x")).rejects.toThrow(/leaves the build context/);
  });
});

describe("contextStream", () => {
  it("archives the directory without .git, keeping symlinks as links", async () => {
    await mkdir(join(root, ".git"));
    await writeFile(join(root, ".git/config"), "secret");
    await writeFile(join(root, "Dockerfile"), "FROM scratch\n");
    await symlink("/etc/passwd", join(root, "pw"));
    const tarPath = join(outside, "ctx.tar");
    const chunks: Buffer[] = [];
    for await (const c of await contextStream(root)) chunks.push(c as Buffer);
    await writeFile(tarPath, Buffer.concat(chunks));
    const entries: { path: string; type: string }[] = [];
    await list({ file: tarPath, onReadEntry: (e) => entries.push({ path: e.path, type: e.type }) });
    expect(entries).toEqual([
      { path: "Dockerfile", type: "File" },
      { path: "pw", type: "SymbolicLink" },
    ]);
  });

  it("leaves out what .dockerignore excludes, but never the Dockerfile, and honours exceptions", async () => {
    await mkdir(join(root, "node_modules/dep"), { recursive: true });
    await mkdir(join(root, "logs"), { recursive: true });
    await writeFile(join(root, "node_modules/dep/index.js"), "x");
    await writeFile(join(root, "logs/a.log"), "x");
    await writeFile(join(root, "logs/keep.log"), "x");
    await writeFile(join(root, "Dockerfile.capstan"), "FROM scratch\n");
    await writeFile(join(root, "app.js"), "x");
    await writeFile(join(root, ".dockerignore"), "node_modules\nlogs/*.log\n!logs/keep.log\nDockerfile*\n");
    const tarPath = join(outside, "ctx.tar");
    const chunks: Buffer[] = [];
    for await (const c of await contextStream(root, "Dockerfile.capstan")) chunks.push(c as Buffer);
    await writeFile(tarPath, Buffer.concat(chunks));
    const files: string[] = [];
    await list({ file: tarPath, onReadEntry: (e) => void (e.type === "File" && files.push(e.path)) });
    expect(files.sort()).toEqual([".dockerignore", "Dockerfile.capstan", "app.js", "logs/keep.log"]);
  });
});
