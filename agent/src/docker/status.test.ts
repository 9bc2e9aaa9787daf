import { describe, expect, it } from "vitest";
import { containerStatus } from "./status.js";

describe("containerStatus", () => {
  it.each([
    ["running", "healthy", "running:healthy"],
    ["running", "unhealthy", "running:unhealthy"],
    ["running", "starting", "running:starting"],
    ["running", null, "running:unknown"],
    ["running", undefined, "running:unknown"],
    ["running", "none", "running:unknown"],
    ["exited", "unhealthy", "exited:unhealthy"],
    ["exited", null, "exited:unknown"],
    ["created", null, "created:unknown"],
    ["Paused", "Healthy", "paused:healthy"],
    ["restarting", "starting", "restarting:starting"],
    ["", null, "unknown:unknown"],
  ])("%s + %s -> %s", (state, health, expected) => {
    expect(containerStatus(state, health)).toBe(expected);
  });
});
