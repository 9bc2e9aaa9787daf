import { execFileSync } from "node:child_process";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { ResourceBackupPayload } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { readStopJournal } from "./stop-journal.js";
import { runVolumeBackup } from "./volumes.js";

/**
 * stop_during_backup in runVolumeBackup, against an engine that records calls: the journal entry
 * is written before the first stop and is there while the archive is read; the containers are
 * started again (and the entry removed) after a success and after a failed archive.
 */
function setup(opts: { archiveFails?: boolean; startFails?: boolean } = {}) {
  const src = mkdtempSync(join(tmpdir(), "capstan-sdb-src-"));
  mkdirSync(join(src, "data"));
  writeFileSync(join(src, "data", "a.txt"), "hello\n");
  const stateDir = mkdtempSync(join(tmpdir(), "capstan-sdb-state-"));
  const calls: string[] = [];
  const labels = { "capstan.managed": "true", "capstan.resource.uuid": "app-1" };
  const engine = {
    async listContainers() {
      return [
        { id: "c-web", name: "web", state: "running", labels },
        { id: "c-old", name: "old", state: "exited", labels },
      ];
    },
    async stopContainer(id: string) {
      calls.push(`stop ${id}`);
    },
    async startContainer(id: string) {
      calls.push(`start ${id}`);
      if (opts.startFails) throw new Error("engine said no");
    },
    async getArchive(id: string) {
      const entries = await readStopJournal(stateDir);
      calls.push(`archive ${id} journal=${entries.map((e) => e.containers.map((c) => c.id).join(",")).join(";")}`);
      if (opts.archiveFails) throw new Error("boom");
      const file = join(src, "data.tar");
      execFileSync("tar", ["-C", src, "-cf", file, "data"]);
      return createReadStream(file);
    },
  } as unknown as Engine;
  const payload: ResourceBackupPayload = {
    resource: { kind: "application", uuid: "app-1", name: "web" },
    volumes: [{ name: "data", mount_path: "/data" }],
    schedule_uuid: "s-1",
    execution_uuid: "exec-1",
    filename: "volume-20260301T030000Z-exec1234.tar.gz",
    keep_locally: 2,
    s3: null,
    passphrase: null,
    stop_during_backup: true,
    backup_type: "volume",
    configuration: null,
  };
  const lines: string[] = [];
  const ctx = { signal: AbortSignal.timeout(30_000), progress: (l: string) => void lines.push(l) };
  return { engine, payload, stateDir, calls, lines, ctx };
}

describe("stop_during_backup", () => {
  it("journals, stops the running containers, archives, starts them again and clears the journal", async () => {
    const t = setup();
    const r = await runVolumeBackup(t.engine, t.payload, { stateDir: t.stateDir }, t.ctx);
    expect(existsSync(r.local_path!)).toBe(true);
    expect(t.calls).toEqual(["stop c-web", "archive c-web journal=c-web", "start c-web"]);
    expect(await readStopJournal(t.stateDir)).toEqual([]);
    expect(t.lines.some((l) => l.includes("started web again"))).toBe(true);
  });

  it("starts them again when the archive fails, and fails with the archive's reason", async () => {
    const t = setup({ archiveFails: true });
    await expect(runVolumeBackup(t.engine, t.payload, { stateDir: t.stateDir }, t.ctx)).rejects.toThrow(/boom/);
    expect(t.calls).toEqual(["stop c-web", "archive c-web journal=c-web", "start c-web"]);
    expect(await readStopJournal(t.stateDir)).toEqual([]);
  });

  it("fails with a reason and keeps the journal entry when a start fails", async () => {
    const t = setup({ startFails: true });
    await expect(runVolumeBackup(t.engine, t.payload, { stateDir: t.stateDir }, t.ctx)).rejects.toThrow(/the backup was stored, but starting the resource's containers again failed \(web: engine said no\)/);
    expect((await readStopJournal(t.stateDir)).map((e) => e.containers)).toEqual([[{ id: "c-web", name: "web" }]]);
  });

  it("off: nothing is stopped", async () => {
    const t = setup();
    await runVolumeBackup(t.engine, { ...t.payload, stop_during_backup: false }, { stateDir: t.stateDir }, t.ctx);
    expect(t.calls).toEqual(["archive c-web journal="]);
  });
});
