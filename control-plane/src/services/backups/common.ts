import cron from "node-cron";
import { DatabaseEngine, DbCredentials, type BackupLocation, BackupExecutionStatus } from "@capstan/shared";
import type { Database, Db, Prisma } from "../../db/client.js";
import { chunks } from "../../db/chunks.js";
import type { DatabaseRef, Need, TeamScope } from "../../domain/scope.js";
import { NotFound } from "../../domain/errors.js";
import type { Logger } from "../../lib/log.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import type { JobQueue } from "../../jobs/queue.js";
import type { S3StorageService } from "../s3-storages.js";
import type { DatabaseConfig } from "../../config.js";
import type { NetworkPlanSettings } from "../network-plan.js";

export type Window = { skip?: number; take?: number };

/** A restore or backup.delete waits this long for an agent that is away. */
export const DELETE_TIMEOUT_MS = 24 * 3600_000;
/** Open executions without a job after this long: their claim never completed. */
export const CLAIM_STALE_MS = 5 * 60_000;

export const OPEN: BackupExecutionStatus[] = ["queued", "running"];
/** Whether a stored backup or restore status is one a run can still leave. */
export const isOpen = (status: string | null): boolean => status !== null && (OPEN as readonly string[]).includes(status);

/**
 * The jobs of the backup and restore runs still open on the schedules `schedule` selects (one
 * schedule, or a resource's): whoever deletes those rows cancels these jobs, after its commit,
 * so no agent keeps working for a record that is gone.
 */
export async function openRunJobs(db: Db | Prisma.TransactionClient, schedule: Prisma.BackupScheduleWhereInput): Promise<string[]> {
  const rows = await db.backupExecution.findMany({
    where: { schedule, OR: [{ status: { in: OPEN } }, { restoreStatus: { in: OPEN } }] },
    select: { jobId: true, restoreJobId: true, status: true, restoreStatus: true },
  });
  return rows.flatMap((e) => [isOpen(e.status) ? e.jobId : null, isOpen(e.restoreStatus) ? e.restoreJobId : null]).filter((id): id is string => id !== null);
}

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

export type ScheduleRow = Prisma.BackupScheduleGetPayload<object>;
export type ExecutionRow = Prisma.BackupExecutionGetPayload<object>;

export const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** What platform_instance backups need beyond the other kinds (services/backups/platform). */
export interface PlatformBackupDeps {
  dataDir: string;
  database: DatabaseConfig;
  /** The instance key (it seals every secret; the archive carries it). */
  instanceKey(): Buffer;
}

export interface BackupServiceDeps {
  db: Db;
  dialect: Database["kind"];
  jobs: JobQueue;
  box: SecretBox;
  storages: S3StorageService;
  log?: Pick<Logger, "error" | "warn">;
  /** platform_instance backups (issue 19, platform/index.ts); absent: refused. */
  platform?: PlatformBackupDeps;
  /** (w8/rbconfig) told when a configuration restore changed an application's domains (DNS, as ApplicationService does) */
  hostsChanged?: (teamId: number, fqdns: (string | null)[]) => Promise<void>;
  /** What a database's configuration restore checks and re-deploys with, as DatabaseService does (database-settings.ts). */
  databases: { proxyPorts: { http: number; https: number }; network: NetworkPlanSettings };
}

export class PayloadError extends Error {}

export function safeJson(text: string | null): unknown {
  try {
    return JSON.parse(text ?? "null");
  } catch {
    return null;
  }
}

/** A queued row whose job an agent is running shows as running (the sweep stores it too). */
export function shownStatus(status: string, jobId: string | null, running: ReadonlySet<string>): BackupExecutionStatus {
  if (status === "queued" && jobId && running.has(jobId)) return "running";
  return BackupExecutionStatus.parse(status);
}

/** An execution as the API shows it: its row, and the jobs an agent is running now (see shownStatus). */
export interface ExecutionView {
  row: ExecutionRow;
  running: ReadonlySet<string>;
}

/** A schedule as the API shows it: its row, its database, its next tick here, its newest execution. */
export interface ScheduleView {
  row: ScheduleRow;
  databaseUuid: string;
  nextRunAt: Date | null;
  last: ExecutionView | null;
}

/**
 * What every part of the backups service shares: its dependencies, the scheduler of this
 * replica and the lookups (the database through the team scope, 404 for another team's,
 * 404/403 by its environment's permissions; its schedules and their executions inside it).
 */
export class BackupLookups {
  watcher: ScheduleWatcher | null = null;
  log: Pick<Logger, "error" | "warn">;

  constructor(readonly deps: BackupServiceDeps) {
    this.log = deps.log ?? { error: () => {}, warn: () => {} };
  }

  get db(): Db {
    return this.deps.db;
  }

  async schedule(scope: TeamScope, dbUuid: string, backupUuid: string, need: Need): Promise<{ database: DatabaseRef; schedule: ScheduleRow }> {
    const database = await scope.database(dbUuid, need);
    // backupType null: a dump schedule (a volume backup of the database is a resource backup, w8/rbsources).
    const schedule = await this.db.backupSchedule.findFirst({ where: { uuid: backupUuid, databaseId: database.id, backupType: null } });
    if (!schedule) throw new NotFound("Backup schedule");
    return { database, schedule };
  }

  async execution(scope: TeamScope, dbUuid: string, backupUuid: string, executionUuid: string, need: Need) {
    const found = await this.schedule(scope, dbUuid, backupUuid, need);
    const execution = await this.db.backupExecution.findFirst({ where: { uuid: executionUuid, scheduleId: found.schedule.id } });
    if (!execution) throw new NotFound("Backup execution");
    return { ...found, execution };
  }

  /** Job ids among the executions' backup and restore jobs that an agent is running now. */
  async runningJobs(rows: Pick<ExecutionRow, "status" | "jobId" | "restoreStatus" | "restoreJobId">[]): Promise<Set<string>> {
    const ids = rows.flatMap((r) => [r.status === "queued" ? r.jobId : null, r.restoreStatus === "queued" ? r.restoreJobId : null]).filter((v): v is string => !!v);
    const out = new Set<string>();
    for (const part of chunks(ids)) {
      const jobs = await this.db.job.findMany({ where: { id: { in: part }, status: "running" }, select: { id: true } });
      for (const j of jobs) out.add(j.id);
    }
    return out;
  }

  /**
   * Where an execution's file is: on the server and/or in the storage its object went to (the
   * execution's own, which the schedule may have moved away from since).
   */
  async location(execution: ExecutionRow): Promise<BackupLocation> {
    let s3: BackupLocation["s3"] = null;
    if (execution.s3Key && execution.s3StorageId !== null) {
      const d = await this.deps.storages.destinationById(execution.s3StorageId);
      if (d) s3 = { target: d.target, key: execution.s3Key };
    }
    return { local_path: execution.localPath, s3 };
  }

  credentials(sealed: string): DbCredentials {
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

  /** Why a backup of the schedule cannot start now (null: it can): its previous run or a restore of the database is open. */
  async backupClash(db: Db | Prisma.TransactionClient, scheduleId: number, databaseId: number): Promise<string | null> {
    if (await db.backupExecution.count({ where: { scheduleId, status: { in: OPEN } } })) return "the previous backup of this schedule is still running";
    if (await db.backupExecution.count({ where: { schedule: { databaseId }, restoreStatus: { in: OPEN } } })) return "a restore of this database is running";
    return null;
  }

  /** Why a restore into the database cannot start now (null: it can): another restore or any backup of it is open. */
  async restoreClash(db: Db | Prisma.TransactionClient, databaseId: number): Promise<string | null> {
    if (await db.backupExecution.count({ where: { schedule: { databaseId }, restoreStatus: { in: OPEN } } })) return "Another restore of this database is running.";
    if (await db.backupExecution.count({ where: { schedule: { databaseId }, status: { in: OPEN } } })) return "A backup of this database is running; restore once it has ended.";
    return null;
  }
}
