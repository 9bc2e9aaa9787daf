import type { JobOutcome } from "@capstan/shared";
import { errorMessage, type Logger, silentLogger } from "../log.js";
import type { StateStore } from "../state/store.js";

/** What the runner needs from the connection. */
export interface Transport {
  isConnected(): boolean;
  /** Emits job:outcome; resolves when the control plane acks, rejects on ack timeout. */
  sendOutcome(outcome: JobOutcome): Promise<unknown>;
  /** Emits job:progress; best effort (dropped while disconnected). */
  sendProgress(progress: { id: string; attempt: number; lines: string[] }): void;
}

export interface OutboxOptions {
  retryMs?: number;
  log?: Logger;
}

/**
 * Delivers job outcomes at least once: every outcome is persisted before it is sent, sent while
 * connected, re-sent every retryMs (and at once after a reconnect) until the control plane acks
 * the current attempt; a late ack of an earlier send still counts. Survives restarts through
 * the StateStore.
 */
export class OutcomeOutbox {
  /** job id -> the attempt last sent and when: re-sent once retryMs passed without an ack. */
  private readonly inflight = new Map<string, { attempt: number; at: number }>();
  private timer: NodeJS.Timeout | null = null;
  private readonly retryMs: number;
  private readonly log: Logger;

  constructor(
    private readonly store: StateStore,
    private readonly transport: Transport,
    opts: OutboxOptions = {},
  ) {
    this.retryMs = opts.retryMs ?? 2000;
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
   * Sends every unacknowledged outcome not sent within retryMs (no-op while disconnected);
   * `all` after a (re)connect: sends on the previous connection may never have arrived.
   */
  kick(all = false): void {
    if (!this.transport.isConnected()) return;
    if (all) this.inflight.clear();
    const now = Date.now();
    for (const stored of this.store.pending()) {
      const { outcome } = stored;
      const last = this.inflight.get(outcome.id);
      if (last && last.attempt === outcome.attempt && now - last.at < this.retryMs) continue;
      this.send(outcome, now);
    }
  }

  inflightCount(): number {
    return this.inflight.size;
  }

  private send(outcome: JobOutcome, now: number): void {
    this.inflight.set(outcome.id, { attempt: outcome.attempt, at: now });
    this.transport.sendOutcome(outcome).then(
      async () => {
        this.release(outcome);
        try {
          if (await this.store.markAcked(outcome.id, outcome.attempt)) {
            this.log.debug("job outcome acknowledged", { job: outcome.id, attempt: outcome.attempt });
          }
        } catch (err) {
          this.log.error("could not record outcome ack", { job: outcome.id, err: errorMessage(err) });
        }
      },
      (err) => {
        // Not released: the next kick after retryMs re-sends it anyway.
        this.log.debug("job outcome not acknowledged yet; will retry", { job: outcome.id, err: errorMessage(err) });
      },
    );
  }

  private release(outcome: JobOutcome): void {
    if (this.inflight.get(outcome.id)?.attempt === outcome.attempt) this.inflight.delete(outcome.id);
  }
}
