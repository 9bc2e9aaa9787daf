import { describe, expect, it } from "vitest";
import { Readable } from "node:stream";
import type { Engine } from "../docker/engine.js";
import { readEventLines } from "../docker/dockerode-engine.js";
import { engineTimestamp, swarmEvents } from "./swarm.js";

const ctx = { signal: new AbortController().signal, progress: () => {}, job: { id: "job-1", attempt: 1 } };

/** An engine double answering GET /events from a fixed list, as the engine filters it (since inclusive, until, type). */
function engineWith(events: Record<string, unknown>[]) {
  const asked: { since: string; until: string; types: readonly string[] }[] = [];
  const engine = {
    swarmEvents: async (w: { since: string; until: string; types: readonly string[] }) => {
      asked.push(w);
      const at = (t: string) => BigInt(t.replace(".", ""));
      return events.filter((e) => w.types.includes(String(e.Type)) && BigInt(String(e.timeNano)) >= at(w.since) && BigInt(String(e.timeNano)) <= at(w.until));
    },
  } as unknown as Engine;
  return { engine, asked };
}

const ev = (Type: string, Action: string, id: string, timeNano: string, attrs: Record<string, unknown> = {}) => ({ Type, Action, Actor: { ID: id, Attributes: attrs }, timeNano });

describe("swarm.events", () => {
  it("asks the engine for a finite window (since..now) of node, service, secret and config events and answers them oldest first, exact to the nanosecond", async () => {
    const { engine, asked } = engineWith([
      ev("service", "update", "svc1", "1790000000000000002", { name: "web", "replicas.old": "1", "replicas.new": "3" }),
      ev("node", "update", "node1", "1790000000000000001", { name: "host-a", "availability.new": "drain" }),
      ev("container", "start", "c1", "1790000000000000003"),
      ev("config", "create", "cfg1", "1789999999999999999"),
      { Type: "node", Action: "", Actor: { ID: "x" }, timeNano: "1790000000000000004" },
    ]);
    const now = 1_790_000_001_000;
    const r = await swarmEvents(engine, () => now)({ since_nano: "1790000000000000000" }, ctx);
    expect(asked).toEqual([{ since: "1790000000.000000000", until: "1790000001.000000000", types: ["node", "service", "secret", "config"] }]);
    expect(r.until_nano).toBe("1790000001000000000");
    expect(r.events).toEqual([
      { type: "node", action: "update", actor_id: "node1", attributes: { name: "host-a", "availability.new": "drain" }, time_nano: "1790000000000000001" },
      { type: "service", action: "update", actor_id: "svc1", attributes: { name: "web", "replicas.old": "1", "replicas.new": "3" }, time_nano: "1790000000000000002" },
    ]);
  });

  it("drops attributes that are not strings and bounds long values", async () => {
    const { engine } = engineWith([ev("secret", "create", "sec1", "1790000000000000005", { name: "s", n: 5, long: "x".repeat(5000) })]);
    const r = await swarmEvents(engine, () => 1_790_000_001_000)({ since_nano: "0" }, ctx);
    expect(r.events[0]!.attributes).toEqual({ name: "s", long: "x".repeat(4096) });
  });

  it("engine timestamps: seconds.nanoseconds", () => {
    expect(engineTimestamp("0")).toBe("0.000000000");
    expect(engineTimestamp("00001790000000123456789")).toBe("1790000000.123456789");
  });

  it("reads the engine's newline-delimited events split anywhere, keeping timeNano's digits a double would lose", async () => {
    const lines = '{"Type":"node","Action":"update","Actor":{"ID":"n1","Attributes":{}},"time":1790000000,"timeNano":1790000000123456789}\n{"Type":"service","Action":"create","Actor":{"ID":"s1"},"timeNano":1790000000123456790}\n';
    const chunks = [lines.slice(0, 37), lines.slice(37, 120), lines.slice(120)];
    const out = await readEventLines(Readable.from(chunks.map((c) => Buffer.from(c))), 1 << 20);
    expect(out.map((e) => [e.Type, e.timeNano])).toEqual([
      ["node", "1790000000123456789"],
      ["service", "1790000000123456790"],
    ]);
    await expect(readEventLines(Readable.from([Buffer.from(lines)]), 10)).rejects.toThrow(/exceeded/);
  });
});
