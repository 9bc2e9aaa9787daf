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
});
