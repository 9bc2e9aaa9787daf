import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { JOURNAL_DIR, readStopJournal, recoverStoppedContainers, removeStopJournal, writeStopJournal, type StopJournalEntry } from "./stop-journal.js";

const entry = (execution: string, ...names: string[]): StopJournalEntry => ({
  resource_uuid: "app-1",
  execution_uuid: execution,
  containers: names.map((n) => ({ id: `id-${n}`, name: n })),
  at: "2026-11-27T00:00:00.000Z",
});

function quietLog() {
  const lines: string[] = [];
  return { lines, info: (m: string) => void lines.push(`info ${m}`), warn: (m: string) => void lines.push(`warn ${m}`) };
}

/** An engine whose startContainer records ids and fails as told (404 for "gone", 500 for "down"). */
function fakeEngine(fail: Record<string, "gone" | "down"> = {}) {
  const started: string[] = [];
  return {
    started,
    async startContainer(id: string) {
      const f = fail[id];
      if (f === "gone") throw Object.assign(new Error(`No such container: ${id}`), { statusCode: 404 });
      if (f === "down") throw Object.assign(new Error("connect ENOENT /var/run/docker.sock"), { statusCode: undefined });
      started.push(id);
    },
  };
}

describe("backup stop journal", () => {
  it("keeps one private entry per backup run, read back as written, removed once done", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-journal-"));
    await writeStopJournal(dir, entry("exec-1", "web"));
    await writeStopJournal(dir, entry("exec-2", "api", "worker"));
    expect(await readStopJournal(dir)).toEqual([entry("exec-1", "web"), entry("exec-2", "api", "worker")]);
    await removeStopJournal(dir, "exec-1");
    await removeStopJournal(dir, "exec-1");
    expect(await readStopJournal(dir)).toEqual([entry("exec-2", "api", "worker")]);
    expect(readdirSync(join(dir, JOURNAL_DIR))).toEqual(["exec-2.json"]);
  });

  it("has no entries when the folder does not exist, refuses keys that are not execution uuids", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-journal-"));
    expect(await readStopJournal(dir)).toEqual([]);
    await expect(writeStopJournal(dir, entry("../escape", "web"))).rejects.toThrow(/not a journal key/);
  });

  it("on start-up starts every container of a leftover entry and removes it; a removed container is skipped", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-journal-"));
    await writeStopJournal(dir, entry("exec-1", "web", "gone"));
    await writeStopJournal(dir, entry("exec-2", "worker"));
    const engine = fakeEngine({ "id-gone": "gone" });
    const log = quietLog();
    expect(await recoverStoppedContainers(engine, dir, log)).toEqual(["web", "worker"]);
    expect(engine.started).toEqual(["id-web", "id-worker"]);
    expect(await readStopJournal(dir)).toEqual([]);
    // Nothing left: a second start-up starts nothing.
    expect(await recoverStoppedContainers(fakeEngine(), dir, log)).toEqual([]);
  });

  it("keeps an entry whose containers could not be started (engine down) for the next start-up", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-journal-"));
    await writeStopJournal(dir, entry("exec-1", "web", "db"));
    const log = quietLog();
    expect(await recoverStoppedContainers(fakeEngine({ "id-db": "down" }), dir, log)).toEqual(["web"]);
    expect(log.lines.some((l) => l.startsWith("warn could not start"))).toBe(true);
    expect((await readStopJournal(dir)).map((e) => e.execution_uuid)).toEqual(["exec-1"]);
    const engine = fakeEngine();
    expect(await recoverStoppedContainers(engine, dir, log)).toEqual(["web", "db"]);
    expect(await readStopJournal(dir)).toEqual([]);
  });

  it("skips unreadable entries (reported, left in place) and removes unfinished temp writes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "capstan-journal-"));
    await mkdir(join(dir, JOURNAL_DIR), { recursive: true });
    writeFileSync(join(dir, JOURNAL_DIR, "broken.json"), "{not json");
    writeFileSync(join(dir, JOURNAL_DIR, ".exec-9.json.1.ab.tmp"), "{}");
    await writeStopJournal(dir, entry("exec-1", "web"));
    const warnings: string[] = [];
    expect((await readStopJournal(dir, (m) => warnings.push(m))).map((e) => e.execution_uuid)).toEqual(["exec-1"]);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/broken\.json is unreadable/);
    expect(readdirSync(join(dir, JOURNAL_DIR)).sort()).toEqual(["broken.json", "exec-1.json"]);
  });
});
