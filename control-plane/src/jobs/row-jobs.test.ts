import { describe, expect, it } from "vitest";
import { RowJobRunner, type RowJobTable } from "./row-jobs.js";

const OPTS = { concurrency: 2, heartbeatMs: 1_000, staleMs: 30_000, sweepMs: 60_000 };
const log = { warn: () => undefined, error: () => undefined };

/** A run that waits until released, recording how many ran at once. */
function gatedRuns() {
  const releases = new Map<number, () => void>();
  const started: number[] = [];
  let live = 0;
  let peak = 0;
  const run = async (id: number) => {
    started.push(id);
    peak = Math.max(peak, ++live);
    await new Promise<void>((r) => releases.set(id, r));
    live--;
    return false;
  };
  const release = (id: number) => {
    releases.get(id)!();
    releases.delete(id);
  };
  return { run, release, started, peak: () => peak, waiting: () => [...releases.keys()] };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("RowJobRunner", () => {
  it("runs at most `concurrency` rows at once and a row at most once here", async () => {
    const g = gatedRuns();
    const table: RowJobTable = { recoverStale: async () => undefined, due: async () => [] };
    const runner = new RowJobRunner({ name: "test", idKey: "id" }, table, g.run, OPTS);
    runner.start(log);
    for (const id of [1, 2, 3, 3]) runner.enqueue(id);
    await tick();
    expect(g.started).toEqual([1, 2]);
    expect(runner.has(3)).toBe(true);
    g.release(1);
    await tick();
    expect(g.started).toEqual([1, 2, 3]);
    g.release(2);
    g.release(3);
    await runner.idle();
    expect(g.peak()).toBe(2);
    await runner.stop();
  });

  it("a row asked for while it runs here runs once more after, not twice at once", async () => {
    const g = gatedRuns();
    const runner = new RowJobRunner({ name: "test", idKey: "id" }, { recoverStale: async () => undefined, due: async () => [] }, g.run, OPTS);
    runner.start(log);
    runner.enqueue(5);
    await tick();
    runner.enqueue(5);
    runner.enqueue(5);
    await tick();
    expect(g.started).toEqual([5]);
    g.release(5);
    await tick();
    await tick();
    expect(g.started).toEqual([5, 5]);
    expect(g.peak()).toBe(1);
    g.release(5);
    await runner.idle();
    expect(g.started).toEqual([5, 5]);
    await runner.stop();
  });

  it("runs a row once more when its run says it was asked for again", async () => {
    let runs = 0;
    const runner = new RowJobRunner({ name: "test", idKey: "id" }, { recoverStale: async () => undefined, due: async () => [] }, async () => ++runs < 3, OPTS);
    runner.start(log);
    runner.enqueue(7);
    await runner.idle();
    expect(runs).toBe(3);
    await runner.stop();
  });

  it("a sweep recovers stale rows (not those running here) and runs the due ones; a failing run is logged, not thrown", async () => {
    const g = gatedRuns();
    const recovered: { live: number[] }[] = [];
    let due = [4];
    const errors: unknown[] = [];
    const table: RowJobTable = {
      recoverStale: async (_before, live) => recovered.push({ live }),
      due: async () => due,
    };
    const runner = new RowJobRunner({ name: "test", idKey: "id" }, table, async (id) => (id === 9 ? Promise.reject(new Error("boom")) : g.run(id)), OPTS);
    runner.start({ warn: () => undefined, error: (o: unknown) => errors.push(o) });
    await expect.poll(() => g.started).toEqual([4]);
    due = [5, 9]; // 4 is claimed now: no longer due
    await runner.sweep();
    expect(recovered.at(-1)).toEqual({ live: [4] });
    await expect.poll(() => g.started).toEqual([4, 5]);
    g.release(4);
    await expect.poll(() => errors.length).toBe(1);
    g.release(5);
    await runner.idle();
    await runner.stop();
  });

  it("stop interrupts, awaits the running rows and takes no more work", async () => {
    const g = gatedRuns();
    const runner = new RowJobRunner({ name: "test", idKey: "id" }, { recoverStale: async () => undefined, due: async () => [] }, g.run, OPTS);
    runner.start(log);
    runner.enqueue(1);
    runner.enqueue(2);
    runner.enqueue(3);
    await tick();
    let stopped = false;
    const stopping = runner.stop(() => g.waiting().forEach((id) => g.release(id))).then(() => (stopped = true));
    await stopping;
    expect(stopped).toBe(true);
    expect(g.started).toEqual([1, 2]);
    runner.enqueue(4);
    expect(runner.has(4)).toBe(false);
  });
});
