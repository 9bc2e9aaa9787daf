import { createServer, type Server as HttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Server, type Socket as ServerSocket } from "socket.io";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { AGENTS_NAMESPACE, AgentHandshake, AgentHello, EV, type HostFacts, JobOutcome, JobProgress, PROTOCOL_VERSION } from "@capstan/shared";
import type { AgentConfig } from "../config.js";
import type { HandlerMap } from "../dispatch/types.js";
import { createLogger, type Logger } from "../log.js";
import { StateStore } from "../state/store.js";
import { AgentConnection } from "./connection.js";

const TOKEN = "agent-token-0123456789abcdef";
const FACTS: HostFacts = {
  hostname: "node-1",
  os: { platform: "linux", distro: "Debian GNU/Linux 12 (bookworm)", release: "12", arch: "x86_64", kernel: "6.1.0" },
  cpu: { cores: 2, model: "Test CPU" },
  memory: { total_bytes: 1e9, available_bytes: 5e8 },
  disk: { total_bytes: 1e10, free_bytes: 5e9 },
  engine: { running: true, version: "20.10.24", api_version: "1.41", compose_version: null, swarm: "inactive" },
};

/** A control plane double speaking the real wire protocol over socket.io. */
class FakeControlPlane {
  http: HttpServer = createServer();
  io = new Server(this.http, { transports: ["websocket"] });
  ns = this.io.of(AGENTS_NAMESPACE);
  handshakes: unknown[] = [];
  hellos: unknown[] = [];
  facts: unknown[] = [];
  outcomes: JobOutcome[] = [];
  progress: JobProgress[] = [];
  ackOutcomes = true;
  rejectWith: string | null = null;
  sockets: ServerSocket[] = [];

  constructor() {
    this.ns.use((socket, next) => {
      this.handshakes.push(socket.handshake.auth);
      if (this.rejectWith) return next(new Error(this.rejectWith));
      next();
    });
    this.ns.on("connection", (socket) => {
      this.sockets.push(socket);
      socket.on(EV.hello, (m: unknown) => this.hellos.push(AgentHello.parse(m)));
      socket.on(EV.facts, (m: unknown) => this.facts.push(AgentHello.parse(m)));
      socket.on(EV.jobProgress, (m: unknown) => this.progress.push(JobProgress.parse(m)));
      socket.on(EV.jobOutcome, (m: unknown, ack: (r: unknown) => void) => {
        this.outcomes.push(JobOutcome.parse(m));
        if (this.ackOutcomes) ack({ ok: true });
      });
    });
  }
  async listen(): Promise<string> {
    await new Promise<void>((r) => this.http.listen(0, "127.0.0.1", r));
    return `http://127.0.0.1:${(this.http.address() as AddressInfo).port}`;
  }
  get current(): ServerSocket {
    const s = this.sockets.at(-1);
    if (!s?.connected) throw new Error("no agent connected");
    return s;
  }
  sendJob(envelope: unknown): Promise<unknown> {
    return this.current.timeout(2000).emitWithAck(EV.job, envelope);
  }
  async close() {
    await new Promise<void>((r) => this.io.close(() => r()));
  }
}

const deadline = () => new Date(Date.now() + 60_000).toISOString();
/** A container.remove handler that reports one progress line. */
const removeWithProgress: Partial<HandlerMap> = {
  "container.remove": async (p, ctx) => {
    ctx.progress(`removing ${p.name}`);
    return { removed: true };
  },
};
const lines: string[] = [];
const log: Logger = createLogger("debug", (l) => lines.push(l));

let dir: string;
let cp: FakeControlPlane;
let conn: AgentConnection | null;
let store: StateStore;

async function startAgent(handlers: Partial<HandlerMap>, over: { onStandDown?: (r: string) => void } = {}) {
  const url = await cp.listen();
  store = await StateStore.open(dir);
  const config: AgentConfig = { url, token: TOKEN, stateDir: dir, dockerSocket: "/nonexistent.sock", logLevel: "debug", extraLabels: {} };
  conn = new AgentConnection({
    config,
    agentVersion: "9.9.9",
    log,
    store,
    handlers: handlers as HandlerMap,
    gatherFacts: async () => FACTS,
    onStandDown: over.onStandDown ?? (() => {}),
    outcomeRetryMs: 50,
    outcomeAckTimeoutMs: 200,
    factsIntervalMs: 100,
    manualReconnectDelay: () => 50,
  });
  conn.start();
  return conn;
}

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-agent-conn-"));
  cp = new FakeControlPlane();
  conn = null;
  lines.length = 0;
});
afterEach(async () => {
  await conn?.stop(100);
  await cp.close();
  // An outcome's ack can still land after stop() (its file rewritten as acked): rm retries past that write.
  await rm(dir, { recursive: true, force: true, maxRetries: 5 });
});

describe("AgentConnection (real socket.io server)", () => {
  it("handshakes with token and protocol version, says hello with facts, then reports facts periodically", async () => {
    await startAgent({});
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1));
    expect(AgentHandshake.parse(cp.handshakes[0])).toEqual({ token: TOKEN, protocol_version: PROTOCOL_VERSION, agent_version: "9.9.9" });
    expect(cp.hellos[0]).toEqual({ facts: FACTS });
    await vi.waitFor(() => expect(cp.facts.length).toBeGreaterThanOrEqual(2));
    expect(lines.join("\n")).not.toContain(TOKEN);
  });

  it("runs a job: ack on receipt, progress, outcome acked and stored", async () => {
    await startAgent(removeWithProgress);
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1));
    const ack = await cp.sendJob({ id: "j1", attempt: 1, type: "container.remove", payload: { name: "web" }, deadline: deadline() });
    expect(ack).toEqual({ accepted: true });
    await vi.waitFor(() => expect(store.getOutcome("j1")?.acked).toBe(true));
    expect(cp.outcomes).toEqual([{ id: "j1", attempt: 1, ok: true, result: { removed: true } }]);
    expect(cp.progress).toEqual([{ id: "j1", attempt: 1, lines: ["removing web"] }]);

    const bad = await cp.sendJob({ id: "j2", attempt: 1, type: "container.remove", payload: {}, deadline: deadline() });
    expect(bad).toMatchObject({ accepted: false, reason: expect.stringMatching(/name/) });
  });

  it("answers a job that ends within answer_within_ms in its ack, progress first; after a reconnect before it settled, sends it again as job:outcome", async () => {
    await startAgent(removeWithProgress);
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1));
    const ack = await cp.sendJob({ id: "j1", attempt: 1, type: "container.remove", payload: { name: "web" }, deadline: deadline(), answer_within_ms: 1000 });
    expect(ack).toEqual({ accepted: true, outcome: { id: "j1", attempt: 1, ok: true, result: { removed: true } } });
    expect(cp.progress).toEqual([{ id: "j1", attempt: 1, lines: ["removing web"] }]);
    await new Promise((r) => setTimeout(r, 200)); // several outbox ticks: nothing goes as job:outcome on this connection
    expect(cp.outcomes).toEqual([]);
    expect(store.getOutcome("j1")?.acked).toBe(false);
    cp.current.disconnect(true);
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(2));
    await vi.waitFor(() => expect(cp.outcomes).toEqual([{ id: "j1", attempt: 1, ok: true, result: { removed: true } }]));
    await vi.waitFor(() => expect(store.getOutcome("j1")?.acked).toBe(true));
  });

  it("re-sends an unacked outcome until the control plane acks it", async () => {
    cp.ackOutcomes = false;
    await startAgent({ "containers.list": async () => ({ containers: [] }) });
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1));
    await cp.sendJob({ id: "j", attempt: 1, type: "containers.list", payload: {}, deadline: deadline() });
    await vi.waitFor(() => expect(cp.outcomes.length).toBeGreaterThanOrEqual(2), { timeout: 3000 });
    expect(store.getOutcome("j")?.acked).toBe(false);
    cp.ackOutcomes = true;
    await vi.waitFor(() => expect(store.getOutcome("j")?.acked).toBe(true), { timeout: 3000 });
  });

  it("after a server-side disconnect it reconnects, says hello again, and a redelivered running job is not run twice", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const validate = vi.fn(async () => {
      await gate;
      return { docker_version: "20.10.24", api_version: "1.41", compose_version: null };
    });
    await startAgent({ "server.validate": validate });
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1));
    await cp.sendJob({ id: "v", attempt: 1, type: "server.validate", payload: {}, deadline: deadline() });
    cp.current.disconnect(true); // "io server disconnect": socket.io would not reconnect by itself
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(2), { timeout: 5000 });
    expect(await cp.sendJob({ id: "v", attempt: 2, type: "server.validate", payload: {}, deadline: deadline() })).toEqual({ accepted: true });
    release();
    await vi.waitFor(() => expect(cp.outcomes).toHaveLength(1));
    expect(cp.outcomes[0]).toMatchObject({ id: "v", attempt: 2, ok: true });
    expect(validate).toHaveBeenCalledTimes(1);
  });

  it("keeps retrying when the handshake is refused, logging the token problem clearly", async () => {
    cp.rejectWith = "invalid token";
    await startAgent({});
    await vi.waitFor(() => expect(cp.handshakes.length).toBeGreaterThanOrEqual(3), { timeout: 5000 });
    const errors = lines.map((l) => JSON.parse(l) as { level: string; msg: string }).filter((l) => l.level === "error");
    expect(errors[0]?.msg).toMatch(/rejected this agent's token/);
    cp.rejectWith = null; // the operator fixed it on the control plane side
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1), { timeout: 5000 });
  });

  it("stand-down: persists the marker, disconnects and reports it", async () => {
    const onStandDown = vi.fn();
    await startAgent({}, { onStandDown });
    await vi.waitFor(() => expect(cp.hellos).toHaveLength(1));
    cp.current.emit(EV.standDown, { reason: "server deleted" });
    await vi.waitFor(() => expect(onStandDown).toHaveBeenCalledWith("server deleted"));
    expect(conn?.socket.connected).toBe(false);
    const reopened = await StateStore.open(dir);
    expect(reopened.isStoodDown(TOKEN)).toBe(true);
    expect(reopened.isStoodDown("another-token-0123456789")).toBe(false);
  });
});
