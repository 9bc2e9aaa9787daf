import type { JobOutcome } from "@capstan/shared";
import { errorMessage, type Logger, silentLogger } from "../log.js";
import type { StateStore } from "../state/store.js";

/** What the runner needs from the connection. */
export interface Transport {
  isConnected(): boolean;
  /** The current connection (a new value at every connect); undefined while disconnected. */
  connectionId(): string | undefined;
  /** Emits job:outcome; resolves when the control plane acks, rejects on ack timeout. */
  sendOutcome(outcome: JobOutcome): Promise<unknown>;
  /** Emits job:progress; best effort (dropped while disconnected). */
  sendProgress(progress: { id: string; attempt: number; lines: string[] }): void;
}

export interface OutboxOptions {
  retryMs?: number;
  /** How long an outcome answered in its job's ack waits before it counts as received (tests shorten it). */
  answeredSettleMs?: number;
  log?: Logger;
}

/**
 * An outcome that went to the control plane inside its job's ack gets no ack of its own. It
 * counts as received once the connection it went out on has stayed up this long after: longer
 * than the engine's ping interval and timeout together (2.5 s + 5 s), so a control plane that
 * went away meanwhile shows as a disconnect first, and after a reconnect the outcome is sent
 * again as job:outcome. What the control plane received and could not store, it delivers the
 * job again for (the job stays open; the agent answers a redelivery from this store).
 */
export const ANSWERED_SETTLE_MS = 20_000;

/**
 * Delivers job outcomes at least once: every outcome is persisted before it is sent, sent while
 * connected, re-sent every retryMs (and at once after a reconnect) until the control plane acks
 * the current attempt; a late ack of an earlier send still counts. Survives restarts through
 * the StateStore.
 */
export class OutcomeOutbox {
  /**
   * job id -> the attempt last sent and when: re-sent once retryMs passed without an ack; for
   * one answered in its job's ack, the connection it went on (settled after answeredSettleMs).
   */
  private readonly inflight = new Map<string, { attempt: number; at: number; answeredOn?: string }>();
  private timer: NodeJS.Timeout | null = null;
  private readonly retryMs: number;
  private readonly answeredSettleMs: number;
  private readonly log: Logger;

  constructor(
    private readonly store: StateStore,
    private readonly transport: Transport,
    opts: OutboxOptions = {},
  ) {
    this.retryMs = opts.retryMs ?? 2000;
    this.answeredSettleMs = opts.answeredSettleMs ?? ANSWERED_SETTLE_MS;
    this.log = opts.log ?? silentLogger;
  }

  start(): void {
    if (this.timer) return;
    // Ticks 4x per retry period so each outcome is re-sent ~retryMs after its last send.
    this.timer = setInterval(() => this.kick(), Math.max(1, Math.floor(this.retryMs / 4)));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Persists the outcome (replacing a stored one for the same job) and sends it. */
  async record(outcome: JobOutcome): Promise<void> {
    const written = this.store.putOutcome(outcome);
    this.kick();
    try {
      await written;
    } catch (err) {
      // Still in memory and being sent; only a restart before the ack would lose it.
      this.log.error("could not persist job outcome", { job: outcome.id, err: errorMessage(err) });
    }
  }

  /**
   * Persists an outcome that already went out inside its job's ack on connection `on`: not
   * sent again unless that connection ends before the outcome settled (ANSWERED_SETTLE_MS).
   */
  async recordAnswered(outcome: JobOutcome, on: string): Promise<void> {
    const written = this.store.putOutcome(outcome);
    this.inflight.set(outcome.id, { attempt: outcome.attempt, at: Date.now(), answeredOn: on });
    try {
      await written;
    } catch (err) {
      this.log.error("could not persist job outcome", { job: outcome.id, err: errorMessage(err) });
    }
  }

  /**
   * Sends every unacknowledged outcome not sent within retryMs (no-op while disconnected);
   * `all` after a (re)connect: sends on the previous connection may never have arrived.
   */
  kick(all = false): void {
    if (!this.transport.isConnected()) return;
    if (all) this.inflight.clear();
    const now = Date.now();
    const connection = this.transport.connectionId();
    for (const stored of this.store.pending()) {
      const { outcome } = stored;
      const last = this.inflight.get(outcome.id);
      if (last?.attempt === outcome.attempt) {
        if (last.answeredOn === undefined) {
          if (now - last.at < this.retryMs) continue; // its ack may still come
        } else if (last.answeredOn === connection) {
          if (now - last.at >= this.answeredSettleMs) void this.settle(outcome);
          continue;
        } // answered on a connection that ended: sent now
      }
      this.send(outcome, now);
    }
  }

  inflightCount(): number {
    return this.inflight.size;
  }

  private send(outcome: JobOutcome, now: number): void {
    this.inflight.set(outcome.id, { attempt: outcome.attempt, at: now });
    this.transport.sendOutcome(outcome).then(
      () => this.settle(outcome),
      (err) => {
        // Not released: the next kick after retryMs re-sends it anyway.
        this.log.debug("job outcome not acknowledged yet; will retry", { job: outcome.id, err: errorMessage(err) });
      },
    );
  }

  /** The control plane has the outcome: it is kept (answering redeliveries) but no longer sent. */
  private async settle(outcome: JobOutcome): Promise<void> {
    if (this.inflight.get(outcome.id)?.attempt === outcome.attempt) this.inflight.delete(outcome.id);
    try {
      if (await this.store.markAcked(outcome.id, outcome.attempt)) {
        this.log.debug("job outcome acknowledged", { job: outcome.id, attempt: outcome.attempt });
      }
    } catch (err) {
      this.log.error("could not record outcome ack", { job: outcome.id, err: errorMessage(err) });
    }
  }
}
