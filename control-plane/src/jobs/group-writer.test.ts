import { describe, expect, it } from "vitest";
import { GroupWriter } from "./group-writer.js";

describe("group writer", () => {
  it("writes a lone item at once and groups the items that arrive while a write is in flight", async () => {
    const writes: number[][] = [];
    let release: () => void = () => {};
    const w = new GroupWriter<number, string>(async (items) => {
      writes.push(items);
      if (writes.length === 1) await new Promise<void>((r) => (release = r));
      return items.map((i) => `done ${i}`);
    });
    const first = w.add(1);
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([[1]]);
    const later = [w.add(2), w.add(3), w.add(4)];
    await new Promise((r) => setImmediate(r));
    expect(writes).toEqual([[1]]);
    release();
    expect(await first).toBe("done 1");
    expect(await Promise.all(later)).toEqual(["done 2", "done 3", "done 4"]);
    expect(writes).toEqual([[1], [2, 3, 4]]);
  });

  it("caps a group's size", async () => {
    const writes: number[][] = [];
    const w = new GroupWriter<number, number>(async (items) => (writes.push(items), items), { maxItems: 2 });
    await Promise.all([1, 2, 3, 4, 5].map((i) => w.add(i)));
    expect(writes).toEqual([[1, 2], [3, 4], [5]]);
  });

  it("a failed group is retried item by item: only the bad item fails", async () => {
    const w = new GroupWriter<number, number>(async (items) => {
      if (items.includes(13)) throw new Error("bad item");
      return items.map((i) => i * 2);
    });
    const results = await Promise.allSettled([1, 13, 3].map((i) => w.add(i)));
    expect(results.map((r) => (r.status === "fulfilled" ? r.value : (r.reason as Error).message))).toEqual([2, "bad item", 6]);
  });

  it("startOnNextTurn groups what arrives in the same turn and yields between groups", async () => {
    const writes: number[][] = [];
    const w = new GroupWriter<number, void>(async (items) => (writes.push(items), items.map(() => undefined)), { maxItems: 2, startOnNextTurn: true });
    const all = [1, 2, 3].map((i) => w.add(i));
    expect(writes).toEqual([]);
    await Promise.all(all);
    await w.flushed();
    expect(writes).toEqual([[1, 2], [3]]);
  });

  it("with concurrency, a new group starts while another is still being written", async () => {
    const started: number[][] = [];
    const releases: (() => void)[] = [];
    const w = new GroupWriter<number, number>(
      async (items) => {
        started.push(items);
        await new Promise<void>((r) => releases.push(r));
        return items;
      },
      { concurrency: 2 },
    );
    const a = w.add(1);
    await new Promise((r) => setImmediate(r));
    const b = w.add(2);
    const c = w.add(3);
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([[1], [2, 3]]); // the second group did not wait for the first
    const d = w.add(4);
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([[1], [2, 3]]); // two in flight: the fourth waits
    releases[0]!();
    expect(await a).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([[1], [2, 3], [4]]);
    releases[1]!();
    releases[2]!();
    expect(await Promise.all([b, c, d])).toEqual([2, 3, 4]);
    await w.flushed();
  });
});
