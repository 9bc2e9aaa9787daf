import { afterEach, describe, expect, it, vi } from "vitest";
import { ThrottledBatch } from "./throttled-batch.js";

const turn = () => new Promise((r) => setImmediate(r));

describe("ThrottledBatch", () => {
  afterEach(() => vi.useRealTimers());

  it("handles a lone item on the next turn, and items of one turn in one pass", async () => {
    const passes: number[][] = [];
    const b = new ThrottledBatch<number>(100, async (items) => void passes.push(items));
    b.add(1);
    b.add(2);
    expect(passes).toEqual([]);
    await turn();
    expect(passes).toEqual([[1, 2]]);
  });

  it("runs at most one pass per interval: items arriving meanwhile wait and go together", async () => {
    let now = 0;
    const passes: number[][] = [];
    const b = new ThrottledBatch<number>(100, async (items) => void passes.push(items), undefined, () => now);
    b.add(1);
    await turn();
    b.add(2);
    b.add(3);
    await turn();
    expect(passes).toEqual([[1]]); // 2 and 3 wait for the interval
    now = 100;
    await new Promise((r) => setTimeout(r, 120));
    expect(passes).toEqual([[1], [2, 3]]);
  });

  it("keeps items that arrive during a pass for the next one, and reports a failed pass", async () => {
    const passes: number[][] = [];
    const errors: unknown[] = [];
    let release = () => {};
    const b = new ThrottledBatch<number>(
      0,
      async (items) => {
        passes.push(items);
        if (items[0] === 1) await new Promise<void>((r) => (release = r));
        if (items[0] === 2) throw new Error("boom");
      },
      (err) => errors.push(err),
    );
    b.add(1);
    await turn();
    b.add(2);
    await turn();
    expect(passes).toEqual([[1]]);
    release();
    await turn();
    await turn();
    expect(passes).toEqual([[1], [2]]);
    expect(errors).toHaveLength(1);
    b.add(3);
    await b.close();
    expect(passes).toEqual([[1], [2], [3]]);
    b.add(4); // closed: dropped
    await turn();
    expect(passes).toHaveLength(3);
  });
});
