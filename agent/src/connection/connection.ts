import { io, type Socket } from "socket.io-client";
import { EV, type HostFacts, type JobOutcome, type JobProgress, type ResourceStatusReport, StandDown } from "@capstan/shared";
import type { AgentConfig } from "../config.js";
import { OutcomeOutbox, type Transport } from "../dispatch/outbox.js";
import { JobRunner } from "../dispatch/runner.js";
import type { HandlerMap } from "../dispatch/types.js";
import { errorMessage, type Logger } from "../log.js";
import type { StateStore } from "../state/store.js";
import { classifyConnectError, controlPlaneTarget, jitteredMaxDelay, socketOptions } from "./options.js";

export const FACTS_INTERVAL_MS = 60_000;
/** How long one send waits for its ack (re-sends happen every OUTCOME_RETRY_MS meanwhile). */
export const OUTCOME_ACK_TIMEOUT_MS = 30_000;
export const OUTCOME_RETRY_MS = 2_000;

export interface AgentConnectionOptions {
  config: AgentConfig;
  agentVersion: string;
  log: Logger;
  store: StateStore;
  handlers: HandlerMap;
  gatherFacts: () => Promise<HostFacts>;
  /** Called on every (re)connect, after hello: e.g. a full resource status report. */
  onConnect?: () => void;
  /** Called after a stand-down was persisted (main exits 0). */
  onStandDown: (reason: string) => void;
  /** Timings (tests shorten them). */
  outcomeRetryMs?: number;
  outcomeAckTimeoutMs?: number;
  factsIntervalMs?: number;
  /** Delay before reconnects socket.io does not do itself (default: max backoff ± jitter). */
  manualReconnectDelay?: () => number;
}

/**
 * The agent's one outbound socket.io connection to the control plane's /agents namespace:
 * hello + periodic facts, jobs in, progress and outcomes out, stand-down.
 */
export class AgentConnection {
  readonly socket: Socket;
  readonly runner: JobRunner;
  readonly outbox: OutcomeOutbox;
  private readonly log: Logger;
  private factsTimer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private stopping = false;
  private lastConnectError = "";

  constructor(private readonly opts: AgentConnectionOptions) {
    this.log = opts.log;
    const { url, path } = controlPlaneTarget(opts.config.url);
    this.socket = io(url, socketOptions(opts.config.token, opts.agentVersion, path));
    const transport: Transport = {
      isConnected: () => this.socket.connected,
      // socket.io gives each connection its own id.
      connectionId: () => (this.socket.connected ? this.socket.id : undefined),
      sendOutcome: (outcome: JobOutcome) =>
        this.socket.timeout(opts.outcomeAckTimeoutMs ?? OUTCOME_ACK_TIMEOUT_MS).emitWithAck(EV.jobOutcome, outcome),
      sendProgress: (progress: JobProgress) => {
        this.socket.volatile.emit(EV.jobProgress, progress);
      },
    };
    this.outbox = new OutcomeOutbox(opts.store, transport, { retryMs: opts.outcomeRetryMs ?? OUTCOME_RETRY_MS, log: this.log });
    this.runner = new JobRunner({ handlers: opts.handlers, store: opts.store, outbox: this.outbox, transport, log: this.log });
    this.wire();
  }

  start(): void {
    const { url, path } = controlPlaneTarget(this.opts.config.url);
    this.log.info("connecting to the control plane", { url, path, agent_version: this.opts.agentVersion });
    this.outbox.start();
    this.socket.connect();
  }

  /** Closes the connection; running jobs get up to graceMs to finish and store their outcome. */
  async stop(graceMs = 5_000): Promise<void> {
    this.stopping = true;
    this.clearTimers();
    const drained = await this.runner.drain(graceMs);
    if (!drained) this.log.warn("stopping with jobs still running; the control plane will redeliver them");
    // Give freshly stored outcomes one chance to go out before closing.
    this.outbox.kick();
    this.outbox.stop();
    await this.opts.store.flush();
    this.socket.disconnect();
  }

  private clearTimers(): void {
    if (this.factsTimer) clearInterval(this.factsTimer);
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    this.factsTimer = null;
    this.reconnectTimer = null;
  }

  private wire(): void {
    const s = this.socket;
    s.on("connect", () => {
      this.lastConnectError = "";
      this.log.info("connected to the control plane", { sid: s.id });
      void this.sendFacts(EV.hello);
      this.outbox.kick(true);
      this.opts.onConnect?.();
      if (this.factsTimer) clearInterval(this.factsTimer);
      this.factsTimer = setInterval(() => void this.sendFacts(EV.facts), this.opts.factsIntervalMs ?? FACTS_INTERVAL_MS);
      this.factsTimer.unref();
    });

    s.on("disconnect", (reason) => {
      if (this.factsTimer) clearInterval(this.factsTimer);
      this.factsTimer = null;
      if (this.stopping) return;
      this.log.warn("disconnected from the control plane", { reason });
      // socket.io reconnects by itself except after a server-side disconnect.
      if (reason === "io server disconnect") this.scheduleReconnect();
    });

    s.on("connect_error", (err: Error) => {
      if (this.stopping) return;
      const kind = classifyConnectError(err.message);
      const message = err.message;
      if (kind === "invalid_token") {
        this.log.error("the control plane rejected this agent's token (CAPSTAN_AGENT_TOKEN); retrying, fix the token or re-add the server", { reason: message });
      } else if (kind === "unsupported_protocol") {
        this.log.error("the control plane does not support this agent's protocol version; upgrade the agent (or the control plane). Retrying", { reason: message });
      } else if (message !== this.lastConnectError) {
        this.log.warn("cannot reach the control plane; retrying with backoff", { reason: message });
      } else {
        this.log.debug("still cannot reach the control plane", { reason: message });
      }
      this.lastConnectError = message;
      // A handshake refused by the server's middleware is not retried by socket.io itself.
      if (!s.active) this.scheduleReconnect();
    });

    s.on(EV.job, (raw: unknown, ack?: unknown) => {
      const reply = typeof ack === "function" ? (ack as (a: unknown) => void) : undefined;
      // Shutting down: not accepted, so the control plane keeps it for the next connection.
      if (this.stopping) return reply?.({ accepted: false, reason: "agent is shutting down" });
      this.runner.onJob(raw, reply);
    });
    s.on(EV.jobCancel, (raw: unknown) => this.runner.onCancel(raw));
    s.on(EV.standDown, (raw: unknown, ack?: unknown) => void this.standDown(raw, ack));
  }

  /** Sends resource statuses when connected; when not, the next connect's full report covers them. */
  reportStatus(report: ResourceStatusReport): void {
    if (this.socket.connected) this.socket.emit(EV.resourceStatus, report);
  }

  private scheduleReconnect(): void {
    if (this.stopping || this.reconnectTimer) return;
    const delay = (this.opts.manualReconnectDelay ?? jitteredMaxDelay)();
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.stopping && !this.socket.connected) this.socket.connect();
    }, delay);
  }

  /** Sends the host facts now (e.g. the engine came or went), when connected; else the next hello carries them. */
  refreshFacts(): void {
    if (this.socket.connected) void this.sendFacts(EV.facts);
  }

  private factsInFlight = false;
  private async sendFacts(event: typeof EV.hello | typeof EV.facts): Promise<void> {
    if (this.factsInFlight && event === EV.facts) return;
    this.factsInFlight = true;
    try {
      const facts = await this.opts.gatherFacts();
      if (this.socket.connected) this.socket.emit(event, { facts });
    } catch (err) {
      this.log.error("could not gather host facts", { err: errorMessage(err) });
    } finally {
      this.factsInFlight = false;
    }
  }

  private async standDown(raw: unknown, ack: unknown): Promise<void> {
    const parsed = StandDown.safeParse(raw);
    const reason = parsed.success ? parsed.data.reason : "no reason given";
    this.log.warn("the control plane told this agent to stand down; stopping for good (a new token starts it again)", { reason });
    try {
      await this.opts.store.writeStandDown(this.opts.config.token, reason);
    } catch (err) {
      this.log.error("could not persist the stand-down marker", { err: errorMessage(err) });
    }
    if (typeof ack === "function") (ack as (a: unknown) => void)({ ok: true });
    this.stopping = true;
    this.clearTimers();
    this.outbox.stop();
    this.socket.disconnect();
    this.opts.onStandDown(reason);
  }
}
