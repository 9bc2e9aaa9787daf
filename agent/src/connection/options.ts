import { AGENTS_NAMESPACE, type AgentHandshake, PROTOCOL_VERSION } from "@capstan/shared";
import type { ManagerOptions, SocketOptions } from "socket.io-client";

/** Reconnect backoff: 500 ms doubling up to 10 s, each delay randomised by ±50 %. */
export const RECONNECT = {
  reconnectionDelay: 500,
  reconnectionDelayMax: 10_000,
  randomizationFactor: 0.5,
} as const;

/**
 * Where the agent connects. A control plane served under a path prefix
 * (https://example.com/capstan) keeps socket.io's endpoint under that prefix, while the
 * namespace stays /agents.
 */
export function controlPlaneTarget(baseUrl: string): { url: string; path: string } {
  const u = new URL(baseUrl);
  const prefix = u.pathname.replace(/\/+$/, "");
  return { url: `${u.origin}${AGENTS_NAMESPACE}`, path: `${prefix}/socket.io` };
}

export function handshake(token: string, agentVersion: string): AgentHandshake {
  return { token, protocol_version: PROTOCOL_VERSION, agent_version: agentVersion };
}

/**
 * socket.io-client options: WebSocket only (one outbound connection, works behind NAT and
 * proxies that pass WebSocket upgrades), reconnect forever with exponential backoff and jitter.
 */
export function socketOptions(token: string, agentVersion: string, path: string): Partial<ManagerOptions & SocketOptions> {
  return {
    path,
    transports: ["websocket"],
    auth: handshake(token, agentVersion),
    autoConnect: false,
    reconnection: true,
    reconnectionAttempts: Infinity,
    ...RECONNECT,
    timeout: 20_000,
  };
}

/** A delay for reconnects socket.io does not do itself (rejected handshake, server disconnect). */
export function jitteredMaxDelay(random: () => number = Math.random): number {
  const { reconnectionDelayMax: max, randomizationFactor: f } = RECONNECT;
  return Math.round(max * (1 - f + 2 * f * random()));
}

export type ConnectErrorKind = "invalid_token" | "unsupported_protocol" | "other";

/** Sorts a connect_error by what the operator must do about it. */
export function classifyConnectError(message: string): ConnectErrorKind {
  const m = message.toLowerCase();
  if (/protocol/.test(m) && /version|unsupported|incompatible/.test(m)) return "unsupported_protocol";
  if (/token/.test(m) && /invalid|unknown|revoked|expired|rejected|bad|not (found|valid)/.test(m)) return "invalid_token";
  if (/unauthori[sz]ed|unauthenticated/.test(m)) return "invalid_token";
  return "other";
}
