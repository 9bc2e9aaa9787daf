import { basename } from "node:path";
import cron from "node-cron";
import {
  DatabaseEngine,
  DbBackupResult,
  DbCredentials,
  DbRestoreResult,
  type BackupExecution as BackupExecutionDto,
  type BackupLocation,
  BackupExecutionStatus,
  type BackupSchedule as BackupScheduleDto,
  type CreateBackupScheduleBody,
  type DbBackupPayload,
  type RestoreBackupBody,
  type UpdateBackupScheduleBody,
} from "@capstan/shared";
import type { Database, Db, Prisma } from "../db/client.js";
import { chunks } from "../db/chunks.js";
import { isUniqueViolation } from "../db/errors.js";
import { lockInTransaction } from "../db/locks.js";
import type { DatabaseRef, Need, TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import type { Logger } from "../lib/log.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { JobQueue, JobRow } from "../jobs/queue.js";
import type { S3StorageService } from "./s3-storages.js";
import { ServerService } from "./servers.js";

type Window = { skip?: number; take?: number };

/** A restore or backup.delete waits this long for an agent that is away. */
const DELETE_TIMEOUT_MS = 24 * 3600_000;
/** Open executions without a job after this long: their claim never completed. */
const CLAIM_STALE_MS = 5 * 60_000;

const OPEN: BackupExecutionStatus[] = ["queued", "running"];
/** Whether a stored backup or restore status is one a run can still leave. */
const isOpen = (status: string | null): boolean => status !== null && (OPEN as readonly string[]).includes(status);

/** File extension of a dump, by engine (`.gpg` is appended when encrypted). */
export const BACKUP_EXTENSIONS: Record<DatabaseEngine, string> = {
  postgresql: "sql.gz",
  mysql: "sql.gz",
  mariadb: "sql.gz",
  mongodb: "archive.gz",
  redis: "rdb.gz",
  keydb: "rdb.gz",
  dragonfly: "rdb.gz",
  clickhouse: "native.tar.gz",
};

/** `<engine>-<UTC yyyymmddThhmmssZ>-<first 8 of the execution uuid>.<ext>[.gpg]` */
export function backupFilename(engine: DatabaseEngine, at: Date, executionUuid: string, encrypted: boolean): string {
  const stamp = at.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
  return `${engine}-${stamp}-${executionUuid.slice(0, 8)}.${BACKUP_EXTENSIONS[engine]}${encrypted ? ".gpg" : ""}`;
}

/** Object key prefix of a database's backups in a storage: the storage's prefix, then the database uuid. */
export const backupKeyPrefix = (storagePrefix: string, databaseUuid: string) => `${storagePrefix}${databaseUuid}/`;

/**
 * Checks a cron expression with node-cron (the scheduler's own parser): field errors as 422
 * messages, null when valid. Six-field expressions (seconds) are refused by the API schema.
 */
export function cronErrors(expression: string): string[] | null {
  const r = cron.validateDetailed(expression);
  if (r.valid) return null;
  return r.errors.length ? r.errors.map((e) => `${e.field}: ${e.message}`) : ["Not a valid cron expression."];
}

/** The scheduler of this replica, told about schedule changes (backups/scheduler.ts). */
export interface ScheduleWatcher {
  changed(scheduleId: number): void;
  nextRun(scheduleId: number, frequency: string): Date | null;
}

type ScheduleRow = Prisma.BackupScheduleGetPayload<object>;
type ExecutionRow = Prisma.BackupExecutionGetPayload<object>;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export interface BackupServiceDeps {
  db: Db;
  dialect: Database["kind"];
  jobs: JobQueue;
  box: SecretBox;
  storages: S3StorageService;
  log?: Pick<Logger, "error" | "warn">;
}

/**
 * Backup schedules of standalone databases, their executions and restores. A run is an
 * execution row plus a db.backup job on the database's server, written in one transaction;
 * scheduled runs claim their cron tick through the unique (scheduleId, scheduledFor) index, so
 * with several replicas exactly one writes it. Job outcomes come back through JobQueue hooks,
 * and sweep() repairs what a hook may have missed (a replica that died in between).
 */
export class BackupService {
  private watcher: ScheduleWatcher | null = null;
  private log: Pick<Logger, "error" | "warn">;

  constructor(private readonly deps: BackupServiceDeps) {
    this.log = deps.log ?? { error: () => {}, warn: () => {} };
    deps.jobs.onFinished("db.backup", (job) => this.applyBackupEnd(job));
    deps.jobs.onFinished("db.restore", (job) => this.applyRestoreEnd(job));
    deps.jobs.onFinished("backup.delete", async (job) => {
      if (job.status !== "succeeded") this.log.warn({ job: job.id, error: job.error }, "removing a deleted backup's file failed");
    });
  }

  private get db(): Db {
    return this.deps.db;
  }

  bindScheduler(watcher: ScheduleWatcher, log?: Pick<Logger, "error" | "warn">): void {
    this.watcher = watcher;
    if (log) this.log = log;
  }

  // -------------------------------------------------------------------------------------------
  // Lookups: the database through the team scope (404 for another team's, 404/403 by its
  // environment's permissions); its schedules and their executions inside it.

  private async schedule(scope: TeamScope, dbUuid: string, backupUuid: string, need: Need): Promise<{ database: DatabaseRef; schedule: ScheduleRow }> {
    const database = await scope.database(dbUuid, need);
    const schedule = await this.db.backupSchedule.findFirst({ where: { uuid: backupUuid, databaseId: database.id } });
    if (!schedule) throw new NotFound("Backup schedule");
    return { database, schedule };
  }

  private async execution(scope: TeamScope, dbUuid: string, backupUuid: string, executionUuid: string, need: Need) {
    const found = await this.schedule(scope, dbUuid, backupUuid, need);
    const execution = await this.db.backupExecution.findFirst({ where: { uuid: executionUuid, scheduleId: found.schedule.id } });
    if (!execution) throw new NotFound("Backup execution");
    return { ...found, execution };
  }

  // -------------------------------------------------------------------------------------------
  // Schedules

  async countSchedules(scope: TeamScope, dbUuid: string): Promise<number> {
    const database = await scope.database(dbUuid, "view");
    return this.db.backupSchedule.count({ where: { databaseId: database.id } });
  }

  async listSchedules(scope: TeamScope, dbUuid: string, window: Window): Promise<BackupScheduleDto[]> {
    const database = await scope.database(dbUuid, "view");
    const rows = await this.db.backupSchedule.findMany({ where: { databaseId: database.id }, orderBy: { id: "asc" }, ...window });
    return this.scheduleDtos(rows, database.uuid);
  }

  /**
   * The schedules of a database as the API shows them, for the database detail (GET
   * /databases/{uuid}); the caller has checked access to the database already.
   */
  async schedulesOfDatabase(database: { id: number; uuid: string }): Promise<BackupScheduleDto[]> {
    const rows = await this.db.backupSchedule.findMany({ where: { databaseId: database.id }, orderBy: { id: "asc" } });
    return this.scheduleDtos(rows, database.uuid);
  }

  async getSchedule(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<BackupScheduleDto> {
    const { database, schedule } = await this.schedule(scope, dbUuid, backupUuid, "view");
    return (await this.scheduleDtos([schedule], database.uuid))[0]!;
  }

  /** Field rules across fields (each field alone is checked by the shared schema). */
  private checkSchedule(s: { frequency: string; s3StorageId: number | null; local: number; remote: number | null }): void {
    const errors: Record<string, string[]> = {};
    const cronProblems = cronErrors(s.frequency);
    if (cronProblems) errors.frequency = cronProblems;
    if (s.s3StorageId === null && s.local === 0) {
      errors.number_of_backups_locally = ["Without an S3 storage, at least one backup must be kept on the server."];
    }
    if (s.s3StorageId === null && s.remote !== null) {
      errors.number_of_backups_remote = ["Only with an S3 storage (s3_storage_id)."];
    }
    if (Object.keys(errors).length) throw new Invalid(errors);
  }

  async createSchedule(scope: TeamScope, dbUuid: string, input: CreateBackupScheduleBody): Promise<BackupScheduleDto> {
    const database = await scope.database(dbUuid, "manage");
    const s3StorageId = input.s3_storage_id ?? null;
    this.checkSchedule({ frequency: input.frequency, s3StorageId, local: input.number_of_backups_locally, remote: input.number_of_backups_remote });
    if (s3StorageId !== null) await scope.s3Storage(s3StorageId);
    const row = await this.db.backupSchedule.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        databaseId: database.id,
        frequency: input.frequency,
        enabled: input.enabled,
        s3StorageId,
        numberOfBackupsLocally: input.number_of_backups_locally,
        numberOfBackupsRemote: input.number_of_backups_remote,
      },
    });
    this.watcher?.changed(row.id);
    return (await this.scheduleDtos([row], database.uuid))[0]!;
  }

  async updateSchedule(scope: TeamScope, dbUuid: string, backupUuid: string, input: UpdateBackupScheduleBody): Promise<BackupScheduleDto> {
    const { database, schedule } = await this.schedule(scope, dbUuid, backupUuid, "manage");
    const next = {
      frequency: input.frequency ?? schedule.frequency,
      s3StorageId: input.s3_storage_id === undefined ? schedule.s3StorageId : input.s3_storage_id,
      local: input.number_of_backups_locally ?? schedule.numberOfBackupsLocally,
      remote: input.number_of_backups_remote === undefined ? schedule.numberOfBackupsRemote : input.number_of_backups_remote,
    };
    // Dropping the storage drops remote retention with it.
    if (next.s3StorageId === null && input.number_of_backups_remote === undefined) next.remote = null;
    this.checkSchedule(next);
    // Moving to another storage is fine: each execution records the storage its object went to.
    if (next.s3StorageId !== null && next.s3StorageId !== schedule.s3StorageId) await scope.s3Storage(next.s3StorageId);
    const row = await this.db.backupSchedule.update({
      where: { id: schedule.id },
      data: {
        frequency: next.frequency,
        s3StorageId: next.s3StorageId,
        numberOfBackupsLocally: next.local,
        numberOfBackupsRemote: next.remote,
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
      },
    });
    this.watcher?.changed(row.id);
    return (await this.scheduleDtos([row], database.uuid))[0]!;
  }

  /**
   * Deletes the schedule and its execution records; running jobs of it are cancelled. Backup
   * files and objects stay where they are (as spec 4.10 says for resource backups).
   */
  async deleteSchedule(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<void> {
    const { schedule } = await this.schedule(scope, dbUuid, backupUuid, "manage");
    const open = await this.db.backupExecution.findMany({
      where: { scheduleId: schedule.id, OR: [{ status: { in: OPEN } }, { restoreStatus: { in: OPEN } }] },
      select: { jobId: true, restoreJobId: true, status: true, restoreStatus: true },
    });
    await this.db.backupSchedule.delete({ where: { id: schedule.id } });
    this.watcher?.changed(schedule.id);
    for (const e of open) {
      if (e.jobId && isOpen(e.status)) await this.deps.jobs.cancel(e.jobId, "the backup schedule was deleted");
      if (e.restoreJobId && isOpen(e.restoreStatus)) {
        await this.deps.jobs.cancel(e.restoreJobId, "the backup schedule was deleted");
      }
    }
  }

  /**
   * For the database service, before it deletes a database (schedules and executions go with
   * it by cascade): running backup and restore jobs are cancelled; files and objects stay.
   */
  async beforeDatabaseDelete(databaseId: number): Promise<void> {
    const open = await this.db.backupExecution.findMany({
      where: { schedule: { databaseId }, OR: [{ status: { in: OPEN } }, { restoreStatus: { in: OPEN } }] },
      select: { jobId: true, restoreJobId: true, status: true, restoreStatus: true },
    });
    for (const e of open) {
      if (e.jobId && isOpen(e.status)) await this.deps.jobs.cancel(e.jobId, "the database was deleted");
      if (e.restoreJobId && isOpen(e.restoreStatus)) await this.deps.jobs.cancel(e.restoreJobId, "the database was deleted");
    }
    // Cron tasks of its schedules find nothing to claim from then on; the next reconcile drops them.
  }

  private async scheduleDtos(rows: ScheduleRow[], databaseUuid: string): Promise<BackupScheduleDto[]> {
    if (!rows.length) return [];
    // The newest execution per schedule, one indexed lookup each ([scheduleId, id]): a database
    // has a handful of schedules, and a DISTINCT over all executions would read every one.
    const last = new Map<number, ExecutionRow>();
    const newest = await Promise.all(rows.map((r) => this.db.backupExecution.findFirst({ where: { scheduleId: r.id }, orderBy: { id: "desc" } })));
    for (const e of newest) if (e) last.set(e.scheduleId, e);
    const running = await this.runningJobs([...last.values()]);
    return rows.map((r) => {
      const e = last.get(r.id);
      return {
        uuid: r.uuid,
        database_uuid: databaseUuid,
        frequency: r.frequency,
        enabled: r.enabled,
        s3_storage_id: r.s3StorageId,
        number_of_backups_locally: r.numberOfBackupsLocally,
        number_of_backups_remote: r.numberOfBackupsRemote,
        next_run_at: r.enabled ? iso(this.watcher?.nextRun(r.id, r.frequency) ?? null) : null,
        last_execution: e ? { uuid: e.uuid, status: shownStatus(e.status, e.jobId, running), created_at: e.createdAt.toISOString(), finished_at: iso(e.finishedAt) } : null,
        created_at: r.createdAt.toISOString(),
        updated_at: r.updatedAt.toISOString(),
      };
    });
  }

  // -------------------------------------------------------------------------------------------
  // Executions

  async countExecutions(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<number> {
    const { schedule } = await this.schedule(scope, dbUuid, backupUuid, "view");
    return this.db.backupExecution.count({ where: { scheduleId: schedule.id } });
  }

  /** Newest first. */
  async listExecutions(scope: TeamScope, dbUuid: string, backupUuid: string, window: Window): Promise<BackupExecutionDto[]> {
    const { schedule } = await this.schedule(scope, dbUuid, backupUuid, "view");
    const rows = await this.db.backupExecution.findMany({ where: { scheduleId: schedule.id }, orderBy: { id: "desc" }, ...window });
    const running = await this.runningJobs(rows);
    return rows.map((r) => executionDto(r, running));
  }

  /** Job ids among the executions' backup and restore jobs that an agent is running now. */
  private async runningJobs(rows: Pick<ExecutionRow, "status" | "jobId" | "restoreStatus" | "restoreJobId">[]): Promise<Set<string>> {
    const ids = rows.flatMap((r) => [r.status === "queued" ? r.jobId : null, r.restoreStatus === "queued" ? r.restoreJobId : null]).filter((v): v is string => !!v);
    const out = new Set<string>();
    for (const part of chunks(ids)) {
      const jobs = await this.db.job.findMany({ where: { id: { in: part }, status: "running" }, select: { id: true } });
      for (const j of jobs) out.add(j.id);
    }
    return out;
  }

  /**
   * Deletes one backup: the row goes now, and a backup.delete job removes its file on the
   * server and its object in S3 (when the agent is away, once it is back, within 24 h).
   */
  async deleteExecution(scope: TeamScope, dbUuid: string, backupUuid: string, executionUuid: string): Promise<{ removing: boolean }> {
    const { database, execution } = await this.execution(scope, dbUuid, backupUuid, executionUuid, "manage");
    if (isOpen(execution.status)) throw new Conflict("This backup is still running; delete it once it has ended.");
    if (isOpen(execution.restoreStatus)) throw new Conflict("This backup is being restored; delete it once the restore has ended.");
    const location = await this.location(execution);
    const removing = location.local_path !== null || location.s3 !== null;
    // Nothing in these transactions throws on a lost race: on SQLite a rollback would also undo
    // writes other requests made meanwhile on the shared connection (see start()).
    const deleted = await this.db.$transaction(async (tx) => {
      const gone = await tx.backupExecution.deleteMany({ where: { id: execution.id, status: { notIn: OPEN } } });
      if (gone.count === 0) return false;
      if (removing) await this.deps.jobs.enqueue(tx, database.serverId, "backup.delete", location, DELETE_TIMEOUT_MS);
      return true;
    });
    if (!deleted) throw new NotFound("Backup execution");
    if (removing) this.deps.jobs.nudge(database.serverId);
    return { removing };
  }

  /**
   * Where an execution's file is: on the server and/or in the storage its object went to (the
   * execution's own, which the schedule may have moved away from since).
   */
  private async location(execution: ExecutionRow): Promise<BackupLocation> {
    let s3: BackupLocation["s3"] = null;
    if (execution.s3Key && execution.s3StorageId !== null) {
      const d = await this.deps.storages.destinationById(execution.s3StorageId);
      if (d) s3 = { target: d.target, key: execution.s3Key };
    }
    return { local_path: execution.localPath, s3 };
  }

  /** POST .../execute: a run outside the cron schedule. */
  async execute(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<string> {
    const { database, schedule } = await this.schedule(scope, dbUuid, backupUuid, "deploy");
    const started = await this.start(schedule, database, { trigger: "manual", scheduledFor: null });
    if (started.kind === "refused") throw new Conflict(started.reason);
    if (started.kind === "lost") throw new Conflict("Cannot back up now: another run was just claimed.");
    return started.uuid;
  }

  /**
   * One run of a schedule (a cron tick of the scheduler or a manual execute). Scheduled runs that
   * cannot start are recorded as failed with the reason (so a missed backup shows); manual ones
   * are refused instead. "lost": another replica claimed this tick.
   */
  private async start(
    schedule: ScheduleRow,
    database: { id: number; uuid: string; name?: string; serverId: number; server: { id: number; name: string; status: string } },
    run: { trigger: "schedule" | "manual"; scheduledFor: Date | null },
  ): Promise<{ kind: "started" | "failed"; uuid: string } | { kind: "refused"; reason: string } | { kind: "lost" }> {
    let problem = await this.backupClash(this.db, schedule.id, database.id);
    if (!problem && !ServerService.agentConnected(database.server)) problem = `the server ${database.server.name} is not reachable (its agent is not connected)`;

    const uuid = newUuid();
    const now = new Date();
    let payload: DbBackupPayload | null = null;
    let s3StorageId: number | null = null;
    if (!problem) {
      try {
        ({ payload, s3StorageId } = await this.backupPayload(schedule, database.id, uuid, now));
      } catch (err) {
        if (!(err instanceof PayloadError)) this.log.error({ err: { message: (err as Error).message }, schedule: schedule.uuid }, "building a backup payload failed");
        problem = err instanceof PayloadError ? err.message : "the backup could not be prepared (internal error)";
      }
    }
    if (problem && run.trigger === "manual") return { kind: "refused", reason: `Cannot back up now: ${problem}.` };

    // The claim. Its slot is looked up first inside the transaction, so a tick another replica
    // (or another tick of this one) already took ends without an error rather than a rollback.
    // SQLite serialises transactions, so the lookup decides; on PostgreSQL two transactions can
    // both find the slot free, and the unique index refuses the second insert (a clean rollback
    // on its own connection). The database's run lock makes the check for a running backup or
    // restore and this insert one step: a restore claimed since the check above is seen here.
    let claim: "claimed" | "lost" | { refused: string } = "lost";
    try {
      claim = await this.db.$transaction(async (tx) => {
        await lockInTransaction(tx, this.deps.dialect, "databaseRuns", database.id);
        if (run.scheduledFor) {
          const taken = await tx.backupExecution.findUnique({ where: { scheduleId_scheduledFor: { scheduleId: schedule.id, scheduledFor: run.scheduledFor } }, select: { id: true } });
          if (taken) return "lost";
        }
        if (payload) {
          const clash = await this.backupClash(tx, schedule.id, database.id);
          if (clash && run.trigger === "manual") return { refused: `Cannot back up now: ${clash}.` };
          if (clash) {
            problem = clash;
            payload = null;
          }
        }
        const row = await tx.backupExecution.create({
          data: {
            uuid,
            scheduleId: schedule.id,
            trigger: run.trigger,
            scheduledFor: run.scheduledFor,
            createdAt: now,
            // The storage is recorded with the claim: the schedule may move to another one before
            // the object arrives, and a storage with a run on its way to it is not deleted.
            ...(payload
              ? { status: "queued", filename: payload.filename, isEncrypted: payload.passphrase !== null, s3StorageId }
              : { status: "failed", reason: problem, finishedAt: now }),
          },
        });
        if (payload) {
          const jobId = await this.deps.jobs.enqueue(tx, database.serverId, "db.backup", payload);
          await tx.backupExecution.update({ where: { id: row.id }, data: { jobId } });
        }
        return "claimed";
      });
    } catch (err) {
      if (run.scheduledFor && isUniqueViolation(err)) return { kind: "lost" };
      throw err;
    }
    if (claim === "lost") return { kind: "lost" };
    if (typeof claim === "object") return { kind: "refused", reason: claim.refused };
    if (payload) this.deps.jobs.nudge(database.serverId);
    return { kind: payload ? "started" : "failed", uuid };
  }

  /**
   * The db.backup job of a run (credentials and storage keys opened: job payloads are sealed at
   * rest) and the storage it uploads to.
   */
  private async backupPayload(schedule: ScheduleRow, databaseId: number, executionUuid: string, at: Date): Promise<{ payload: DbBackupPayload; s3StorageId: number | null }> {
    const db = await this.db.standaloneDatabase.findUnique({ where: { id: databaseId } });
    if (!db) throw new PayloadError("the database was deleted");
    const engine = DatabaseEngine.safeParse(db.engine);
    if (!engine.success) throw new PayloadError(`unknown database engine ${db.engine}`);
    const credentials = this.credentials(db.credentials);
    let s3: DbBackupPayload["s3"] = null;
    let passphrase: string | null = null;
    if (schedule.s3StorageId !== null) {
      const d = await this.deps.storages.destinationById(schedule.s3StorageId);
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

  private credentials(sealed: string): DbCredentials {
    let parsed: unknown;
    try {
      parsed = JSON.parse(this.deps.box.open(sealed));
    } catch {
      throw new PayloadError("the database's credentials cannot be opened with this instance's key");
    }
    const c = DbCredentials.safeParse(parsed);
    if (!c.success) throw new PayloadError("the database's stored credentials are not readable");
    return c.data;
  }

  /**
   * The scheduler's tick: claims the run of `scheduledFor` (the tick's minute) for this replica.
   * "lost": another replica's claim came first; "skipped": the schedule is gone or disabled.
   */
  async claimTick(scheduleId: number, scheduledFor: Date): Promise<"started" | "failed" | "lost" | "skipped"> {
    const schedule = await this.db.backupSchedule.findUnique({
      where: { id: scheduleId },
      include: { database: { select: { id: true, uuid: true, name: true, serverId: true, server: { select: { id: true, name: true, status: true } } } } },
    });
    if (!schedule || !schedule.enabled || !schedule.database) return "skipped";
    const r = await this.start(schedule, schedule.database, { trigger: "schedule", scheduledFor });
    return r.kind === "refused" ? "skipped" : r.kind;
  }

  // -------------------------------------------------------------------------------------------
  // Restore

  /**
   * POST .../restore: restores the backup into its database (the agent downloads it from S3
   * when it is no longer on the server, and decrypts it). Destructive, so it needs full access.
   */
  async restore(scope: TeamScope, dbUuid: string, backupUuid: string, executionUuid: string, body: RestoreBackupBody): Promise<string> {
    const { database, execution } = await this.execution(scope, dbUuid, backupUuid, executionUuid, "manage");
    if (execution.status !== "success") throw new Conflict("Only a successful backup can be restored.");
    if (isOpen(execution.restoreStatus)) throw new Conflict("This backup is already being restored.");
    const location = await this.location(execution);
    if (location.local_path === null && location.s3 === null) {
      throw new Conflict("The backup's file is gone: it is neither on the server nor in the S3 storage (retention removed it).");
    }
    const clash = await this.restoreClash(this.db, database.id);
    if (clash) throw new Conflict(clash);
    if (!ServerService.agentConnected(database.server)) throw new Conflict(`The server ${database.server.name} is not reachable (its agent is not connected).`);

    let passphrase: string | null = null;
    if (execution.isEncrypted) {
      passphrase = body.passphrase ?? null;
      // The passphrase of the storage the backup went to (it was encrypted with that one's).
      if (passphrase === null && execution.s3StorageId !== null) passphrase = (await this.deps.storages.destinationById(execution.s3StorageId))?.passphrase ?? null;
      if (passphrase === null) {
        throw new Invalid({ passphrase: ["This backup is encrypted and its storage has no passphrase now: give the passphrase it was encrypted with."] });
      }
    }
    const full = await this.db.standaloneDatabase.findUnique({ where: { id: database.id } });
    if (!full) throw new NotFound("Database");
    const engine = DatabaseEngine.safeParse(full.engine);
    if (!engine.success) throw new Conflict(`Unknown database engine ${full.engine}.`);
    let credentials: DbCredentials;
    try {
      credentials = this.credentials(full.credentials);
    } catch (err) {
      throw new Conflict(`Cannot restore: ${(err as Error).message}.`);
    }
    // Under the database's run lock, a backup or restore claimed since the check above is seen
    // here; the restore slot is taken before anything is written, so a lost race writes nothing.
    const claimed = await this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.deps.dialect, "databaseRuns", database.id);
      const clashNow = await this.restoreClash(tx, database.id);
      if (clashNow) return clashNow;
      const r = await tx.backupExecution.updateMany({
        where: { id: execution.id, OR: [{ restoreStatus: null }, { restoreStatus: { notIn: OPEN } }] },
        data: { restoreStatus: "queued", restoreReason: null, restoredAt: null },
      });
      if (r.count === 0) return false;
      const jobId = await this.deps.jobs.enqueue(tx, database.serverId, "db.restore", {
        db: { uuid: full.uuid, name: full.name },
        engine: engine.data,
        credentials,
        from: location,
        passphrase,
      });
      await tx.backupExecution.update({ where: { id: execution.id }, data: { restoreJobId: jobId } });
      return true;
    });
    if (claimed === false) throw new Conflict("This backup is already being restored.");
    if (typeof claimed === "string") throw new Conflict(claimed);
    this.deps.jobs.nudge(database.serverId);
    return execution.uuid;
  }

  /** Why a backup of the schedule cannot start now (null: it can): its previous run or a restore of the database is open. */
  private async backupClash(db: Db | Prisma.TransactionClient, scheduleId: number, databaseId: number): Promise<string | null> {
    if (await db.backupExecution.count({ where: { scheduleId, status: { in: OPEN } } })) return "the previous backup of this schedule is still running";
    if (await db.backupExecution.count({ where: { schedule: { databaseId }, restoreStatus: { in: OPEN } } })) return "a restore of this database is running";
    return null;
  }

  /** Why a restore into the database cannot start now (null: it can): another restore or any backup of it is open. */
  private async restoreClash(db: Db | Prisma.TransactionClient, databaseId: number): Promise<string | null> {
    if (await db.backupExecution.count({ where: { schedule: { databaseId }, restoreStatus: { in: OPEN } } })) return "Another restore of this database is running.";
    if (await db.backupExecution.count({ where: { schedule: { databaseId }, status: { in: OPEN } } })) return "A backup of this database is running; restore once it has ended.";
    return null;
  }

  // -------------------------------------------------------------------------------------------
  // Job outcomes

  /** db.backup ended: the execution records the file, retention results clear older rows' places. */
  async applyBackupEnd(job: Pick<JobRow, "id" | "status" | "result" | "error"> & { finishedAt?: Date | null }): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const execution = await this.db.backupExecution.findUnique({ where: { jobId: job.id }, include: { schedule: { select: { id: true, databaseId: true } } } });
    if (!execution || !isOpen(execution.status)) return;
    const finishedAt = job.finishedAt ?? new Date();
    const open = { id: execution.id, status: { in: OPEN } };
    if (job.status !== "succeeded") {
      await this.db.backupExecution.updateMany({ where: open, data: { status: "failed", reason: job.error ?? job.status, finishedAt } });
      return;
    }
    const parsed = DbBackupResult.safeParse(safeJson(job.result));
    if (!parsed.success) {
      await this.db.backupExecution.updateMany({ where: open, data: { status: "failed", reason: "the agent sent an invalid backup result", finishedAt } });
      return;
    }
    const r = parsed.data;
    const updated = await this.db.backupExecution.updateMany({
      where: open,
      data: {
        status: "success",
        filename: r.filename,
        size: BigInt(r.size),
        isEncrypted: r.is_encrypted,
        localPath: r.local_path,
        s3Key: r.s3_key,
        reason: null,
        finishedAt,
      },
    });
    if (updated.count === 0) return;
    await this.applyRetention(execution.schedule, execution, r.removed_local, r.removed_remote);
  }

  /**
   * Files the agent removed by retention. Local ones are the schedule's own (its directory);
   * names or paths are accepted. Remote ones are keys the agent listed under the database's
   * prefix in the storage this run went to, so they may be any schedule's of the database; an
   * object is its key in that endpoint's bucket, which other storage records of the team may
   * name too (one re-created with new keys), so executions recorded in any of them lose it.
   * Their s3StorageId stays: it is still where the backup went, and whose passphrase it has.
   */
  private async applyRetention(
    schedule: { id: number; databaseId: number | null },
    current: { id: number; s3StorageId: number | null },
    removedLocal: string[],
    removedRemote: string[],
  ): Promise<void> {
    const currentId = current.id;
    for (const part of chunks(removedLocal)) {
      const names = part.map((p) => basename(p));
      await this.db.backupExecution.updateMany({
        where: { scheduleId: schedule.id, id: { not: currentId }, OR: [{ localPath: { in: part } }, { filename: { in: names } }] },
        data: { localPath: null },
      });
    }
    if (schedule.databaseId === null || current.s3StorageId === null || removedRemote.length === 0) return;
    const listed = await this.db.s3Storage.findUnique({ where: { id: current.s3StorageId }, select: { teamId: true, endpoint: true, bucket: true } });
    if (!listed) return;
    const sameBucket = await this.db.s3Storage.findMany({ where: { teamId: listed.teamId, endpoint: listed.endpoint, bucket: listed.bucket }, select: { id: true } });
    for (const part of chunks(removedRemote)) {
      await this.db.backupExecution.updateMany({
        where: { schedule: { databaseId: schedule.databaseId }, id: { not: currentId }, s3StorageId: { in: sameBucket.map((s) => s.id) }, s3Key: { in: part } },
        data: { s3Key: null },
      });
    }
  }

  async applyRestoreEnd(job: Pick<JobRow, "id" | "status" | "result" | "error"> & { finishedAt?: Date | null }): Promise<void> {
    if (job.status !== "succeeded" && job.status !== "failed" && job.status !== "cancelled") return;
    const finishedAt = job.finishedAt ?? new Date();
    const where = { restoreJobId: job.id, restoreStatus: { in: OPEN } };
    if (job.status === "succeeded" && DbRestoreResult.safeParse(safeJson(job.result)).success) {
      await this.db.backupExecution.updateMany({ where, data: { restoreStatus: "success", restoreReason: null, restoredAt: finishedAt } });
    } else {
      const reason = job.status === "succeeded" ? "the agent sent an invalid restore result" : (job.error ?? job.status);
      await this.db.backupExecution.updateMany({ where, data: { restoreStatus: "failed", restoreReason: reason, restoredAt: null } });
    }
  }

  /**
   * What no single event guarantees, repaired periodically on every replica: outcomes whose hook
   * did not run (the replica that ended the job died), jobs that vanished (their server was
   * removed), running jobs shown as running, claims that never got their job.
   */
  async sweep(): Promise<void> {
    const open = await this.db.backupExecution.findMany({
      where: { OR: [{ status: { in: OPEN } }, { restoreStatus: { in: OPEN } }] },
      select: { id: true, status: true, jobId: true, restoreStatus: true, restoreJobId: true, createdAt: true },
    });
    for (const part of chunks(open)) {
      const ids = part.flatMap((e) => [e.jobId, e.restoreJobId]).filter((v): v is string => !!v);
      const jobs = ids.length
        ? await this.db.job.findMany({ where: { id: { in: ids } }, select: { id: true, type: true, status: true, result: true, error: true, finishedAt: true } })
        : [];
      const byId = new Map(jobs.map((j) => [j.id, j]));
      for (const e of part) {
        if (isOpen(e.status)) {
          const job = e.jobId ? byId.get(e.jobId) : undefined;
          if (!e.jobId) {
            if (Date.now() - e.createdAt.getTime() > CLAIM_STALE_MS) {
              await this.db.backupExecution.updateMany({ where: { id: e.id, status: { in: OPEN }, jobId: null }, data: { status: "failed", reason: "the run was never handed to an agent", finishedAt: new Date() } });
            }
          } else if (!job) {
            await this.db.backupExecution.updateMany({ where: { id: e.id, status: { in: OPEN } }, data: { status: "failed", reason: "the backup's job was removed with its server", finishedAt: new Date() } });
          } else if (job.status === "running" && e.status === "queued") {
            await this.db.backupExecution.updateMany({ where: { id: e.id, status: "queued" }, data: { status: "running" } });
          } else if (["succeeded", "failed", "cancelled"].includes(job.status)) {
            await this.applyBackupEnd(job);
          }
        }
        if (isOpen(e.restoreStatus) && e.restoreJobId) {
          const job = byId.get(e.restoreJobId);
          if (!job) {
            await this.db.backupExecution.updateMany({ where: { id: e.id, restoreJobId: e.restoreJobId, restoreStatus: { in: OPEN } }, data: { restoreStatus: "failed", restoreReason: "the restore's job was removed with its server" } });
          } else if (job.status === "running" && e.restoreStatus === "queued") {
            await this.db.backupExecution.updateMany({ where: { id: e.id, restoreJobId: job.id, restoreStatus: "queued" }, data: { restoreStatus: "running" } });
          } else if (["succeeded", "failed", "cancelled"].includes(job.status)) {
            await this.applyRestoreEnd(job);
          }
        }
      }
    }
  }
}

class PayloadError extends Error {}

function safeJson(text: string | null): unknown {
  try {
    return JSON.parse(text ?? "null");
  } catch {
    return null;
  }
}

/** A queued row whose job an agent is running shows as running (the sweep stores it too). */
function shownStatus(status: string, jobId: string | null, running: Set<string>): BackupExecutionStatus {
  if (status === "queued" && jobId && running.has(jobId)) return "running";
  return BackupExecutionStatus.parse(status);
}

export function executionDto(r: ExecutionRow, running: Set<string> = new Set()): BackupExecutionDto {
  return {
    uuid: r.uuid,
    status: shownStatus(r.status, r.jobId, running),
    trigger: r.trigger === "manual" ? "manual" : "schedule",
    scheduled_for: iso(r.scheduledFor),
    filename: r.filename,
    size: r.size === null ? null : Number(r.size),
    is_encrypted: r.isEncrypted,
    s3_storage_id: r.s3StorageId,
    s3_key: r.s3Key,
    stored_locally: r.localPath !== null,
    reason: r.reason,
    restore_status: r.restoreStatus === null ? null : shownStatus(r.restoreStatus, r.restoreJobId, running),
    restore_reason: r.restoreReason,
    restored_at: iso(r.restoredAt),
    created_at: r.createdAt.toISOString(),
    finished_at: iso(r.finishedAt),
  };
}
