import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Sqlite from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openReader, type SqlReader } from "../db/reader.js";
import type { JobQueue } from "../jobs/queue.js";
import { followDeploymentLog } from "./deployment-logs.js";

/** A real SQLite file with the Job columns the follower reads; the test writes the log as the queue would. */
let dir: string;
let db: Sqlite.Database;
let reader: SqlReader;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "capstan-follow-"));
  const file = join(dir, "db.sqlite");
  db = new Sqlite(file);
  db.exec(`CREATE TABLE "Job" ("id" TEXT PRIMARY KEY, "log" TEXT NOT NULL DEFAULT '')`);
  reader = openReader({ kind: "sqlite", file });
});
afterAll(async () => {
  await reader.close();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const noEvents = { onProgress: () => () => {} } as unknown as JobQueue;
const setLog = (id: string, log: string) => db.prepare(`INSERT INTO "Job" ("id", "log") VALUES (?, ?) ON CONFLICT("id") DO UPDATE SET "log" = excluded."log"`).run(id, log);

/** Runs the follower over scripted steps: each poll applies the next change before reading. */
async function follow(id: string, steps: (() => void)[], opts: { capChars?: number } = {}) {
  const sent: string[] = [];
  let gaps = 0;
  let polls = 0;
  const end = await followDeploymentLog({
    reader,
    jobs: noEvents,
    state: async () => {
      const step = steps[polls++];
      step?.();
      return { status: polls > steps.length ? "finished" : "in_progress", jobId: id };
    },
    send: (t) => sent.push(t),
    gap: () => gaps++,
    signal: new AbortController().signal,
    maxMs: 10_000,
    capChars: opts.capChars ?? 1_000_000,
    pollMs: 1,
  });
  return { sent, gaps, end };
}

describe("following a deployment's log", () => {
  it("sends what is stored, then only what was appended, and ends with the deployment", async () => {
    const r = await follow("a", [() => setLog("a", "one\ntwo\n"), () => setLog("a", "one\ntwo\nthree\n"), () => {}, () => setLog("a", "one\ntwo\nthree\nfour\n")]);
    expect(r.sent.join("")).toBe("one\ntwo\nthree\nfour\n");
    expect(r.sent).toEqual(["one\ntwo\n", "three\n", "four\n"]);
    expect(r.end).toEqual({ ended: true, status: "finished" });
    expect(r.gaps).toBe(0);
  });

  it("keeps its place once the log is at its cap and trimmed at the front, even with repetitive lines", async () => {
    const cap = 4000;
    const line = (i: number) => `line ${String(i).padStart(4, "0")} ${"x".repeat(80)}\n`;
    let all = "";
    const append = (from: number, to: number) => () => {
      for (let i = from; i < to; i++) all += line(i);
      setLog("b", all.slice(-cap)); // what the queue's UPDATE keeps
    };
    const r = await follow("b", [append(0, 20), append(20, 40), append(40, 60), () => {}, append(60, 61)], { capChars: cap });
    const expected = Array.from({ length: 61 }, (_, i) => line(i)).join("");
    // The first read came before the cap; every later line arrives once, in order.
    expect(r.sent.join("")).toBe(expected);
    expect(r.gaps).toBe(0);
  });

  it("reports a gap when the cap dropped output it had not read yet", async () => {
    const cap = 200;
    const r = await follow("c", [() => setLog("c", "early line one\nearly line two\n"), () => setLog("c", ("later " + "y".repeat(60) + "\n").repeat(5).slice(-cap))], { capChars: cap });
    expect(r.sent[0]).toBe("early line one\nearly line two\n");
    expect(r.gaps).toBe(1);
    expect(r.sent[1]).toBe(("later " + "y".repeat(60) + "\n").repeat(5).slice(-cap));
  });

  it("stops at its time limit while the deployment runs on", async () => {
    const started = Date.now();
    const sent: string[] = [];
    const end = await followDeploymentLog({
      reader,
      jobs: noEvents,
      state: async () => ({ status: "in_progress", jobId: null }),
      send: (t) => sent.push(t),
      gap: () => {},
      signal: new AbortController().signal,
      maxMs: 200,
      capChars: 1_000_000,
      pollMs: 20,
    });
    expect(end).toEqual({ ended: false, reason: "timeout" });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(sent).toEqual([]);
  });
});
