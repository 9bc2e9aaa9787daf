import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { loadConfig } from "../config.js";
import { openInstanceData } from "../instance-data.js";

const mode = (p: string) => statSync(p).mode & 0o777;

let root: string;
let umask: number;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), "capstan-private-"));
  // The usual umask, under which SQLite and mkdir would make 0644 files and 0755 directories.
  umask = process.umask(0o022);
});
afterEach(() => {
  process.umask(umask);
  rmSync(root, { recursive: true, force: true });
});

describe("data files are private (issue 15)", () => {
  it("creates the data directory 0700 and capstan.db, its -wal/-shm and secret.key 0600", async () => {
    const dataDir = join(root, "nested", "data");
    const data = await openInstanceData(loadConfig({ PLATFORM_DATA_DIR: dataDir }));
    try {
      // A write, so SQLite has its WAL and shared-memory files open.
      await data.admin.createTeam("t");
      const files = ["capstan.db", "capstan.db-wal", "capstan.db-shm", "secret.key"].map((f) => join(dataDir, f));
      for (const f of files) {
        expect(existsSync(f), f).toBe(true);
        expect(mode(f).toString(8), f).toBe("600");
      }
      expect(mode(dataDir).toString(8)).toBe("700");
      expect(mode(join(root, "nested")).toString(8)).toBe("700");
    } finally {
      await data.database.close();
    }
  });

  it("narrows files an earlier release left world-readable, and leaves an existing directory alone", async () => {
    const dataDir = join(root, "data");
    const first = await openInstanceData(loadConfig({ PLATFORM_DATA_DIR: dataDir }));
    await first.database.close();
    for (const f of ["capstan.db", "secret.key"]) chmodSync(join(dataDir, f), 0o644);
    chmodSync(dataDir, 0o755);
    const again = await openInstanceData(loadConfig({ PLATFORM_DATA_DIR: dataDir }));
    try {
      for (const f of ["capstan.db", "secret.key"]) expect(mode(join(dataDir, f)).toString(8), f).toBe("600");
      expect(mode(dataDir).toString(8)).toBe("755");
    } finally {
      await again.database.close();
    }
  });

  it("makes a database named by DATABASE_URL=file: private too, without touching its directory", async () => {
    chmodSync(root, 0o755);
    const file = join(root, "elsewhere.db");
    writeFileSync(join(root, "neighbour.txt"), "x");
    const data = await openInstanceData(loadConfig({ PLATFORM_DATA_DIR: join(root, "data"), DATABASE_URL: `file:${file}` }));
    try {
      expect(mode(file).toString(8)).toBe("600");
      expect(mode(root).toString(8)).toBe("755");
      expect(mode(join(root, "neighbour.txt")).toString(8)).toBe("644");
    } finally {
      await data.database.close();
    }
  });
});
