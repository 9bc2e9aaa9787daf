import { EventEmitter } from "node:events";
import { setImmediate as yieldToEventLoop } from "node:timers/promises";
import { randomUUID } from "node:crypto";
import { JOB_TYPES, JOBS, type JobOutcome, type JobPayload, type JobResult, type JobType } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { prismaWriter, type PlainWriter } from "../db/plain-writer.js";
import type { Logger } from "../lib/log.js";
import { chunks } from "../db/chunks.js";
import type { SecretBox } from "../crypto/secret-box.js";
import { openPayload, sealPayload } from "./payload.js";
import { NO_DISPATCHER, type JobDispatcher } from "./dispatcher.js";
import { GroupWriter, Serial } from "./group-writer.js";
import { param, valuesList, type Dialect } from "./sql.js";
import { PADDED_IN_MAX, paddedIn, toDate, toInt, type SqlReader } from "../db/reader.js";
import type { EndedJob, OutcomeHandler, OutcomeMap } from "./outcomes.js";

export type JobStatus = "queued" | "dispatched" | "running" | "succeeded" | "failed" | "cancelled";
const OPEN: JobStatus[] = ["queued", "dispatched", "running"];
/** What the pump (re)delivers: jobs not yet accepted by an agent. */
const PUMPED: JobStatus[] = ["queued", "dispatched"];
/** The pump reads every waiting job at once while there are at most this many (see tick). */
const PUMP_SCAN = 1000;
const ENDED: JobStatus[] = ["succeeded", "failed", "cancelled"];

const KNOWN_TYPES = new Set<string>(JOB_TYPES);
/** A stored type read back as a JobType (null for one this version does not know). */
export function jobTypeOf(stored: string): JobType | null {
  return isJobType(stored) ? stored : null;
}
function isJobType(stored: string): stored is JobType {
  return KNOWN_TYPES.has(stored);
}

/**
 * How long the replica applying a job's outcome has before a repair sweep of another replica
 * takes it over (it died meanwhile). Handlers take milliseconds to a few seconds; a handler
 * slower than this may run twice, which they are written to bear.
 */
export const OUTCOME_LEASE_MS = 15_000;
/** How long after its ack a job still open is marked running (markRunningLater). */
export const RUNNING_MARK_DELAY_MS = 500;
/**
 * An agent may hold a delivery's ack this long to answer with the job's outcome (JobEnvelope's
 * answer_within_ms): most jobs end within it, and their round trip is then one frame each way.
 */
export const ANSWER_WITHIN_MS = 50;

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

/** A job waiting for delivery, as the pump reads it. */
type WaitingJob = JobRow & { createdAt: Date };

/** A job cancelled by cancelWithin. */
export interface CancelledJob {
  id: string;
  serverId: number;
  reason: string;
}

export type FinishedJob<T extends JobType = JobType> =
  | { id: string; status: "succeeded"; result: JobResult<T> }
  | { id: string; status: "failed" | "cancelled"; error: string };

/** A job this replica handed to an agent (kept until it ends): when, to whom, which attempt. */
interface Delivery {
  at: number;
  serverId: number;
  type: JobType;
  attempt: number;
}

/** An agent's outcome on its way into the fenced UPDATE (grouped with others under load). */
interface OutcomeWrite {
  id: string;
  serverId: number;
  attempt: number;
  status: "succeeded" | "failed";
  result: string | null;
  error: string | null;
}

/** A job row written by run(): claimed for delivery at once when its agent is connected here. */
interface NewJob {
  id: string;
  serverId: number;
  type: JobType;
  payload: string;
  deadlineAt: Date;
  status: "queued" | "dispatched";
  attempt: number;
}

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
  // registries (issue 18)
  "registry.login": 120_000,
  "registry.logout": 60_000,
  // services lifecycle (issue 17)
  "service.deploy": 1_800_000,
  "service.action": 300_000,
  // clusters (issue 20)
  "swarm.info": 30_000,
  "swarm.nodes": 30_000,
  "swarm.node.update": 60_000,
  // resource backups (issue 19)
  "resource.backup": 6 * 3_600_000,
  // ---- swarm services (issue 20) ----
  "swarm.services": 30_000,
  "swarm.tasks": 30_000,
  "swarm.service.scale": 60_000,
  // ---- swarm secrets and configs (issue 20, w7) ----
  "swarm.objects": 30_000,
  "swarm.object.create": 30_000,
  "swarm.object.delete": 30_000,
  // ---- resource restores (issue 19, w7/restore) ----
  "resource.restore": 6 * 3_600_000,
  // ---- swarm events (issue 20, w7/events) ----
  "swarm.events": 30_000,
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
  /** The plain read path (db/reader.ts): a reconnecting fleet's open jobs are read through it. */
  reader?: SqlReader;
  /** Where the grouped statements run (db/plain-writer.ts); Prisma's raw path when not given. */
  writer?: PlainWriter;
}

/**
 * The durable job queue. A job row is written in the caller's transaction; delivery is
 * at least once (on enqueue, on agent reconnect, by the pump for stale deliveries); the
 * agent dedupes by job id. Each delivery bumps `attempt`, and an outcome is applied only
 * for the current attempt of an open job, so a stale attempt can never overwrite a newer
 * state. Every job has a deadline after which it is failed with a reason.
 *
 * Agents are reached through a JobDispatcher (attachDispatcher; the agents' gateway is one).
 *
 * The hot path (run() to a connected agent, its outcome) costs two statements when alone: the
 * INSERT of a row already claimed for delivery (it is committed before the agent hears of it)
 * and the fenced UPDATE that stores the outcome. The "running" mark after the agent's ack is
 * a third, written only for a job still open half a second after its ack (markRunningLater).
 * Under load each of the three is grouped with the others of its kind waiting meanwhile: one
 * statement (and one commit) per group.
 */
export class JobQueue {
  private readonly events = new EventEmitter();
  /** What each job type's end means (jobs/outcomes.ts); until set, no job type has a handler. */
  private outcomes: OutcomeMap | null = null;
  /** Types whose end has nothing to apply: the fenced UPDATE marks their outcome applied at once. */
  private nothingToApplySql = JOB_TYPES.map((t) => `'${t}'`).join(", ");
  /** See OUTCOME_LEASE_MS (tests shorten it). */
  outcomeLeaseMs = OUTCOME_LEASE_MS;
  private dispatcher: JobDispatcher = NO_DISPATCHER;
  private timers: NodeJS.Timeout[] = [];
  /** Open jobs delivered from here: the pump's resend timer, the type of outcomes to come. */
  private readonly delivered = new Map<string, Delivery>();

  private readonly box: SecretBox;
  private readonly dialect: Dialect;
  private readonly reader: SqlReader | undefined;
  private readonly writer: PlainWriter;
  private readonly appendSql: string;
  private readonly inserts: GroupWriter<NewJob, void>;
  private readonly outcomeWrites: GroupWriter<OutcomeWrite, JobType | null>;
  private readonly runningMarks: GroupWriter<{ id: string; attempt: number }, void>;
  private readonly appliedMarks: GroupWriter<string, void>;
  /** The grouped UPDATEs of existing rows (outcomes, running marks) run one at a time. */
  private readonly rowWrites = new Serial();

  constructor(
    private readonly db: Db,
    private readonly log: Logger,
    opts: JobQueueOptions,
  ) {
    this.events.setMaxListeners(0);
    this.box = opts.box;
    this.dialect = opts.dialect;
    this.reader = opts.reader;
    this.writer = opts.writer ?? prismaWriter(db);
    this.appendSql = appendLogSql(opts.dialect);
    // On the next turn of the event loop: with SQLite a statement completes without yielding
    // to I/O, so only waiting one turn lets the outcomes (and new jobs) of the sockets read in
    // this turn share a statement.
    this.inserts = new GroupWriter<NewJob, void>(
      async (rows) => {
        const params: unknown[] = [];
        const now = new Date();
        for (const r of rows) params.push(r.id, r.serverId, r.type, r.payload, r.status, r.attempt, r.deadlineAt, now);
        await this.writer.execute(insertJobsSql(this.dialect, rows.length), params);
        return rows.map(() => undefined);
      },
      // Two at once on PostgreSQL, where each waits a round trip: new rows lock nothing another
      // INSERT holds, so they cannot deadlock as grouped UPDATEs of existing rows can.
      { maxItems: INSERTS_PER_STATEMENT, startOnNextTurn: true, concurrency: opts.dialect === "postgresql" ? 2 : 1 },
    );
    this.outcomeWrites = new GroupWriter((items) => this.rowWrites.run(() => this.storeOutcomes(items)), { maxItems: OUTCOMES_PER_STATEMENT, startOnNextTurn: true });
    this.runningMarks = new GroupWriter<{ id: string; attempt: number }, void>(
      async (marks) => {
        // An outcome that arrived meanwhile already ended the job: nothing left to mark.
        const open = marks.filter((m) => this.delivered.get(m.id)?.attempt === m.attempt);
        if (open.length) {
          const params: unknown[] = [];
          for (const m of open) params.push(m.id, m.attempt);
          params.push(new Date());
          await this.rowWrites.run(() => this.writer.execute(markRunningSql(this.dialect, open.length), params));
        }
        return marks.map(() => undefined);
      },
      { maxItems: RUNNING_MARKS_PER_STATEMENT, startOnNextTurn: true },
    );
    this.appliedMarks = new GroupWriter<string, void>(
      async (ids) => {
        await this.rowWrites.run(() => this.db.job.updateMany({ where: { id: { in: ids } }, data: { outcomeAppliedAt: new Date() } }));
        return ids.map(() => undefined);
      },
      { maxItems: RUNNING_MARKS_PER_STATEMENT, startOnNextTurn: true },
    );
  }

  /** How jobs reach agents (the agents' gateway); until then none is reachable from here. */
  attachDispatcher(dispatcher: JobDispatcher): void {
    this.dispatcher = dispatcher;
  }

  /**
   * The outcome map (jobs/outcome-map.ts), set once at start: the replica that ends a job
   * applies its type's handler at once, and marks the job's outcome applied; the repair sweep
   * applies those a replica that died left behind (applyMissedOutcomes).
   */
  useOutcomes(map: OutcomeMap): void {
    this.outcomes = map;
    this.nothingToApplySql = JOB_TYPES.filter((t) => map[t] === null).map((t) => `'${t}'`).join(", ") || "''";
  }

  private handlerOf<T extends JobType>(type: T): OutcomeHandler<T> | null {
    return this.outcomes ? this.outcomes[type] : null;
  }

  /** Writes the job row inside the caller's transaction. Call kick(serverId) after commit. */
  enqueue<T extends JobType>(tx: Tx, serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number, opts?: EnqueueOptions): Promise<string> {
    return enqueueJob(tx, this.box, serverId, type, payload, timeoutMs, opts);
  }

  /**
   * Enqueue outside any other state change, deliver, and wait for the outcome. When the
   * server's agent is connected here the row is written already claimed (attempt 1,
   * dispatched) and this very row is delivered once committed: no read of it. Otherwise it is
   * written queued for the replica holding the agent (its pump) or the agent's next hello.
   */
  async run<T extends JobType>(serverId: number, type: T, payload: JobPayload<T>, timeoutMs?: number): Promise<FinishedJob<T>> {
    const parsed = JOBS[type].payload.parse(payload);
    const direct = this.dispatcher.canDeliver(serverId);
    const row: NewJob = {
      id: randomUUID(),
      serverId,
      type,
      payload: sealPayload(this.box, parsed),
      deadlineAt: new Date(Date.now() + (timeoutMs ?? DEFAULT_TIMEOUT_MS[type])),
      status: direct ? "dispatched" : "queued",
      attempt: direct ? 1 : 0,
    };
    await this.inserts.add(row);
    // Subscribed before the agent can hear of the job: its outcome cannot be missed, so the
    // first look at the row is left to the fallback poll.
    const finished = this.waitFor<T>(row.id, false);
    if (direct) this.send(row, parsed).catch((err: Error) => this.log.warn({ err: { message: err?.message }, job: row.id }, "job delivery failed; the pump retries"));
    else this.nudge(serverId);
    return finished;
  }

  /**
   * Replaces an ended job's stored payload with `payload` (sealed like every payload): a job
   * whose payload carried data that must not stay at rest once delivered (a swarm secret's
   * value) keeps only what says what it did. A job still open is left as it is (it may be
   * delivered again); false then.
   */
  async scrubPayload<T extends JobType>(id: string, type: T, payload: JobPayload<T>): Promise<boolean> {
    const sealed = sealPayload(this.box, JOBS[type].payload.parse(payload));
    const r = await this.db.job.updateMany({ where: { id, type, status: { in: ["succeeded", "failed", "cancelled"] } }, data: { payload: sealed } });
    return r.count === 1;
  }

  /**
   * Delivers a server's new jobs now, after the transaction that wrote them committed. A failed
   * delivery is logged and left to the pump (its next tick delivers them): never a rejection for
   * the caller, whose request already succeeded.
   */
  nudge(serverId: number): void {
    this.kick(serverId).catch((err: Error) => this.log.warn({ err: { message: err?.message }, server: serverId }, "job delivery failed; the pump retries"));
  }

  /** Delivers the queued jobs of a server whose agent is connected here. */
  async kick(serverId: number): Promise<void> {
    if (!this.dispatcher.canDeliver(serverId)) return;
    const jobs = await this.db.job.findMany({
      where: { serverId, status: "queued" },
      orderBy: { createdAt: "asc" },
    });
    for (const job of jobs) await this.dispatch(job);
  }

  /**
   * Agents that (re)connected here and said hello, with the time of each hello: their queued
   * jobs are delivered, and their dispatched and running jobs re-sent, except those already
   * delivered on that connection (one delivery per connection, so an attempt the agent holds
   * is not overtaken by a duplicate it never needed). One read for the whole group.
   */
  async redeliver(greeted: ReadonlyMap<number, number>): Promise<void> {
    for (const ids of chunks([...greeted.keys()].filter((id) => this.dispatcher.canDeliver(id)), PADDED_IN_MAX)) {
      const jobs = await this.openJobsOf(ids);
      for (const job of jobs) {
        const since = greeted.get(job.serverId) ?? 0;
        if (job.status !== "queued" && (this.delivered.get(job.id)?.at ?? 0) >= since) continue;
        await this.dispatch(job);
      }
    }
  }

  /**
   * The open jobs of these servers, oldest first: through the plain read path when there is
   * one (a statement prepared once, not Prisma's planning per call: a fleet reconnecting after
   * a restart asks this for every group of hellos), else through Prisma.
   */
  private openJobsOf(serverIds: number[]): Promise<JobRow[]> {
    return this.jobsOf(serverIds, OPEN);
  }

  /** The jobs of these servers in these states, oldest first (at most `limit`). */
  /** Jobs in these statuses, oldest first: of these servers, or (null) of every server. */
  private async jobsOf(serverIds: number[] | null, statuses: JobStatus[], limit?: number): Promise<WaitingJob[]> {
    if (!this.reader) {
      return this.db.job.findMany({
        where: { ...(serverIds ? { serverId: { in: serverIds } } : {}), status: { in: statuses } },
        orderBy: { createdAt: "asc" },
        ...(limit ? { take: limit } : {}),
      });
    }
    const { list, values } = serverIds ? paddedIn(serverIds, -1) : { list: "", values: [] as number[] };
    const rows = await this.reader.all<Record<string, unknown>>(
      `SELECT "id", "serverId", "type", "payload", "status", "attempt", "deadlineAt", "result", "error", "createdAt" FROM "Job"
        WHERE ${serverIds ? `"serverId" IN (${list}) AND ` : ""}"status" IN (${statuses.map((st) => `'${st}'`).join(", ")}) ORDER BY "createdAt"${limit ? ` LIMIT ${Math.floor(limit)}` : ""}`,
      values,
    );
    return rows.map((r) => ({
      id: String(r.id),
      serverId: toInt(r.serverId),
      type: String(r.type),
      payload: String(r.payload),
      status: String(r.status),
      attempt: toInt(r.attempt),
      deadlineAt: toDate(r.deadlineAt),
      result: r.result === null || r.result === undefined ? null : String(r.result),
      error: r.error === null || r.error === undefined ? null : String(r.error),
      createdAt: toDate(r.createdAt),
    }));
  }

  /** Claims the next attempt of a stored job (fenced) and delivers it. */
  private async dispatch(job: JobRow): Promise<void> {
    const attempt = job.attempt + 1;
    // Fencing: only the holder of the previous attempt number may start the next one.
    const claimed = await this.db.job.updateMany({
      where: { id: job.id, attempt: job.attempt, status: { in: OPEN } },
      data: { attempt, status: job.status === "queued" ? "dispatched" : job.status },
    });
    if (claimed.count === 0) return;
    let payload: unknown;
    try {
      payload = openPayload(this.box, job.payload);
    } catch {
      await this.finish(job.id, attempt, { status: "failed", error: "the job's payload cannot be opened with this instance's key" });
      return;
    }
    const type = jobTypeOf(job.type);
    if (type === null) {
      await this.finish(job.id, attempt, { status: "failed", error: `unknown job type ${job.type} (written by another version of the control plane)` });
      return;
    }
    await this.send({ id: job.id, serverId: job.serverId, type, attempt, deadlineAt: job.deadlineAt }, payload);
  }

  /** Hands a claimed attempt (committed) to the agent and records the agent's answer. */
  private async send(job: { id: string; serverId: number; type: JobType; attempt: number; deadlineAt: Date }, payload: unknown): Promise<void> {
    this.delivered.set(job.id, { at: Date.now(), serverId: job.serverId, type: job.type, attempt: job.attempt });
    const ack = await this.dispatcher.deliver(job.serverId, {
      id: job.id,
      attempt: job.attempt,
      type: job.type,
      payload,
      deadline: job.deadlineAt.toISOString(),
      answer_within_ms: ANSWER_WITHIN_MS,
    });
    if (!ack) return; // not delivered: the pump or the next reconnect tries again
    if (!ack.accepted) {
      await this.finish(job.id, job.attempt, { status: "failed", error: `agent refused the job: ${ack.reason ?? "no reason"}` });
      return;
    }
    if (ack.outcome) return this.applyAnswered(job, ack.outcome);
    this.markRunningLater(job.id, job.attempt);
  }

  /**
   * An outcome the agent answered in the delivery's ack. The agent sends it no other way while
   * the connection lasts, so one this replica cannot store leaves the job dispatched (no running
   * mark): the pump delivers it again after 10 s and the agent answers that from its store.
   */
  private async applyAnswered(job: { id: string; serverId: number; attempt: number }, outcome: JobOutcome): Promise<void> {
    if (outcome.id !== job.id || outcome.attempt !== job.attempt) {
      this.log.warn({ job: job.id, attempt: job.attempt, answered: { id: outcome.id, attempt: outcome.attempt } }, "an agent answered a delivery with an outcome of another job or attempt; the job is delivered again");
      return;
    }
    try {
      await this.applyOutcome(job.serverId, outcome);
    } catch (err) {
      this.log.warn({ err: { message: (err as Error)?.message }, job: job.id }, "storing a job's outcome failed; the job is delivered again");
    }
  }

  /**
   * Most jobs end within milliseconds of their ack, and their outcome makes a "running" mark
   * pointless: the mark is written only for a job still open runningMarkDelayMs after the ack.
   * On PostgreSQL the mark was a third statement per job, queued behind (and ahead of) the
   * outcomes' UPDATEs, and most of a job's round trip at 50 in flight. Nothing depends on the
   * mark within that time: the pump re-sends a dispatched job only after 10 s without an ack
   * here, and the agent dedupes by job id.
   */
  private markRunningLater(id: string, attempt: number): void {
    const timer = setTimeout(() => {
      this.markTimers.delete(timer);
      if (this.closed || this.delivered.get(id)?.attempt !== attempt) return;
      this.runningMarks.add({ id, attempt }).catch((err: Error) => this.log.warn({ err: { message: err?.message }, job: id }, "marking a job running failed"));
    }, this.runningMarkDelayMs);
    timer.unref();
    this.markTimers.add(timer);
  }

  /** See markRunningLater (tests shorten it). */
  runningMarkDelayMs = RUNNING_MARK_DELAY_MS;
  private readonly markTimers = new Set<NodeJS.Timeout>();
  private closed = false;

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
   * whether it changed the job (false for unknown, finished or stale-attempt outcomes). The
   * type (for checking the result) is known from the delivery when it went out from here;
   * only an outcome of a job delivered by another process needs a read first.
   */
  async applyOutcome(serverId: number, outcome: JobOutcome): Promise<boolean> {
    await this.writing.get(outcome.id);
    const delivery = this.delivered.get(outcome.id);
    let type = delivery?.serverId === serverId ? delivery.type : null;
    if (!type) {
      const job = await this.db.job.findFirst({ where: { id: outcome.id, serverId }, select: { type: true } });
      type = job ? jobTypeOf(job.type) : null;
      if (!type) return false;
    }
    let end: { status: "succeeded"; result: unknown } | { status: "failed"; error: string };
    if (!outcome.ok) end = { status: "failed", error: outcome.error };
    else {
      const parsed = JOBS[type].result.safeParse(outcome.result);
      end = parsed.success ? { status: "succeeded", result: parsed.data } : { status: "failed", error: `agent sent an invalid result: ${parsed.error.message}` };
    }
    // The fenced UPDATE: this job of this server, at this attempt, still open.
    const changed = await this.outcomeWrites.add({
      id: outcome.id,
      serverId,
      attempt: outcome.attempt,
      status: end.status,
      result: end.status === "succeeded" ? JSON.stringify(end.result) : null,
      error: end.status === "failed" ? end.error : null,
    });
    if (!changed) return false;
    this.delivered.delete(outcome.id);
    await this.afterFinish(outcome.id, end, changed);
    return true;
  }

  /**
   * Stores agents' outcomes in one UPDATE (per dialect, over a VALUES list), fenced per row by
   * job id, server, attempt and open status. Answers, per outcome, the job's type when it
   * changed the row, else null. An id twice in one group (a resent outcome) goes in a second
   * statement, so each outcome is judged against what the one before it left.
   */
  private async storeOutcomes(items: OutcomeWrite[]): Promise<(JobType | null)[]> {
    const out: (JobType | null)[] = items.map(() => null);
    let pending = items.map((item, index) => ({ item, index }));
    while (pending.length) {
      const seen = new Set<string>();
      const now = pending.filter((p) => !seen.has(p.item.id) && seen.add(p.item.id));
      pending = pending.filter((p) => !now.includes(p));
      const params: unknown[] = [];
      for (const { item } of now) params.push(item.id, item.serverId, item.attempt, item.status, item.result, item.error);
      // The time goes in three places: PostgreSQL names one parameter thrice, SQLite takes three.
      const at = new Date();
      params.push(...(this.dialect === "sqlite" ? [at, at, at] : [at]));
      const rows = await this.writer.query<{ id: string; type: string }>(finishOutcomesSql(this.dialect, now.length, this.nothingToApplySql), params);
      const changed = new Map(rows.map((r) => [r.id, jobTypeOf(r.type)]));
      for (const { item, index } of now) out[index] = changed.get(item.id) ?? null;
    }
    return out;
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
        // This replica applies the outcome next (afterFinish); a sweep takes over after the lease.
        outcomeClaimedAt: new Date(),
        ...(end.status === "succeeded" ? { result: JSON.stringify(end.result) } : { error: end.error }),
      },
    });
    if (updated.count === 0) return false;
    this.delivered.delete(id);
    await this.afterFinish(id, end);
    return true;
  }

  /**
   * Applies the outcome of a job that just ended here (its type's handler, then the mark) and
   * wakes its waiters. The row is read only when its type has a handler, or is not known here
   * (then a type without one is only marked: the fenced UPDATE marks those it knows).
   */
  private async afterFinish(id: string, end: { status: "succeeded"; result: unknown } | { status: "failed" | "cancelled"; error: string }, type?: JobType | null): Promise<void> {
    if (!type || this.handlerOf(type)) {
      const row = await this.db.job.findUnique({ where: { id } });
      if (row) await this.applyEnded(row);
    }
    const finished: FinishedJob = end.status === "succeeded" ? { id, status: "succeeded", result: end.result as never } : { id, status: end.status, error: end.error };
    this.events.emit(`done:${id}`, finished);
  }

  /**
   * Runs the outcome handler of an ended job (payload opened), then marks its outcome applied.
   * A handler that fails leaves the mark unset: the repair sweep tries again after the lease.
   * True when applied.
   */
  private async applyEnded(row: JobRow & { finishedAt: Date | null }): Promise<boolean> {
    const type = jobTypeOf(row.type);
    if (type) {
      try {
        await this.runHandler(type, row);
      } catch (err) {
        this.log.error({ err: { message: (err as Error)?.message }, job: row.id, type }, "applying a job's outcome failed; the repair sweep tries again");
        return false;
      }
    }
    await this.appliedMarks.add(row.id);
    return true;
  }

  private async runHandler<T extends JobType>(type: T, row: JobRow & { finishedAt: Date | null }): Promise<void> {
    const handler = this.handlerOf(type);
    if (!handler) return;
    const job: EndedJob<T> = { ...row, type, payload: this.openedJson(row.payload) };
    await handler(job);
  }

  /**
   * The repair sweep's part for every job type (jobs/repair-sweep.ts): ended jobs whose outcome
   * was not applied (the replica that ended them died first, or their handler failed) and that
   * no replica holds now (never claimed, or the claim is older than the lease). Each is claimed
   * with a conditional UPDATE, so with several replicas sweeping, one applies it. Oldest first,
   * at most `limit` per pass. Returns how many were applied.
   */
  async applyMissedOutcomes(limit = 200): Promise<number> {
    const due = () => ({
      outcomeAppliedAt: null,
      status: { in: ENDED },
      OR: [{ outcomeClaimedAt: null }, { outcomeClaimedAt: { lt: new Date(Date.now() - this.outcomeLeaseMs) } }],
    });
    const rows = await this.db.job.findMany({ where: due(), orderBy: { finishedAt: "asc" }, take: limit });
    let applied = 0;
    for (const row of rows) {
      const claimed = await this.db.job.updateMany({ where: { id: row.id, ...due() }, data: { outcomeClaimedAt: new Date() } });
      if (claimed.count === 0) continue; // another replica's sweep took it
      if (await this.applyEnded(row)) applied++;
    }
    return applied;
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
        const type = jobTypeOf(row.type);
        if (type) out.push({ id: row.id, serverId: row.serverId, type, payload: openPayload(this.box, row.payload) });
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
      const r = await tx.job.updateMany({ where: { id: job.id, status: { in: OPEN } }, data: { status: "cancelled", finishedAt: new Date(), error: reason, outcomeClaimedAt: new Date() } });
      if (r.count) out.push({ id: job.id, serverId: job.serverId, reason });
    }
    return out;
  }

  /**
   * After the transaction of cancelWithin committed: the agents running those jobs are told to
   * stop at once (before anything delivered later on the same connection; the replica holding
   * another agent's connection tells it on its next tick, before it delivers anything), then
   * their outcomes are applied and waiters wake.
   */
  async cancelled(jobs: readonly CancelledJob[]): Promise<void> {
    for (const job of jobs) {
      this.delivered.delete(job.id);
      this.dispatcher.cancel(job.serverId, job.id);
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
    if (done) this.dispatcher.cancel(row.serverId, id);
    return done;
  }

  /**
   * Resolves when the job ends. A job finished in this process is reported by its event
   * without another read; one finished by another replica is seen by polling (500 ms).
   */
  wait<T extends JobType>(id: string): Promise<FinishedJob<T>> {
    return this.waitFor<T>(id, true);
  }

  /** wait(); `readFirst` false when the caller knows the job cannot have ended yet (run()). */
  private async waitFor<T extends JobType>(id: string, readFirst: boolean): Promise<FinishedJob<T>> {
    let finished: FinishedJob | null = null;
    let wake: (() => void) | null = null;
    const onDone = (f: FinishedJob) => {
      finished = f;
      wake?.();
    };
    this.events.on(`done:${id}`, onDone);
    try {
      for (let read = readFirst; ; read = true) {
        if (finished) return finished as FinishedJob<T>;
        if (read) {
          const job = await this.db.job.findUnique({ where: { id }, select: { status: true, result: true, error: true } });
          if (!job) throw new Error(`job ${id} vanished`);
          if (job.status === "succeeded") return { id, status: "succeeded", result: JSON.parse(job.result ?? "null") };
          if (job.status === "failed" || job.status === "cancelled") return { id, status: job.status, error: job.error ?? "" };
          if (finished) return finished as FinishedJob<T>;
        }
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
    const here = new Set(this.dispatcher.deliverable());
    for (const job of overdue) {
      const reason = here.has(job.serverId) || job.status === "running"
        ? `${DEADLINE_EXCEEDED}: the agent did not finish the job in time`
        : `${DEADLINE_EXCEEDED}: the server's agent was not connected`;
      if (await this.finish(job.id, null, { status: "failed", error: reason })) this.dispatcher.cancel(job.serverId, job.id);
    }
    await this.stopEndedElsewhere();
    if (!here.size) return;
    // Jobs waiting for delivery are few next to connected servers: one read of them all (the
    // status index) replaces a read per 512 connected servers (20 statements a second at
    // 10,000 agents, each holding the event loop with SQLite). Only a backlog larger than one
    // read goes through the servers connected here, chunk by chunk.
    const waiting = await this.jobsOf(null, PUMPED, PUMP_SCAN + 1);
    if (waiting.length <= PUMP_SCAN) {
      await this.pump(waiting.filter((job) => here.has(job.serverId)));
      return;
    }
    // Through the plain read path, 512 servers per statement (prepared once): a Prisma read
    // per 900 servers took 10-12 ms of CPU to plan, 130 ms per pass at 10,000 agents, every second.
    for (const ids of chunks([...here], this.reader ? PADDED_IN_MAX : undefined)) {
      // One chunk per turn of the event loop: with SQLite a read runs without yielding, and a
      // pass over 10,000 connected servers would otherwise hold every socket for tens of ms.
      await yieldToEventLoop();
      await this.pump(await this.jobsOf(ids, PUMPED, 500));
    }
  }

  /**
   * Delivers waiting jobs; a delivery still waiting for its ack is sent again after 10 s. A
   * dispatched row this replica has no delivery of is left alone for 10 s after it was written
   * too: it may be one run() here is sending right now (the read can see the row before run()
   * hears its INSERT committed) or one whose outcome just ended it, and claiming it would only
   * fence out that delivery and send the job twice.
   */
  private async pump(pending: readonly WaitingJob[]): Promise<void> {
    for (const job of pending) {
      if (job.status === "dispatched" && Date.now() - (this.delivered.get(job.id)?.at ?? job.createdAt.getTime()) < 10_000) continue;
      await this.dispatch(job);
    }
  }

  /**
   * Jobs delivered from here that another replica cancelled or failed by deadline: the agent
   * (connected here) is still running them and is told to stop. Forgets every ended job.
   */
  private async stopEndedElsewhere(): Promise<void> {
    for (const ids of chunks([...this.delivered.keys()])) {
      const ended = await this.db.job.findMany({
        where: { id: { in: ids }, status: { notIn: OPEN } },
        select: { id: true, serverId: true, status: true, error: true },
      });
      for (const job of ended) {
        this.delivered.delete(job.id);
        if (job.status === "cancelled" || (job.status === "failed" && job.error?.startsWith(DEADLINE_EXCEEDED))) {
          this.dispatcher.cancel(job.serverId, job.id);
        }
      }
    }
  }

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
    this.closed = true;
    for (const t of this.markTimers) clearTimeout(t);
    this.markTimers.clear();
    for (const t of this.timers) clearTimeout(t);
    this.timers = [];
    await this.ticking;
    await Promise.all([this.inserts.flushed(), this.outcomeWrites.flushed(), this.runningMarks.flushed(), this.appliedMarks.flushed()]);
  }

  private running = false;
  private ticking: Promise<void> = Promise.resolve();
}

/** Rows per grouped statement, within SQLite's 999 bound values: 8 per new job... */
const INSERTS_PER_STATEMENT = 120;
/** ...6 per outcome... */
const OUTCOMES_PER_STATEMENT = 150;
/** ...2 per running mark. */
const RUNNING_MARKS_PER_STATEMENT = 400;

const OPEN_SQL = OPEN.map((s) => `'${s}'`).join(", ");

/** New rows (parameters per row: id, serverId, type, payload, status, attempt, deadlineAt, createdAt). */
function insertJobsSql(dialect: Dialect, n: number): string {
  const values = valuesList(dialect, n, ["text", "int", "text", "text", "text", "int", "timestamp(3)", "timestamp(3)"]);
  return `INSERT INTO "Job" ("id", "serverId", "type", "payload", "status", "attempt", "deadlineAt", "createdAt") VALUES ${values}`;
}

/** Dispatched jobs acked by their agent (parameters: id, attempt per job, then startedAt). */
function markRunningSql(dialect: Dialect, n: number): string {
  const values = valuesList(dialect, n, ["text", "int"]);
  const at = param(dialect, n * 2 + 1, "timestamp(3)");
  if (dialect === "sqlite") {
    return `WITH "v"("id", "attempt") AS (VALUES ${values})
      UPDATE "Job" SET "status" = 'running', "startedAt" = ${at}
      FROM "v" WHERE "Job"."id" = "v"."id" AND "Job"."attempt" = "v"."attempt" AND "Job"."status" = 'dispatched'`;
  }
  return `UPDATE "Job" AS "j" SET "status" = 'running', "startedAt" = ${at}
    FROM (VALUES ${values}) AS "v"("id", "attempt")
    WHERE "j"."id" = "v"."id" AND "j"."attempt" = "v"."attempt" AND "j"."status" = 'dispatched'`;
}

/**
 * The fenced UPDATE of `n` outcomes (parameters: id, serverId, attempt, status, result, error
 * per outcome, then the time: once on PostgreSQL, thrice on SQLite), answering the id and type
 * of each job it changed.
 */
function finishOutcomesSql(dialect: Dialect, n: number, nothingToApply: string): string {
  const values = valuesList(dialect, n, ["text", "int", "int", "text", "text", "text"]);
  const at = param(dialect, n * 6 + 1, "timestamp(3)");
  // Types without an outcome handler are applied with their end; the others are claimed by
  // this replica, which applies them next (a sweep takes over after the lease).
  const outcome = (type: string) => `"outcomeAppliedAt" = CASE WHEN ${type} IN (${nothingToApply}) THEN ${at} ELSE NULL END, "outcomeClaimedAt" = ${at}`;
  if (dialect === "sqlite") {
    return `WITH "v"("id", "serverId", "attempt", "status", "result", "error") AS (VALUES ${values})
      UPDATE "Job" SET "status" = "v"."status", "result" = "v"."result", "error" = "v"."error", "finishedAt" = ${at}, ${outcome(`"Job"."type"`)}
      FROM "v" WHERE "Job"."id" = "v"."id" AND "Job"."serverId" = "v"."serverId" AND "Job"."attempt" = "v"."attempt" AND "Job"."status" IN (${OPEN_SQL})
      RETURNING "id", "type"`;
  }
  return `UPDATE "Job" AS "j" SET "status" = "v"."status", "result" = "v"."result", "error" = "v"."error", "finishedAt" = ${at}, ${outcome(`"j"."type"`)}
    FROM (VALUES ${values}) AS "v"("id", "serverId", "attempt", "status", "result", "error")
    WHERE "j"."id" = "v"."id" AND "j"."serverId" = "v"."serverId" AND "j"."attempt" = "v"."attempt" AND "j"."status" IN (${OPEN_SQL})
    RETURNING "j"."id", "j"."type"`;
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
