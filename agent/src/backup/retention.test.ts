import { execFile } from "node:child_process";
import { mkdtemp, readdir, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { applyLocalRetention, isBackupName } from "./retention.js";

async function files(dir: string, names: string[]): Promise<string[]> {
  let t = 1_700_000_000;
  for (const n of names) {
    await writeFile(join(dir, n), n);
    await utimes(join(dir, n), t, t);
    t += 60;
  }
  return names.map((n) => join(dir, n));
}

describe("local retention", () => {
  it("keeps the newest files named like backups and nothing else is touched", async () => {
    const dir = await mkdtemp(join(tmpdir(), "capstan-ret-"));
    const [a, b, c] = await files(dir, ["postgresql-20300101T000000Z-aaaaaaaa.sql.gz", "postgresql-20300101T000100Z-bbbbbbbb.sql.gz", "postgresql-20300101T000200Z-cccccccc.sql.gz"]);
    await writeFile(join(dir, "notes.txt"), "mine");
    await writeFile(join(dir, ".partial-123"), "in progress");
    expect(await applyLocalRetention(dir, 2, c!, true)).toEqual({ removed: [a], currentRemoved: false });
    expect((await readdir(dir)).sort()).toEqual([".partial-123", "notes.txt", "postgresql-20300101T000100Z-bbbbbbbb.sql.gz", "postgresql-20300101T000200Z-cccccccc.sql.gz"]);
    // 0 with a copy elsewhere: everything goes, the current file too.
    expect(await applyLocalRetention(dir, 0, c!, true)).toEqual({ removed: [b], currentRemoved: true });
  });

  it("never removes the only copy of the current run", async () => {
    const dir = await mkdtemp(join(tmpdir(), "capstan-ret-"));
    const [old, cur] = await files(dir, ["redis-20300101T000000Z-aaaaaaaa.rdb.gz", "redis-20300101T000100Z-bbbbbbbb.rdb.gz"]);
    expect(await applyLocalRetention(dir, 0, cur!, false)).toEqual({ removed: [old], currentRemoved: false });
    expect(await readdir(dir)).toEqual(["redis-20300101T000100Z-bbbbbbbb.rdb.gz"]);
  });

  it("a file that cannot be removed is reported, the others still go, and only removed files are listed", async () => {
    const dir = await mkdtemp(join(tmpdir(), "capstan-ret-"));
    const [a, b, c, d] = await files(dir, [
      "mysql-20300101T000000Z-aaaaaaaa.sql.gz",
      "mysql-20300101T000100Z-bbbbbbbb.sql.gz",
      "mysql-20300101T000200Z-cccccccc.sql.gz",
      "mysql-20300101T000300Z-dddddddd.sql.gz",
    ]);
    // Immutable: not even root may remove it (the agent runs as root).
    await promisify(execFile)("chattr", ["+i", b!]);
    try {
      const errors: string[] = [];
      const r = await applyLocalRetention(dir, 1, d!, true, (path, err) => void errors.push(`${path}: ${(err as NodeJS.ErrnoException).code}`));
      expect(r).toEqual({ removed: [c, a], currentRemoved: false });
      expect(errors).toEqual([`${b}: EPERM`]);
      expect((await readdir(dir)).sort()).toEqual(["mysql-20300101T000100Z-bbbbbbbb.sql.gz", "mysql-20300101T000300Z-dddddddd.sql.gz"]);
      // Without a handler the error is the caller's.
      await expect(applyLocalRetention(dir, 1, d!, true)).rejects.toThrow(/EPERM/);
    } finally {
      await promisify(execFile)("chattr", ["-i", b!]);
    }
  });

  it("recognises the control plane's file names only", () => {
    expect(isBackupName("clickhouse-20300101T000000Z-0a1b2c3d.native.tar.gz.gpg")).toBe(true);
    expect(isBackupName(".capstan-test-abc")).toBe(false);
    expect(isBackupName("postgresql-2030-01-01.sql.gz")).toBe(false);
    expect(isBackupName("other-20300101T000000Z-0a1b2c3d.sql.gz")).toBe(false);
  });
});
