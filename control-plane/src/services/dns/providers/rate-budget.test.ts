import { describe, expect, it } from "vitest";
import { CallBudget } from "./rate-budget.js";

// ---- cloudflare_tunnel / rate limits (issue 21, w7) ----

describe("provider call budget", () => {
  const clock = () => {
    let t = 1_000_000;
    const slept: number[] = [];
    return { now: () => t, sleep: async (ms: number) => void (slept.push(ms), (t += ms)), slept, advance: (ms: number) => (t += ms) };
  };

  it("allows `limit` calls per window, waits for room when it comes soon, refuses when it does not", async () => {
    const c = clock();
    const b = new CallBudget(3, 60_000, 10_000, c.now);
    for (let i = 0; i < 3; i++) await b.take("k", c.sleep, "X");
    // Room in 60 s: longer than the 10 s held, so refused without a call.
    await expect(b.take("k", c.sleep, "X")).rejects.toThrow(/budget of 3 X requests per 1 minutes .* possible in 60 s/);
    expect(c.slept).toEqual([]);
    c.advance(55_000);
    await b.take("k", c.sleep, "X");
    expect(c.slept).toEqual([5_000]);
    // Another credential has its own budget.
    await b.take("other", c.sleep, "X");
  });

  it("a pause asked by the provider holds every call of the key until it is over", async () => {
    const c = clock();
    const b = new CallBudget(100, 60_000, 10_000, c.now);
    b.pause("k", 2_000);
    await b.take("k", c.sleep, "X");
    expect(c.slept).toEqual([2_000]);
    b.pause("k", 300_000);
    await expect(b.take("k", c.sleep, "X")).rejects.toThrow(/X asked to wait 300 s more/);
    await b.take("other", c.sleep, "X");
  });
});
