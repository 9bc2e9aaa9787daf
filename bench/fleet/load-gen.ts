/**
 * Simulated agents: one socket.io-client WebSocket connection per token, in this process.
 * In "capstan" mode each speaks the agent protocol (handshake auth with its token and
 * PROTOCOL_VERSION, EV.hello with small HostFacts on every connect, jobs acked and answered
 * with a JobOutcome at once); in "bare" mode each just answers "echo" with its payload.
 * Reconnection is socket.io's own, with the real agent's backoff (agent/src/connection/
 * options.ts RECONNECT); a handshake refused by the server is retried after a jittered
 * 5-15 s like the real agent does.
 */
import { readFileSync } from "node:fs";
import { io, type Socket } from "socket.io-client";
import { AGENTS_NAMESPACE, EV, PROTOCOL_VERSION, type JobEnvelope } from "@capstan/shared";
import { watchStalls, idleCost, memoryAfterGc, notifyParent, serveParent } from "./ipc.js";

// The real agent's reconnect settings, so the restart figures are what a fleet would see.
import { RECONNECT, jitteredMaxDelay } from "../../agent/src/connection/options.js";
import { sampleHostFacts } from "../../test/support/host-facts.js";

const facts = sampleHostFacts("fleet-bench");

type Mode = "capstan" | "bare";

interface SimAgent {
  socket: Socket;
  /** Date.now() of the last time this agent became ready (hello acked / bare: connected). */
  readyAt: number;
  closed: boolean;
  retryTimer: NodeJS.Timeout | null;
  /** Called each time the agent becomes ready. */
  onReady: (() => void) | null;
}

const agents: SimAgent[] = [];
const counters = {
  connects: 0,
  disconnects: 0,
  connectErrors: 0,
  reconnectAttempts: 0,
  helloFailures: 0,
  jobs: 0,
  outcomesStored: 0,
  outcomeFailures: 0,
  echoes: 0,
};
const connectErrorKinds: Record<string, number> = {};

function resultFor(envelope: JobEnvelope): { ok: true; result: unknown } | { ok: false; error: string } {
  switch (envelope.type) {
    case "containers.list":
      return { ok: true, result: { containers: [] } };
    case "server.validate":
      return { ok: true, result: { docker_version: "24.0.7", api_version: "1.43", compose_version: "2.21.0" } };
    case "server.prepare": {
      const networks = (envelope.payload as { networks?: string[] } | null)?.networks ?? [];
      return { ok: true, result: { created: [], existing: networks } };
    }
    default:
      return { ok: false, error: `fleet bench agent does not run ${envelope.type}` };
  }
}

const disconnectReasons: Record<string, number> = {};

function makeAgent(url: string, mode: Mode, token: string): SimAgent {
  const socket = io(url + AGENTS_NAMESPACE, {
    forceNew: true, // one connection per agent, never multiplexed
    transports: ["websocket"],
    auth: mode === "capstan" ? { token, protocol_version: PROTOCOL_VERSION, agent_version: "fleet-bench" } : {},
    autoConnect: false,
    reconnection: true,
    reconnectionAttempts: Infinity,
    ...RECONNECT,
    timeout: 20_000,
  });
  const agent: SimAgent = { socket, readyAt: 0, closed: false, retryTimer: null, onReady: null };
  const ready = () => {
    agent.readyAt = Date.now();
    agent.onReady?.();
  };
  socket.io.on("reconnect_attempt", () => counters.reconnectAttempts++);
  socket.on("connect", () => {
    counters.connects++;
    if (mode === "bare") return ready();
    const sid = socket.id;
    socket
      .timeout(20_000)
      .emitWithAck(EV.hello, { facts })
      .then(() => {
        if (socket.id === sid && socket.connected) ready();
      })
      .catch(() => counters.helloFailures++);
  });
  socket.on("disconnect", (reason: string) => {
    counters.disconnects++;
    disconnectReasons[reason] = (disconnectReasons[reason] ?? 0) + 1;
  });
  socket.on("connect_error", (err: Error) => {
    counters.connectErrors++;
    const kind = err.message.slice(0, 80);
    connectErrorKinds[kind] = (connectErrorKinds[kind] ?? 0) + 1;
    // A handshake refused by the server's middleware is not retried by socket.io itself.
    if (!socket.active && !agent.closed && !agent.retryTimer) {
      agent.retryTimer = setTimeout(() => {
        agent.retryTimer = null;
        if (!agent.closed && !socket.connected) socket.connect();
      }, jitteredMaxDelay());
    }
  });
  if (mode === "capstan") {
    socket.on(EV.job, (envelope: JobEnvelope, ack?: (r: unknown) => void) => {
      counters.jobs++;
      const outcome = { id: envelope.id, attempt: envelope.attempt, ...resultFor(envelope) };
      // As the real agent (agent/src/dispatch/runner.ts): a job that ends within the window the
      // control plane offers is answered in its ack; otherwise ack, then job:outcome.
      if (envelope.answer_within_ms && typeof ack === "function") {
        ack({ accepted: true, outcome });
        counters.outcomesStored++;
        return;
      }
      if (typeof ack === "function") ack({ accepted: true });
      socket
        .timeout(10_000)
        .emitWithAck(EV.jobOutcome, outcome)
        .then(
          () => counters.outcomesStored++,
          () => counters.outcomeFailures++,
        );
    });
  } else {
    socket.on("echo", (payload: unknown, ack?: (r: unknown) => void) => {
      counters.echoes++;
      if (typeof ack === "function") ack(payload);
    });
  }
  return agent;
}

function readyCount(since: number): number {
  let n = 0;
  for (const a of agents) if (a.socket.connected && a.readyAt >= since) n++;
  return n;
}

function closeAll(): number {
  const n = agents.length;
  for (const a of agents) {
    a.closed = true;
    if (a.retryTimer) clearTimeout(a.retryTimer);
    a.socket.io.reconnection(false);
    a.socket.disconnect();
  }
  agents.length = 0;
  return n;
}

const stalls = watchStalls();

serveParent({
  stalls: () => stalls(),
  /**
   * Creates one agent per token line [from, to) of tokensFile (or `count` tokenless sockets
   * in bare mode) and connects them, `concurrency` handshakes in flight; resolves when every
   * one is ready or its wait timed out.
   */
  connect: async (args: {
    url: string;
    mode: Mode;
    tokensFile?: string;
    from: number;
    to: number;
    concurrency: number;
    perAgentTimeoutMs: number;
  }) => {
    const tokens = args.mode === "capstan" ? readFileSync(args.tokensFile!, "utf8").split("\n").slice(args.from, args.to) : [];
    const count = args.to - args.from;
    const since = Date.now();
    let next = 0;
    let timedOut = 0;
    const progress = setInterval(() => void notifyParent("progress", { ready: readyCount(since), of: count }), 1000);
    try {
      const worker = async () => {
        while (next < count) {
          const i = next++;
          const agent = makeAgent(args.url, args.mode, tokens[i] ?? "");
          agents.push(agent);
          // wait until ready (or timed out), then hand the slot to the next agent
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => {
              timedOut++;
              agent.onReady = null;
              resolve();
            }, args.perAgentTimeoutMs);
            agent.onReady = () => {
              clearTimeout(timer);
              agent.onReady = null;
              resolve();
            };
            agent.socket.connect();
          });
        }
      };
      await Promise.all(Array.from({ length: Math.min(args.concurrency, count) }, worker));
    } finally {
      clearInterval(progress);
    }
    return { ms: Date.now() - since, ready: readyCount(since), timedOut };
  },
  status: (args: { since?: number } | undefined) => ({
    agents: agents.length,
    connected: agents.filter((a) => a.socket.connected).length,
    ready: readyCount(args?.since ?? 0),
    counters,
    connectErrorKinds,
    disconnectReasons,
  }),
  /** Per-agent time from `since` to its last ready, for agents ready after `since` (ms). */
  readyTimes: (args: { since: number }) => agents.filter((a) => a.socket.connected && a.readyAt >= args.since).map((a) => a.readyAt - args.since),
  resetCounters: () => {
    for (const k of Object.keys(counters) as (keyof typeof counters)[]) counters[k] = 0;
    for (const k of Object.keys(connectErrorKinds)) delete connectErrorKinds[k];
    for (const k of Object.keys(disconnectReasons)) delete disconnectReasons[k];
    return true;
  },
  idle: (args: { ms: number }) => idleCost(args.ms),
  mem: () => memoryAfterGc().then((m) => ({ ...m, agents: agents.length })),
  closeAll: async () => {
    const n = closeAll();
    await new Promise((r) => setTimeout(r, 500));
    return n;
  },
});
