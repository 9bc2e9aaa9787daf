import { EventEmitter } from "node:events";
import { randomUUID } from "node:crypto";
import { JOBS, type JobOutcome, type JobPayload, type JobResult, type JobType } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import type { Logger } from "../lib/log.js";
import { chunks } from "../db/chunks.js";

export type JobStatus = "queued" | "dispatched" | "running" | "succeeded" | "failed" | "cancelled";
const OPEN: JobStatus[] = ["queued", "dispatched", "running"];
const LOG_CAP_BYTES = 64 * 1024;

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

export type FinishedJob<T extends JobType = JobType> =
  | { id: string; status: "succeeded"; result: JobResult<T> }
  | { id: string; status: "failed" | "cancelled"; error: string };

/** Sends a job to the agent of a server; resolves with the agent's ack, or null if not delivered. */
export type Deliver = (serverId: number, envelope: { id: string; attempt: number; type: JobType; payload: unknown; deadline: string }) => Promise<{ accepted: boolean; reason?: string } | null>;

type Tx = Prisma.TransactionClient | Db;

/** Default deadlines per job type; callers may pass their own. */
const DEFAULT_TIMEOUT_MS: Record<JobType, number> = {
  "server.validate": 30_000,
  "server.prepare": 60_000,
  "containers.list": 30_000,
  "container.ensure": 300_000,
  "container.remove": 120_000,
};

/** Writes a job row in the given transaction; any replica's pump delivers it. */
export async function enqueueJob<T extends JobType>(tx: Tx, serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number): Promise<string> {
  const parsed = JOBS[type].payload.parse(payload);
  const id = randomUUID();
  await tx.job.create({
    data: {
      id,
      serverId,
      type,
      payload: JSON.stringify(parsed),
      deadlineAt: new Date(Date.now() + (timeoutMs ?? DEFAULT_TIMEOUT_MS[type])),
    },
  });
  return id;
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

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
  ) {
    this.events.setMaxListeners(0);
  }

  /** Wired by the agent gateway: how to reach agents connected to this replica. */
  bindTransport(deliver: Deliver, connectedServerIds: () => number[]): void {
    this.deliver = deliver;
    this.connected = connectedServerIds;
  }

  onFinished(type: JobType, hook: (job: JobRow) => Promise<void>): void {
    const list = this.finishHooks.get(type) ?? [];
    list.push(hook);
    this.finishHooks.set(type, list);
  }

  /** Writes the job row inside the caller's transaction. Call kick(serverId) after commit. */
  enqueue<T extends JobType>(tx: Tx, serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number): Promise<string> {
    return enqueueJob(tx, serverId, type, payload, timeoutMs);
  }

  /** Enqueue outside any other state change, deliver, and wait for the outcome. */
  async run<T extends JobType>(serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number): Promise<FinishedJob<T>> {
    const id = await this.enqueue(this.db, serverId, type, payload, timeoutMs);
    void this.kick(serverId);
    return this.wait<T>(id);
  }

  /** Delivers every open job of a server whose agent is connected here. */
  async kick(serverId: number, opts: { redeliver?: boolean } = {}): Promise<void> {
    if (!this.deliver || !this.connected().includes(serverId)) return;
    const statuses: JobStatus[] = opts.redeliver ? OPEN : ["queued"];
    const jobs = await this.db.job.findMany({
      where: { serverId, status: { in: statuses } },
      orderBy: { createdAt: "asc" },
    });
    for (const job of jobs) await this.dispatch(job);
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
    const ack = await this.deliver(job.serverId, {
      id: job.id,
      attempt,
      type: job.type as JobType,
      payload: JSON.parse(job.payload),
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

  async progress(serverId: number, id: string, attempt: number, lines: string[]): Promise<void> {
    const job = await this.db.job.findFirst({ where: { id, serverId, attempt, status: { in: OPEN } }, select: { log: true } });
    if (!job) return;
    let log = job.log + lines.map((l) => l + "\n").join("");
    if (log.length > LOG_CAP_BYTES) log = log.slice(log.length - LOG_CAP_BYTES);
    await this.db.job.updateMany({ where: { id, attempt, status: { in: OPEN } }, data: { log } });
    this.events.emit(`progress:${id}`, lines);
  }

  /**
   * Applies an agent's outcome; the serverId comes from the authenticated socket. Returns
   * whether it changed the job (false for unknown, finished or stale-attempt outcomes).
   */
  async applyOutcome(serverId: number, outcome: JobOutcome): Promise<boolean> {
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
    if (this.finishHooks.size) {
      const row = await this.db.job.findUnique({ where: { id } });
      for (const hook of (row && this.finishHooks.get(row.type)) || []) {
        await hook(row!).catch((err) => this.log.error({ err, job: id }, "job finish hook failed"));
      }
    }
    const finished: FinishedJob = end.status === "succeeded" ? { id, status: "succeeded", result: end.result as never } : { id, status: end.status, error: end.error };
    this.events.emit(`done:${id}`, finished);
    return true;
  }

  async cancel(id: string, reason: string): Promise<boolean> {
    return this.finish(id, null, { status: "cancelled", error: reason });
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
        ? "deadline exceeded: the agent did not finish the job in time"
        : "deadline exceeded: the server's agent was not connected";
      if (await this.finish(job.id, null, { status: "failed", error: reason })) this.cancelOnAgent?.(job.serverId, job.id);
    }
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
