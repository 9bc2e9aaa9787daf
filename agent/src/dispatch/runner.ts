import { type JobAck, JobCancel, type JobOutcome, type JobPayload, type JobType } from "@capstan/shared";
import { errorMessage, type Logger, silentLogger } from "../log.js";
import type { StateStore } from "../state/store.js";
import { dispatch, parseEnvelope, parsePayload } from "./dispatch.js";
import type { OutcomeOutbox, Transport } from "./outbox.js";
import type { HandlerMap, JobContext } from "./types.js";

/** Limits of the wire schemas (JobOutcome.error, JobProgress.lines). */
export const MAX_ERROR_CHARS = 8192;
export const MAX_LINE_CHARS = 8192;
export const MAX_LINES_PER_BATCH = 500;
/** Progress lines held for one job when output outpaces the batching; older ones are dropped. */
export const MAX_BUFFERED_LINES = 5000;
/** How long a job:cancel for a job not seen yet is remembered. */
const EARLY_CANCEL_TTL_MS = 10 * 60_000;
/** setTimeout's largest delay. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Why a job's signal fired. */
export class JobAborted extends Error {
  override name = "JobAborted";
}

interface RunningJob {
  id: string;
  type: JobType;
  attempt: number;
  deadline: number;
  controller: AbortController;
  deadlineTimer: NodeJS.Timeout | null;
  lines: string[];
  droppedLines: number;
  flushTimer: NodeJS.Timeout | null;
  lastFlush: number;
  done: Promise<void>;
  /** Set while the job's ack is held (answer_within_ms): answers it with the outcome; the connection it went on, or null. */
  answer: ((outcome: JobOutcome) => string | null) | null;
}

export interface RunnerOptions {
  handlers: HandlerMap;
  store: StateStore;
  outbox: OutcomeOutbox;
  transport: Transport;
  log?: Logger;
  progressIntervalMs?: number;
  now?: () => number;
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : s.slice(0, max - 1) + "…";
}

/**
 * Receives job envelopes and runs each job at most once per agent, however often it is
 * delivered: a redelivery of a running job only raises the attempt it will report; a
 * redelivery of a finished job re-sends the stored outcome under the new attempt.
 */
export class JobRunner {
  private readonly running = new Map<string, RunningJob>();
  private readonly cancelledEarly = new Map<string, number>();
  private readonly handlers: HandlerMap;
  private readonly store: StateStore;
  private readonly outbox: OutcomeOutbox;
  private readonly transport: Transport;
  private readonly log: Logger;
  private readonly progressIntervalMs: number;
  private readonly now: () => number;

  constructor(opts: RunnerOptions) {
    this.handlers = opts.handlers;
    this.store = opts.store;
    this.outbox = opts.outbox;
    this.transport = opts.transport;
    this.log = opts.log ?? silentLogger;
    this.progressIntervalMs = opts.progressIntervalMs ?? 250;
    this.now = opts.now ?? Date.now;
  }

  runningCount(): number {
    return this.running.size;
  }

  isRunning(id: string): boolean {
    return this.running.has(id);
  }

  /** Handles one `job` event; `ack` is socket.io's acknowledgement callback. */
  onJob(raw: unknown, ack?: (reply: JobAck) => void): void {
    const reply = (a: JobAck) => {
      try {
        ack?.(a);
      } catch (err) {
        this.log.warn("job ack callback threw", { err: errorMessage(err) });
      }
    };

    const envelope = parseEnvelope(raw);
    if (!envelope.ok) {
      reply({ accepted: false, reason: envelope.reason });
      this.failUnparseable(raw, envelope.reason);
      return;
    }
    const job = envelope.value;
    const log = this.log.child({ job: job.id, type: job.type, attempt: job.attempt });

    const payload = parsePayload(job.type, job.payload);
    if (!payload.ok) {
      reply({ accepted: false, reason: payload.reason });
      log.warn("rejected job", { reason: payload.reason });
      if (!this.running.has(job.id) && !this.store.getOutcome(job.id)) {
        void this.outbox.record({ id: job.id, attempt: job.attempt, ok: false, error: truncate(payload.reason, MAX_ERROR_CHARS) });
      }
      return;
    }

    const running = this.running.get(job.id);
    if (running) {
      // Redelivery (reconnect, control plane restart): keep running, report the newest attempt.
      running.attempt = Math.max(running.attempt, job.attempt);
      this.armDeadline(running, Date.parse(job.deadline));
      reply({ accepted: true });
      log.info("job redelivered while running; not starting it again");
      return;
    }

    const stored = this.store.getOutcome(job.id);
    if (stored) {
      reply({ accepted: true });
      const attempt = Math.max(stored.outcome.attempt, job.attempt);
      log.info("job redelivered after it finished; re-sending its outcome", { ok: stored.outcome.ok });
      void this.outbox.record({ ...stored.outcome, attempt });
      return;
    }

    if (this.cancelledEarly.delete(job.id)) {
      reply({ accepted: true });
      void this.outbox.record({ id: job.id, attempt: job.attempt, ok: false, error: "cancelled by the control plane before it started" });
      return;
    }
    if (Date.parse(job.deadline) <= this.now()) {
      reply({ accepted: true });
      log.warn("job arrived after its deadline", { deadline: job.deadline });
      void this.outbox.record({ id: job.id, attempt: job.attempt, ok: false, error: `deadline exceeded before the job started (deadline ${job.deadline})` });
      return;
    }
    // A control plane that reads outcomes in acks offers answer_within_ms: the ack waits that long
    // for the outcome (most jobs end within milliseconds), and a longer job is acked when it passes.
    const connection = job.answer_within_ms ? this.transport.connectionId() : undefined;
    if (connection === undefined) reply({ accepted: true });
    const entry = this.start(job.id, job.type, job.attempt, Date.parse(job.deadline), payload.value, log);
    if (connection === undefined) return;
    const window = setTimeout(() => {
      entry.answer = null;
      reply({ accepted: true });
    }, job.answer_within_ms);
    entry.answer = (outcome) => {
      entry.answer = null;
      clearTimeout(window);
      // Only on the connection the job came on and for the attempt it was sent as: anything else
      // is acked plainly and the outcome goes as job:outcome.
      if (outcome.attempt !== job.attempt || this.transport.connectionId() !== connection) {
        reply({ accepted: true });
        return null;
      }
      reply({ accepted: true, outcome });
      return connection;
    };
  }

  /** Handles `job:cancel`: aborts the job's signal (the outcome says it was cancelled). */
  onCancel(raw: unknown): void {
    const parsed = JobCancel.safeParse(raw);
    if (!parsed.success) {
      this.log.warn("ignoring malformed job:cancel");
      return;
    }
    const { id } = parsed.data;
    const running = this.running.get(id);
    if (running) {
      this.log.info("cancelling job", { job: id });
      running.controller.abort(new JobAborted("cancelled by the control plane"));
      return;
    }
    if (this.store.getOutcome(id)) return; // already finished: nothing to stop
    const now = this.now();
    for (const [key, at] of this.cancelledEarly) if (now - at > EARLY_CANCEL_TTL_MS) this.cancelledEarly.delete(key);
    this.cancelledEarly.set(id, now);
  }

  /** Waits until every running job has finished, at most timeoutMs. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (this.running.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const all = Promise.allSettled([...this.running.values()].map((j) => j.done)).then(() => true as const);
    const result = await Promise.race([all, timeout]);
    clearTimeout(timer);
    return result;
  }

  private failUnparseable(raw: unknown, reason: string): void {
    // An envelope we cannot run but can still answer: tell the control plane it failed.
    const r = raw as { id?: unknown; attempt?: unknown } | null;
    if (!r || typeof r !== "object") return;
    const { id, attempt } = r;
    if (typeof id !== "string" || id.length < 1 || id.length > 64) return;
    if (typeof attempt !== "number" || !Number.isInteger(attempt) || attempt < 1) return;
    if (this.running.has(id) || this.store.getOutcome(id)) return;
    this.log.warn("rejected job", { job: id, reason });
    void this.outbox.record({ id, attempt, ok: false, error: truncate(reason, MAX_ERROR_CHARS) });
  }

  private start<K extends JobType>(id: string, type: K, attempt: number, deadline: number, payload: JobPayload<K>, log: Logger): RunningJob {
    const entry: RunningJob = {
      id,
      type,
      attempt,
      deadline,
      controller: new AbortController(),
      deadlineTimer: null,
      lines: [],
      droppedLines: 0,
      flushTimer: null,
      lastFlush: 0,
      done: Promise.resolve(),
      answer: null,
    };
    this.running.set(id, entry);
    this.armDeadline(entry, deadline);
    const ctx: JobContext = {
      signal: entry.controller.signal,
      progress: (line) => this.progress(entry, line),
      job: {
        id,
        get attempt() {
          return entry.attempt;
        },
      },
    };
    log.info("job started");
    const started = this.now();
    entry.done = this.execute(entry, type, payload, ctx).then((outcome) => {
      const ms = this.now() - started;
      if (outcome.ok) log.info("job succeeded", { ms });
      else log.warn("job failed", { ms, error: outcome.error });
    });
    return entry;
  }

  private async execute<K extends JobType>(entry: RunningJob, type: K, payload: JobPayload<K>, ctx: JobContext): Promise<JobOutcome> {
    let result: { ok: true; value: unknown } | { ok: false; error: string };
    try {
      const value = await raceAbort(dispatch(this.handlers, type, payload, ctx), entry.controller.signal);
      result = { ok: true, value };
    } catch (err) {
      result = { ok: false, error: truncate(errorMessage(err) || "job failed", MAX_ERROR_CHARS) };
    }
    if (entry.deadlineTimer) clearTimeout(entry.deadlineTimer);
    this.flushProgress(entry, true);
    // Same tick: from here a redelivery finds the stored outcome instead of the running entry.
    const outcome: JobOutcome = result.ok
      ? { id: entry.id, attempt: entry.attempt, ok: true, result: result.value }
      : { id: entry.id, attempt: entry.attempt, ok: false, error: result.error };
    this.running.delete(entry.id);
    const answeredOn = entry.answer?.(outcome) ?? null;
    if (answeredOn !== null) await this.outbox.recordAnswered(outcome, answeredOn);
    else await this.outbox.record(outcome);
    return outcome;
  }

  /** (Re)arms the deadline; a later redelivery may carry a later deadline. */
  private armDeadline(entry: RunningJob, deadline: number): void {
    if (Number.isNaN(deadline)) return;
    entry.deadline = deadline;
    if (entry.deadlineTimer) clearTimeout(entry.deadlineTimer);
    const delay = Math.max(0, deadline - this.now());
    entry.deadlineTimer = setTimeout(() => {
      if (this.now() < entry.deadline) return this.armDeadline(entry, entry.deadline); // clamped timer
      entry.controller.abort(new JobAborted(`deadline exceeded (deadline ${new Date(entry.deadline).toISOString()})`));
    }, Math.min(delay, MAX_TIMER_MS));
  }

  private progress(entry: RunningJob, line: string): void {
    if (!this.running.has(entry.id)) return; // after the outcome
    entry.lines.push(truncate(String(line), MAX_LINE_CHARS));
    if (entry.lines.length > MAX_BUFFERED_LINES) {
      const over = entry.lines.length - MAX_BUFFERED_LINES;
      entry.lines.splice(0, over);
      entry.droppedLines += over;
    }
    if (!entry.flushTimer) {
      const wait = Math.max(0, entry.lastFlush + this.progressIntervalMs - this.now());
      entry.flushTimer = setTimeout(() => this.flushProgress(entry, false), wait);
    }
  }

  /** Sends one batch (≤ 500 lines, ≤ one per interval), or everything when the job ended. */
  private flushProgress(entry: RunningJob, final: boolean): void {
    if (entry.flushTimer) clearTimeout(entry.flushTimer);
    entry.flushTimer = null;
    if (entry.droppedLines > 0) {
      entry.lines.unshift(`[capstan-agent: ${entry.droppedLines} progress lines dropped]`);
      entry.droppedLines = 0;
    }
    do {
      if (entry.lines.length === 0) break;
      const lines = entry.lines.splice(0, MAX_LINES_PER_BATCH);
      entry.lastFlush = this.now();
      if (this.transport.isConnected()) {
        this.transport.sendProgress({ id: entry.id, attempt: entry.attempt, lines });
      } else {
        this.log.debug("dropping progress lines while disconnected", { job: entry.id, lines: lines.length });
      }
    } while (final);
    if (!final && entry.lines.length > 0) {
      entry.flushTimer = setTimeout(() => this.flushProgress(entry, false), this.progressIntervalMs);
    }
  }
}

/** Settles with the promise, or rejects with the signal's reason as soon as it fires. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}
