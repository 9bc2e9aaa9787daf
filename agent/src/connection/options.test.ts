import { describe, expect, it } from "vitest";
import { AGENTS_NAMESPACE, PROTOCOL_VERSION } from "@capstan/shared";
import { classifyConnectError, controlPlaneTarget, jitteredMaxDelay, RECONNECT, socketOptions } from "./options.js";

describe("socket options", () => {
  it("websocket only, handshake auth, reconnect forever with backoff and jitter", () => {
    const o = socketOptions("tok-0123456789abcdef", "0.1.0", "/socket.io");
    expect(o.transports).toEqual(["websocket"]);
    expect(o.auth).toEqual({ token: "tok-0123456789abcdef", protocol_version: PROTOCOL_VERSION, agent_version: "0.1.0" });
    expect(o.reconnection).toBe(true);
    expect(o.reconnectionAttempts).toBe(Infinity);
    expect(o.reconnectionDelay).toBe(500);
    expect(o.reconnectionDelayMax).toBe(10_000);
    expect(o.randomizationFactor).toBe(0.5);
    expect(o.autoConnect).toBe(false);
  });

  it("the manual reconnect delay stays within max ± 50 %", () => {
    expect(jitteredMaxDelay(() => 0)).toBe(RECONNECT.reconnectionDelayMax * 0.5);
    expect(jitteredMaxDelay(() => 0.5)).toBe(RECONNECT.reconnectionDelayMax);
    expect(jitteredMaxDelay(() => 0.999999)).toBeLessThanOrEqual(RECONNECT.reconnectionDelayMax * 1.5);
  });

  it("targets the /agents namespace, keeping a path prefix for socket.io's endpoint", () => {
    expect(controlPlaneTarget("https://cp.example.com")).toEqual({ url: `https://cp.example.com${AGENTS_NAMESPACE}`, path: "/socket.io" });
    expect(controlPlaneTarget("http://10.0.0.2:8000/")).toEqual({ url: "http://10.0.0.2:8000/agents", path: "/socket.io" });
    expect(controlPlaneTarget("https://example.com/capstan/")).toEqual({ url: "https://example.com/agents", path: "/capstan/socket.io" });
  });
});

describe("classifyConnectError", () => {
  it.each([
    ["invalid token", "invalid_token"],
    ["Invalid agent token", "invalid_token"],
    ["token revoked", "invalid_token"],
    ["Unauthorized", "invalid_token"],
    ["unsupported protocol version 1 (this control plane speaks 2)", "unsupported_protocol"],
    ["protocol_version: incompatible", "unsupported_protocol"],
    ["websocket error", "other"],
    ["xhr poll error", "other"],
    ["timeout", "other"],
  ])("%s -> %s", (message, kind) => {
    expect(classifyConnectError(message)).toBe(kind);
  });
});
