import { describe, expect, it } from "vitest";
import { seenAt } from "./server-seen.js";

const hello = new Date("2026-11-27T09:00:00Z");
const beat = new Date("2026-11-27T09:00:10Z");
const beats = new Map([["r1", beat]]);

describe("seenAt", () => {
  it("a reachable server is seen until its replica's last beat", () => {
    expect(seenAt({ status: "reachable", lastSeenAt: hello, gatewayReplica: "r1" }, beats)).toEqual(beat);
  });
  it("its own row wins when later (a facts report after the beat)", () => {
    const report = new Date("2026-11-27T09:00:12Z");
    expect(seenAt({ status: "reachable", lastSeenAt: report, gatewayReplica: "r1" }, beats)).toEqual(report);
  });
  it("an unreachable server, one without a replica, or one whose replica is gone keeps its row's time", () => {
    expect(seenAt({ status: "unreachable", lastSeenAt: hello, gatewayReplica: "r1" }, beats)).toEqual(hello);
    expect(seenAt({ status: "reachable", lastSeenAt: hello, gatewayReplica: null }, beats)).toEqual(hello);
    expect(seenAt({ status: "reachable", lastSeenAt: null, gatewayReplica: "gone" }, beats)).toBeNull();
  });
});
