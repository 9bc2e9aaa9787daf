import { mkdir, mkdtemp, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { containedBackupFile, scheduleDir } from "./paths.js";

describe("backup paths", () => {
  it("accepts files inside <state>/backups/ only, also after resolving symlinks", async () => {
    const state = await mkdtemp(join(tmpdir(), "capstan-state-"));
    const dir = join(state, "backups", "db", "s");
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, "f.sql.gz"), "x");
    await writeFile(join(state, "outside"), "secret");
    await symlink(join(state, "outside"), join(dir, "link.sql.gz"));
    expect(await containedBackupFile(state, join(dir, "f.sql.gz"))).toBe(join(dir, "f.sql.gz"));
    expect(await containedBackupFile(state, join(dir, "gone.sql.gz"))).toBeNull();
    await expect(containedBackupFile(state, join(state, "outside"))).rejects.toThrow(/outside/);
    await expect(containedBackupFile(state, `${state}/backups/../outside`)).rejects.toThrow(/outside/);
    await expect(containedBackupFile(state, join(state, "backups"))).rejects.toThrow(/outside/);
    await expect(containedBackupFile(state, "backups/db/s/f.sql.gz")).rejects.toThrow(/not absolute/);
    await expect(containedBackupFile(state, join(dir, "link.sql.gz"))).rejects.toThrow(/leads outside/);
    await expect(containedBackupFile(state, "/etc/passwd")).rejects.toThrow(/outside/);
  });

  it("builds schedule directories from single path segments only", () => {
    expect(scheduleDir("/s", "db-1", "sch-1")).toBe("/s/backups/db-1/sch-1");
    expect(() => scheduleDir("/s", "..", "x")).toThrow(/invalid/);
    expect(() => scheduleDir("/s", "a/b", "x")).toThrow(/invalid/);
  });
});
