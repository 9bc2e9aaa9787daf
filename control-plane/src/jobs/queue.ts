import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";
import { JOBS, type JobOutcome, type JobPayload, type JobResult, type JobType } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import type { Logger } from "../lib/log.js";
import { chunks } from "../db/chunks.js";
import type { SecretBox } from "../crypto/secret-box.js";
import { openPayload, sealPayload } from "./payload.js";

export type JobStatus = "queued" | "dispatched" | "running" | "succeeded" | "failed" | "cancelled";
const OPEN: JobStatus[] = ["queued", "dispatched", "running"];

/**
 * Progress kept per job, in characters: the most recent part is kept when a job says more.
 * A deployment's build output is what its user reads afterwards, so it gets far more room.
 */
export const LOG_CAP_CHARS = 64 * 1024;
export const DEPLOY_LOG_CAP_CHARS = 1024 * 1024;

/** Reason prefix of jobs failed by the deadline sweep (the agent may still be running them). */
export const DEADLINE_EXCEEDED = "deadline exceeded";

/** A job row; `payload` is the stored (sealed) form unless a method says it is opened. */
export interface JobRow {
  id: string;
  serverId: number;
  type: string;
  payload: string;
  status: string;
  attempt: number;
  deadlineAt: Date;
  result: string | null;
  error: string | null;
}

/** A job cancelled by cancelWithin. */
export interface CancelledJob {
  id: string;
  serverId: number;
  reason: string;
}

export type FinishedJob<T extends JobType = JobType> =
  | { id: string; status: "succeeded"; result: JobResult<T> }
  | { id: string; status: "failed" | "cancelled"; error: string };

/** Sends a job to the agent of a server; resolves with the agent's ack, or null if not delivered. */
export type Deliver = (serverId: number, envelope: { id: string; attempt: number; type: JobType; payload: unknown; deadline: string }) => Promise<{ accepted: boolean; reason?: string } | null>;

type Tx = Prisma.TransactionClient | Db;

/** Default deadlines per job type; callers may pass their own (deployments pass PLATFORM_DEPLOY_TIMEOUT_S). */
const DEFAULT_TIMEOUT_MS: Record<JobType, number> = {
  "server.validate": 30_000,
  "server.prepare": 60_000,
  "containers.list": 30_000,
  "container.ensure": 300_000,
  "container.remove": 120_000,
  "app.deploy": 1_800_000,
  "app.build": 1_800_000,
  "app.action": 300_000,
  "app.logs": 30_000,
  "db.deploy": 600_000,
  "db.action": 300_000,
  "db.backup": 6 * 3_600_000,
  "db.restore": 6 * 3_600_000,
  "backup.delete": 300_000,
  "network.ensure": 120_000,
  "network.remove": 120_000,
  "networks.list": 30_000,
  "network.connect": 300_000,
};

/**
 * Writes a job row in the given transaction; any replica's pump delivers it. The payload is
 * sealed with the instance key: deploy payloads carry environment values, keys and tokens.
 */
export async function enqueueJob<T extends JobType>(
  tx: Tx,
  box: SecretBox,
  serverId: number,
  type: T,
  payload: JobPayload<T>,
  timeoutMs?: number,
  opts: EnqueueOptions = {},
): Promise<string> {
  const parsed = JOBS[type].payload.parse(payload);
  const id = randomUUID();
  await tx.job.create({
    data: {
      id,
      serverId,
      type,
      payload: sealPayload(box, parsed),
      deadlineAt: new Date(Date.now() + (timeoutMs ?? DEFAULT_TIMEOUT_MS[type])),
      ...(opts.log ? { log: capLog(type, opts.log) } : {}),
    },
  });
  return id;
}

export interface EnqueueOptions {
  /** The job's log starts with this text (a deployment's second job carries on its first one's log). */
  log?: string;
}

/** Job types whose log is a deployment's output (the larger cap). */
const DEPLOY_LOG_TYPES: JobType[] = ["app.deploy", "app.build"];

function capLog(type: JobType, text: string): string {
  const cap = DEPLOY_LOG_TYPES.includes(type) ? DEPLOY_LOG_CAP_CHARS : LOG_CAP_CHARS;
  return text.length > cap ? text.slice(-cap) : text;
}

export interface JobQueueOptions {
  /** Seals payloads at rest and opens them for delivery. */
  box: SecretBox;
  /** SQL dialect of the database: progress is appended with one UPDATE, written per dialect. */
  dialect: "sqlite" | "postgresql";
}

/**
 * The durable job queue. A job row is written in the caller's transaction; delivery is
 * at least once (on enqueue, on agent reconnect, by the pump for stale deliveries); the
 * agent dedupes by job id. Each delivery bumps `attempt`, and an outcome is applied only
 * for the current attempt of an open job, so a stale attempt can never overwrite a newer
 * state. Every job has a deadline after which it is failed with a reason.
 */
export class JobQueue {
  private readonly events = new EventEmitter();
  private readonly finishHooks = new Map<string, ((job: JobRow) => Promise<void>)[]>();
  private deliver: Deliver | null = null;
  private connected: () => number[] = () => [];
  private timers: NodeJS.Timeout[] = [];
  private readonly lastDelivery = new Map<string, number>();

  private readonly box: SecretBox;
  private readonly appendSql: string;

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    opts: JobQueueOptions,
  ) {
    this.events.setMaxListeners(0);
    this.box = opts.box;
    this.appendSql = appendLogSql(opts.dialect);
  }

  /** Wired by the agent gateway: how to reach agents connected to this replica. */
  bindTransport(deliver: Deliver, connectedServerIds: () => number[]): void {
    this.deliver = deliver;
    this.connected = connectedServerIds;
  }

  /**
   * Runs after a job of the type ended, on the replica that ended it (hooks that must not be
   * missed also need a sweep of their own). The row's payload is given opened (plain JSON).
   */
  onFinished(type: JobType, hook: (job: JobRow) => Promise<void>): void {
    const list = this.finishHooks.get(type) ?? [];
    list.push(hook);
    this.finishHooks.set(type, list);
  }

  /** Writes the job row inside the caller's transaction. Call kick(serverId) after commit. */
  enqueue<T extends JobType>(tx: Tx, serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number, opts?: EnqueueOptions): Promise<string> {
    return enqueueJob(tx, this.box, serverId, type, payload, timeoutMs, opts);
  }

  /** Enqueue outside any other state change, deliver, and wait for the outcome. */
  async run<T extends JobType>(serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number): Promise<FinishedJob<T>> {
    const id = await this.enqueue(this.db, serverId, type, payload, timeoutMs);
    this.nudge(serverId);
    return this.wait<T>(id);
  }

  /**
   * Delivers a server's new jobs now, after the transaction that wrote them committed. A failed
   * delivery is logged and left to the pump (its next tick delivers them): never a rejection for
   * the caller, whose request already succeeded.
   */
  nudge(serverId: number): void {
    this.kick(serverId).catch((err: Error) => this.log.warn({ err: { message: err?.message }, server: serverId }, "job delivery failed; the pump retries"));
  }

  /**
   * Delivers the queued jobs of a server whose agent is connected here. `redeliverSince`
   * (a new connection's greeting time) also re-sends its dispatched and running jobs, except
   * those already delivered on that connection: one delivery per connection, so an attempt
   * the agent holds is not overtaken by a duplicate it never needed.
   */
  async kick(serverId: number, opts: { redeliverSince?: number } = {}): Promise<void> {
    if (!this.deliver || !this.connected().includes(serverId)) return;
    const since = opts.redeliverSince;
    const statuses: JobStatus[] = since === undefined ? ["queued"] : OPEN;
    const jobs = await this.db.job.findMany({
      where: { serverId, status: { in: statuses } },
      orderBy: { createdAt: "asc" },
    });
    for (const job of jobs) {
      if (since !== undefined && job.status !== "queued" && (this.lastDelivery.get(job.id) ?? 0) >= since) continue;
      await this.dispatch(job);
    }
  }

  private async dispatch(job: JobRow): Promise<void> {
    if (!this.deliver) return;
    const attempt = job.attempt + 1;
    // Fencing: only the holder of the previous attempt number may start the next one.
    const claimed = await this.db.job.updateMany({
      where: { id: job.id, attempt: job.attempt, status: { in: OPEN } },
      data: { attempt, status: job.status === "queued" ? "dispatched" : job.status },
    });
    if (claimed.count === 0) return;
    this.lastDelivery.set(job.id, Date.now());
    let payload: unknown;
    try {
      payload = openPayload(this.box, job.payload);
    } catch {
      await this.finish(job.id, attempt, { status: "failed", error: "the job's payload cannot be opened with this instance's key" });
      return;
    }
    const ack = await this.deliver(job.serverId, {
      id: job.id,
      attempt,
      type: job.type as JobType,
      payload,
      deadline: job.deadlineAt.toISOString(),
    });
    if (!ack) return; // not delivered: the pump or the next reconnect tries again
    if (!ack.accepted) {
      await this.finish(job.id, attempt, { status: "failed", error: `agent refused the job: ${ack.reason ?? "no reason"}` });
      return;
    }
    await this.db.job.updateMany({
      where: { id: job.id, attempt, status: "dispatched" },
      data: { status: "running", startedAt: new Date() },
    });
  }

  /**
   * Appends progress lines of the current attempt of an open job, in one UPDATE that also
   * trims the log to its cap (the newest part is kept): no read of the log, however long.
   */
  async progress(serverId: number, id: string, attempt: number, lines: string[]): Promise<void> {
    if (!lines.length) return;
    const text = lines.map((l) => l + "\n").join("");
    // Batches of a job are written in the order they arrived, and an outcome that arrives
    // after them waits for them (applyOutcome): the last lines are never refused as "finished".
    const run = (this.writing.get(id) ?? Promise.resolve()).then(async () => {
      const changed = await this.db.$executeRawUnsafe(this.appendSql, text, ...DEPLOY_LOG_TYPES, DEPLOY_LOG_CAP_CHARS, LOG_CAP_CHARS, id, serverId, attempt);
      if (changed > 0) this.events.emit(`progress:${id}`, lines);
    });
    const settled = run.catch(() => {});
    this.writing.set(id, settled);
    try {
      await run;
    } finally {
      if (this.writing.get(id) === settled) this.writing.delete(id);
    }
  }

  /** Progress writes in flight per job, in arrival order. */
  private readonly writing = new Map<string, Promise<void>>();

  /** Listens to progress lines stored by this replica (other replicas' lines are seen by reading the row). */
  onProgress(id: string, listener: (lines: string[]) => void): () => void {
    this.events.on(`progress:${id}`, listener);
    return () => this.events.off(`progress:${id}`, listener);
  }

  /**
   * Applies an agent's outcome; the serverId comes from the authenticated socket. Returns
   * whether it changed the job (false for unknown, finished or stale-attempt outcomes).
   */
  async applyOutcome(serverId: number, outcome: JobOutcome): Promise<boolean> {
    await this.writing.get(outcome.id);
    const job = await this.db.job.findFirst({ where: { id: outcome.id, serverId } });
    if (!job) return false;
    if (!outcome.ok) return this.finish(job.id, outcome.attempt, { status: "failed", error: outcome.error });
    const parsed = JOBS[job.type as JobType].result.safeParse(outcome.result);
    if (!parsed.success) {
      return this.finish(job.id, outcome.attempt, { status: "failed", error: `agent sent an invalid result: ${parsed.error.message}` });
    }
    return this.finish(job.id, outcome.attempt, { status: "succeeded", result: parsed.data });
  }

  private async finish(
    id: string,
    attempt: number | null,
    end: { status: "succeeded"; result: unknown } | { status: "failed" | "cancelled"; error: string },
  ): Promise<boolean> {
    const updated = await this.db.job.updateMany({
      where: { id, status: { in: OPEN }, ...(attempt === null ? {} : { attempt }) },
      data: {
        status: end.status,
        finishedAt: new Date(),
        ...(end.status === "succeeded" ? { result: JSON.stringify(end.result) } : { error: end.error }),
      },
    });
    if (updated.count === 0) return false;
    this.lastDelivery.delete(id);
    await this.afterFinish(id, end);
    return true;
  }

  /** Runs the finish hooks of a job that just ended and wakes its waiters. */
  private async afterFinish(id: string, end: { status: "succeeded"; result: unknown } | { status: "failed" | "cancelled"; error: string }): Promise<void> {
    if (this.finishHooks.size) {
      const row = await this.db.job.findUnique({ where: { id } });
      const hooks = (row && this.finishHooks.get(row.type)) || [];
      if (row && hooks.length) {
        const opened = { ...row, payload: this.openedJson(row.payload) };
        for (const hook of hooks) {
          await hook(opened).catch((err) => this.log.error({ err: { message: (err as Error)?.message }, job: id }, "job finish hook failed"));
        }
      }
    }
    const finished: FinishedJob = end.status === "succeeded" ? { id, status: "succeeded", result: end.result as never } : { id, status: end.status, error: end.error };
    this.events.emit(`done:${id}`, finished);
  }

  /** The open jobs of these types on these servers, oldest first, with their payloads opened (those this key cannot open are left out). */
  async openJobs(db: Tx, where: { serverIds: number[]; types: JobType[] }): Promise<{ id: string; serverId: number; type: JobType; payload: unknown }[]> {
    if (!where.serverIds.length || !where.types.length) return [];
    const rows = await db.job.findMany({
      where: { serverId: { in: where.serverIds }, type: { in: where.types }, status: { in: OPEN } },
      orderBy: { createdAt: "asc" },
      select: { id: true, serverId: true, type: true, payload: true },
    });
    const out: { id: string; serverId: number; type: JobType; payload: unknown }[] = [];
    for (const row of rows) {
      try {
        out.push({ id: row.id, serverId: row.serverId, type: row.type as JobType, payload: openPayload(this.box, row.payload) });
      } catch {
        // sealed with another key: not ours to read
      }
    }
    return out;
  }

  /**
   * Cancels, inside the caller's transaction, the open jobs of these types on these servers
   * whose payload (opened) matches: they end together with whatever the transaction changes
   * (an environment's deletion cancels its resources' deployments). Call cancelled() with the
   * answer after the commit.
   */
  async cancelWithin(
    tx: Prisma.TransactionClient,
    where: { serverIds: number[]; types: JobType[] },
    match: (payload: unknown, type: JobType) => boolean,
    reason: string,
  ): Promise<CancelledJob[]> {
    const out: CancelledJob[] = [];
    for (const job of await this.openJobs(tx, where)) {
      if (!match(job.payload, job.type)) continue;
      const r = await tx.job.updateMany({ where: { id: job.id, status: { in: OPEN } }, data: { status: "cancelled", finishedAt: new Date(), error: reason } });
      if (r.count) out.push({ id: job.id, serverId: job.serverId, reason });
    }
    return out;
  }

  /**
   * After the transaction of cancelWithin committed: the agents running those jobs are told to
   * stop at once (before anything delivered later on the same connection; the replica holding
   * another agent's connection tells it on its next tick, before it delivers anything), then
   * the finish hooks run and waiters wake.
   */
  async cancelled(jobs: readonly CancelledJob[]): Promise<void> {
    for (const job of jobs) {
      this.lastDelivery.delete(job.id);
      this.cancelOnAgent?.(job.serverId, job.id);
    }
    for (const job of jobs) await this.afterFinish(job.id, { status: "cancelled", error: job.reason });
  }

  private openedJson(stored: string): string {
    try {
      return JSON.stringify(openPayload(this.box, stored));
    } catch {
      return "null";
    }
  }

  /**
   * Cancels an open job and tells the agent running it to stop (directly when it is connected
   * here; the replica that delivered it otherwise notices on its next tick).
   */
  async cancel(id: string, reason: string): Promise<boolean> {
    const row = await this.db.job.findUnique({ where: { id }, select: { serverId: true } });
    if (!row) return false;
    const done = await this.finish(id, null, { status: "cancelled", error: reason });
    if (done) this.cancelOnAgent?.(row.serverId, id);
    return done;
  }

  /**
   * Resolves when the job ends. A job finished in this process is reported by its event
   * without another read; one finished by another replica is seen by polling (500 ms).
   */
  async wait<T extends JobType>(id: string): Promise<FinishedJob<T>> {
    let finished: FinishedJob | null = null;
    let wake: (() => void) | null = null;
    const onDone = (f: FinishedJob) => {
      finished = f;
      wake?.();
    };
    this.events.on(`done:${id}`, onDone);
    try {
      for (;;) {
        if (finished) return finished as FinishedJob<T>;
        const job = await this.db.job.findUnique({ where: { id }, select: { status: true, result: true, error: true } });
        if (!job) throw new Error(`job ${id} vanished`);
        if (job.status === "succeeded") return { id, status: "succeeded", result: JSON.parse(job.result ?? "null") };
        if (job.status === "failed" || job.status === "cancelled") return { id, status: job.status, error: job.error ?? "" };
        if (finished) return finished as FinishedJob<T>;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 500);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        wake = null;
      }
    } finally {
      this.events.off(`done:${id}`, onDone);
    }
  }

  /**
   * Deadline sweep and delivery pump: fails overdue jobs with a reason, delivers queued jobs
   * enqueued by other replicas, and re-delivers deliveries that got no ack.
   */
  async tick(): Promise<void> {
    const now = new Date();
    const overdue = await this.db.job.findMany({ where: { status: { in: OPEN }, deadlineAt: { lt: now } }, select: { id: true, serverId: true, status: true } });
    const here = new Set(this.connected());
    for (const job of overdue) {
      const reason = here.has(job.serverId) || job.status === "running"
        ? `${DEADLINE_EXCEEDED}: the agent did not finish the job in time`
        : `${DEADLINE_EXCEEDED}: the server's agent was not connected`;
      if (await this.finish(job.id, null, { status: "failed", error: reason })) this.cancelOnAgent?.(job.serverId, job.id);
    }
    await this.stopEndedElsewhere();
    for (const ids of chunks([...here])) {
      const pending = await this.db.job.findMany({
        where: { serverId: { in: ids }, status: { in: ["queued", "dispatched"] } },
        orderBy: { createdAt: "asc" },
        take: 500,
      });
      for (const job of pending) {
        if (job.status === "dispatched" && Date.now() - (this.lastDelivery.get(job.id) ?? 0) < 10_000) continue;
        await this.dispatch(job);
      }
    }
  }

  /**
   * Jobs delivered from here that another replica cancelled or failed by deadline: the agent
   * (connected here) is still running them and is told to stop. Forgets every ended job.
   */
  private async stopEndedElsewhere(): Promise<void> {
    for (const ids of chunks([...this.lastDelivery.keys()])) {
      const ended = await this.db.job.findMany({
        where: { id: { in: ids }, status: { notIn: OPEN } },
        select: { id: true, serverId: true, status: true, error: true },
      });
      for (const job of ended) {
        this.lastDelivery.delete(job.id);
        if (job.status === "cancelled" || (job.status === "failed" && job.error?.startsWith(DEADLINE_EXCEEDED))) {
          this.cancelOnAgent?.(job.serverId, job.id);
        }
      }
    }
  }

  /** Set by the gateway so overdue jobs are stopped on the agent too. */
  cancelOnAgent?: (serverId: number, jobId: string) => void;

  start(intervalMs = 1000): void {
    this.running = true;
    const loop = () => {
      this.ticking = this.tick()
        .catch((err) => this.log.error({ err }, "job tick failed"))
        .finally(() => {
          if (!this.running) return;
          const t = setTimeout(loop, intervalMs);
          t.unref();
          this.timers = [t];
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    await this.ticking;
  }

  private running = false;
  private ticking: Promise<void> = Promise.resolve();
}

/**
 * Appends to "log" and keeps its last N characters, N chosen by the job type (parameters: text,
 * the two deployment job types, deploy cap, default cap, id, serverId, attempt). Only the
 * current attempt of an open job is written, as before.
 */
function appendLogSql(dialect: JobQueueOptions["dialect"]): string {
  const open = OPEN.map((s) => `'${s}'`).join(", ");
  if (dialect === "sqlite") {
    return `UPDATE "Job" SET "log" = substr("log" || ?, -(CASE WHEN "type" IN (?, ?) THEN ? ELSE ? END))
      WHERE "id" = ? AND "serverId" = ? AND "attempt" = ? AND "status" IN (${open})`;
  }
  return `UPDATE "Job" SET "log" = right("log" || $1::text, CASE WHEN "type" IN ($2::text, $3::text) THEN $4::int ELSE $5::int END)
    WHERE "id" = $6::text AND "serverId" = $7::int AND "attempt" = $8::int AND "status" IN (${open})`;
}
