import { DatabaseEngine, type DbBackupPayload } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import type { LOCK } from "../../db/locks.js";
import { isUniqueViolation } from "../../db/errors.js";
import { lockInTransaction } from "../../db/locks.js";
import type { TeamScope } from "../../domain/scope.js";
import { NotFound, Conflict } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import { ServerService } from "../servers.js";
import { BackupLookups, OPEN, isOpen, DELETE_TIMEOUT_MS, PayloadError, backupFilename, backupKeyPrefix, type ScheduleRow, type Window, type ExecutionView } from "./common.js";

/** A run's job, prepared before its claim: what the execution records, and the job to enqueue with it. */
export interface PreparedRun {
  filename: string;
  isEncrypted: boolean;
  s3StorageId: number | null;
  enqueue(tx: Prisma.TransactionClient, serverId: number): Promise<string>;
}

/**
 * What a run backs up: a database's dump schedule or a resource backup (resources.ts). The run
 * lock makes the clash check and the claim one step across replicas.
 */
export interface RunTarget {
  lock: { kind: keyof typeof LOCK; id: number };
  serverId: number;
  server: { id: number; name: string; status: string };
  /** Why a run cannot start now (null: it can). */
  clash(tx: Db | Prisma.TransactionClient): Promise<string | null>;
  /** Throws PayloadError with a reason when the run cannot be prepared. */
  prepare(executionUuid: string, at: Date): Promise<PreparedRun>;
}

/**
 * The claim of a run in one transaction under its run lock: the tick's slot is looked up first,
 * so a tick another replica (or another tick of this one) already took ends as "lost" without an
 * error rather than a rollback. SQLite serialises transactions, so the lookup decides; on
 * PostgreSQL two transactions can both find the slot free, and the unique (schedule, tick) index
 * refuses the second insert (a clean rollback on its own connection), also "lost".
 */
export async function claimRun<T>(
  lookups: BackupLookups,
  lock: RunTarget["lock"],
  scheduleId: number,
  scheduledFor: Date | null,
  body: (tx: Prisma.TransactionClient) => Promise<T>,
): Promise<T | "lost"> {
  try {
    return await lookups.db.$transaction(async (tx) => {
      await lockInTransaction(tx, lookups.deps.dialect, lock.kind, lock.id);
      if (scheduledFor) {
        const taken = await tx.backupExecution.findUnique({ where: { scheduleId_scheduledFor: { scheduleId, scheduledFor } }, select: { id: true } });
        if (taken) return "lost" as const;
      }
      return body(tx);
    });
  } catch (err) {
    if (scheduledFor && isUniqueViolation(err)) return "lost";
    throw err;
  }
}

/** The fields every execution row of a claim starts with. */
export const claimFields = (uuid: string, scheduleId: number, run: { trigger: "schedule" | "manual"; scheduledFor: Date | null }, now: Date) => ({
  uuid,
  scheduleId,
  trigger: run.trigger,
  scheduledFor: run.scheduledFor,
  createdAt: now,
});

/**
 * Runs of a schedule (executions): a run is an execution row plus a db.backup job on the
 * database's server, written in one transaction; scheduled runs claim their cron tick through
 * the unique (scheduleId, scheduledFor) index, so with several replicas exactly one writes it.
 */
export class BackupExecutions {
  /** The run target of a resource backup schedule (resources.ts sets it; null: its resource is gone). */
  resourceTarget: ((schedule: ScheduleRow) => Promise<RunTarget | null>) | null = null;
  /** A platform_instance schedule's tick (platform/index.ts: runs in the control plane, no agent job). */
  platformRun: ((schedule: ScheduleRow, run: { trigger: "schedule"; scheduledFor: Date }) => Promise<{ kind: string }>) | null = null;

  constructor(private readonly lookups: BackupLookups) {}

  async countExecutions(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<number> {
    const { schedule } = await this.lookups.schedule(scope, dbUuid, backupUuid, "view");
    return this.lookups.db.backupExecution.count({ where: { scheduleId: schedule.id } });
  }

  /** Newest first. */
  async listExecutions(scope: TeamScope, dbUuid: string, backupUuid: string, window: Window): Promise<ExecutionView[]> {
    const { schedule } = await this.lookups.schedule(scope, dbUuid, backupUuid, "view");
    const rows = await this.lookups.db.backupExecution.findMany({ where: { scheduleId: schedule.id }, orderBy: { id: "desc" }, ...window });
    const running = await this.lookups.runningJobs(rows);
    return rows.map((row) => ({ row, running }));
  }

  /**
   * Deletes one backup: the row goes now, and a backup.delete job removes its file on the
   * server and its object in S3 (when the agent is away, once it is back, within 24 h).
   */
  async deleteExecution(scope: TeamScope, dbUuid: string, backupUuid: string, executionUuid: string): Promise<{ removing: boolean }> {
    const { database, execution } = await this.lookups.execution(scope, dbUuid, backupUuid, executionUuid, "manage");
    if (isOpen(execution.status)) throw new Conflict("This backup is still running; delete it once it has ended.");
    if (isOpen(execution.restoreStatus)) throw new Conflict("This backup is being restored; delete it once the restore has ended.");
    const location = await this.lookups.location(execution);
    const removing = location.local_path !== null || location.s3 !== null;
    // Nothing in these transactions throws on a lost race: on SQLite a rollback would also undo
    // writes other requests made meanwhile on the shared connection (see start()).
    const deleted = await this.lookups.db.$transaction(async (tx) => {
      const gone = await tx.backupExecution.deleteMany({ where: { id: execution.id, status: { notIn: OPEN } } });
      if (gone.count === 0) return false;
      if (removing) await this.lookups.deps.jobs.enqueue(tx, database.serverId, "backup.delete", location, DELETE_TIMEOUT_MS);
      return true;
    });
    if (!deleted) throw new NotFound("Backup execution");
    if (removing) this.lookups.deps.jobs.nudge(database.serverId);
    return { removing };
  }

  /** POST .../execute: a run outside the cron schedule. */
  async execute(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<string> {
    const { database, schedule } = await this.lookups.schedule(scope, dbUuid, backupUuid, "deploy");
    const started = await this.start(schedule, this.databaseTarget(schedule, database), { trigger: "manual", scheduledFor: null });
    if (started.kind === "refused") throw new Conflict(started.reason);
    if (started.kind === "lost") throw new Conflict("Cannot back up now: another run was just claimed.");
    return started.uuid;
  }

  /**
   * One run of a schedule (a cron tick of the scheduler or a manual execute). Scheduled runs that
   * cannot start are recorded as failed with the reason (so a missed backup shows); manual ones
   * are refused instead. "lost": another replica claimed this tick.
   */
  async start(
    schedule: ScheduleRow,
    target: RunTarget,
    run: { trigger: "schedule" | "manual"; scheduledFor: Date | null },
  ): Promise<{ kind: "started" | "failed"; uuid: string; id: number } | { kind: "refused"; reason: string } | { kind: "lost" }> {
    let problem = await target.clash(this.lookups.db);
    if (!problem && !ServerService.agentConnected(target.server)) problem = `the server ${target.server.name} is not reachable (its agent is not connected)`;

    const uuid = newUuid();
    const now = new Date();
    let payload: PreparedRun | null = null;
    let s3StorageId: number | null = null;
    if (!problem) {
      try {
        payload = await target.prepare(uuid, now);
        s3StorageId = payload.s3StorageId;
      } catch (err) {
        if (!(err instanceof PayloadError)) this.lookups.log.error({ err: { message: (err as Error).message }, schedule: schedule.uuid }, "building a backup payload failed");
        problem = err instanceof PayloadError ? err.message : "the backup could not be prepared (internal error)";
      }
    }
    if (problem && run.trigger === "manual") return { kind: "refused", reason: `Cannot back up now: ${problem}.` };

    // The claim (claimRun). The run lock makes the check for a running backup or restore and
    // this insert one step: a restore claimed since the check above is seen here.
    let rowId = 0;
    const claim: "claimed" | "lost" | { refused: string } = await claimRun(this.lookups, target.lock, schedule.id, run.scheduledFor, async (tx) => {
      if (payload) {
        const clash = await target.clash(tx);
        if (clash && run.trigger === "manual") return { refused: `Cannot back up now: ${clash}.` };
        if (clash) {
          problem = clash;
          payload = null;
        }
      }
      const row = await tx.backupExecution.create({
        data: {
          ...claimFields(uuid, schedule.id, run, now),
          // The storage is recorded with the claim: the schedule may move to another one before
          // the object arrives, and a storage with a run on its way to it is not deleted.
          ...(payload
            ? { status: "queued", filename: payload.filename, isEncrypted: payload.isEncrypted, s3StorageId }
            : { status: "failed", reason: problem, finishedAt: now }),
        },
      });
      rowId = row.id;
      if (payload) {
        const jobId = await payload.enqueue(tx, target.serverId);
        await tx.backupExecution.update({ where: { id: row.id }, data: { jobId } });
      }
      return "claimed" as const;
    });
    if (claim === "lost") return { kind: "lost" };
    if (typeof claim === "object") return { kind: "refused", reason: claim.refused };
    if (payload) this.lookups.deps.jobs.nudge(target.serverId);
    return { kind: payload ? "started" : "failed", uuid, id: rowId };
  }

  /** A database's dump schedule as a run target (its run lock, its clashes, its db.backup job). */
  databaseTarget(schedule: ScheduleRow, database: { id: number; serverId: number; server: { id: number; name: string; status: string } }): RunTarget {
    return {
      lock: { kind: "databaseRuns", id: database.id },
      serverId: database.serverId,
      server: database.server,
      clash: (tx) => this.lookups.backupClash(tx, schedule.id, database.id),
      prepare: async (executionUuid, at) => {
        const { payload, s3StorageId } = await this.backupPayload(schedule, database.id, executionUuid, at);
        return {
          filename: payload.filename,
          isEncrypted: payload.passphrase !== null,
          s3StorageId,
          enqueue: (tx, serverId) => this.lookups.deps.jobs.enqueue(tx, serverId, "db.backup", payload),
        };
      },
    };
  }

  /**
   * The db.backup job of a run (credentials and storage keys opened: job payloads are sealed at
   * rest) and the storage it uploads to.
   */
  private async backupPayload(schedule: ScheduleRow, databaseId: number, executionUuid: string, at: Date): Promise<{ payload: DbBackupPayload; s3StorageId: number | null }> {
    const db = await this.lookups.db.standaloneDatabase.findUnique({ where: { id: databaseId } });
    if (!db) throw new PayloadError("the database was deleted");
    const engine = DatabaseEngine.safeParse(db.engine);
    if (!engine.success) throw new PayloadError(`unknown database engine ${db.engine}`);
    const credentials = this.lookups.credentials(db.credentials);
    let s3: DbBackupPayload["s3"] = null;
    let passphrase: string | null = null;
    if (schedule.s3StorageId !== null) {
      const d = await this.lookups.deps.storages.destinationById(schedule.s3StorageId);
      if (!d) throw new PayloadError("the schedule's S3 storage was deleted");
      s3 = { target: d.target, prefix: backupKeyPrefix(d.prefix, db.uuid), keep_remote: schedule.numberOfBackupsRemote };
      passphrase = d.passphrase;
    }
    const payload: DbBackupPayload = {
      db: { uuid: db.uuid, name: db.name },
      engine: engine.data,
      credentials,
      schedule_uuid: schedule.uuid,
      execution_uuid: executionUuid,
      filename: backupFilename(engine.data, at, executionUuid, passphrase !== null),
      keep_locally: schedule.numberOfBackupsLocally,
      s3,
      passphrase,
    };
    return { payload, s3StorageId: s3 ? schedule.s3StorageId : null };
  }
  /**
   * The scheduler's tick: claims the run of `scheduledFor` (the tick's minute) for this replica.
   * "lost": another replica's claim came first; "skipped": the schedule is gone or disabled.
   */
  async claimTick(scheduleId: number, scheduledFor: Date): Promise<"started" | "failed" | "lost" | "skipped"> {
    const schedule = await this.lookups.db.backupSchedule.findUnique({
      where: { id: scheduleId },
      include: { database: { select: { id: true, uuid: true, name: true, serverId: true, server: { select: { id: true, name: true, status: true } } } } },
    });
    if (!schedule || !schedule.enabled) return "skipped";
    // A database's dump schedule has no backupType; its volume backups (w8/rbsources) are resource backups.
    let target: RunTarget | null = schedule.database && schedule.backupType === null ? this.databaseTarget(schedule, schedule.database) : null;
    // resource backups (issue 19)
    if (!target && schedule.backupType !== null && schedule.backupType !== "platform_instance" && this.resourceTarget) target = await this.resourceTarget(schedule);
    if (!target && schedule.backupType === "platform_instance" && this.platformRun) {
      const p = await this.platformRun(schedule, { trigger: "schedule", scheduledFor });
      return p.kind === "started" || p.kind === "failed" || p.kind === "lost" ? p.kind : "skipped";
    }
    if (!target) return "skipped";
    const r = await this.start(schedule, target, { trigger: "schedule", scheduledFor });
    return r.kind === "refused" ? "skipped" : r.kind;
  }
}
