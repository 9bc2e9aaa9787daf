import { type CreateBackupScheduleBody, type UpdateBackupScheduleBody } from "@capstan/shared";
import type { TeamScope } from "../../domain/scope.js";
import { Invalid } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import { BackupLookups, cronErrors, openRunJobs, type ScheduleRow, type ExecutionRow, type Window, type ScheduleView } from "./common.js";

/** Backup schedules of standalone databases: their cron frequency, storage and retention. */
export class BackupSchedules {
  constructor(private readonly lookups: BackupLookups) {}

  async countSchedules(scope: TeamScope, dbUuid: string): Promise<number> {
    const database = await scope.database(dbUuid, "view");
    return this.lookups.db.backupSchedule.count({ where: { databaseId: database.id, backupType: null } });
  }

  async listSchedules(scope: TeamScope, dbUuid: string, window: Window): Promise<ScheduleView[]> {
    const database = await scope.database(dbUuid, "view");
    const rows = await this.lookups.db.backupSchedule.findMany({ where: { databaseId: database.id, backupType: null }, orderBy: { id: "asc" }, ...window });
    return this.scheduleViews(rows, database.uuid);
  }

  /**
   * The schedules of a database as the API shows them, for the database detail (GET
   * /databases/{uuid}); the caller has checked access to the database already.
   */
  async schedulesOfDatabase(database: { id: number; uuid: string }): Promise<ScheduleView[]> {
    const rows = await this.lookups.db.backupSchedule.findMany({ where: { databaseId: database.id, backupType: null }, orderBy: { id: "asc" } });
    return this.scheduleViews(rows, database.uuid);
  }

  async getSchedule(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<ScheduleView> {
    const { database, schedule } = await this.lookups.schedule(scope, dbUuid, backupUuid, "view");
    return (await this.scheduleViews([schedule], database.uuid))[0]!;
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

  async createSchedule(scope: TeamScope, dbUuid: string, input: CreateBackupScheduleBody): Promise<ScheduleView> {
    const database = await scope.database(dbUuid, "manage");
    const s3StorageId = input.s3_storage_id ?? null;
    this.checkSchedule({ frequency: input.frequency, s3StorageId, local: input.number_of_backups_locally, remote: input.number_of_backups_remote });
    if (s3StorageId !== null) await scope.s3Storage(s3StorageId);
    const row = await this.lookups.db.backupSchedule.create({
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
    this.lookups.watcher?.changed(row.id);
    return (await this.scheduleViews([row], database.uuid))[0]!;
  }

  async updateSchedule(scope: TeamScope, dbUuid: string, backupUuid: string, input: UpdateBackupScheduleBody): Promise<ScheduleView> {
    const { database, schedule } = await this.lookups.schedule(scope, dbUuid, backupUuid, "manage");
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
    const row = await this.lookups.db.backupSchedule.update({
      where: { id: schedule.id },
      data: {
        frequency: next.frequency,
        s3StorageId: next.s3StorageId,
        numberOfBackupsLocally: next.local,
        numberOfBackupsRemote: next.remote,
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
      },
    });
    this.lookups.watcher?.changed(row.id);
    return (await this.scheduleViews([row], database.uuid))[0]!;
  }

  /**
   * Deletes the schedule and its execution records; running jobs of it are cancelled. Backup
   * files and objects stay where they are (as spec 4.10 says for resource backups).
   */
  async deleteSchedule(scope: TeamScope, dbUuid: string, backupUuid: string): Promise<void> {
    const { schedule } = await this.lookups.schedule(scope, dbUuid, backupUuid, "manage");
    const open = await openRunJobs(this.lookups.db, { id: schedule.id });
    await this.lookups.db.backupSchedule.delete({ where: { id: schedule.id } });
    this.lookups.watcher?.changed(schedule.id);
    for (const id of open) await this.lookups.deps.jobs.cancel(id, "the backup schedule was deleted");
  }

  /**
   * For the database service, before it deletes a database (schedules and executions go with
   * it by cascade): running backup and restore jobs are cancelled; files and objects stay.
   */
  async beforeDatabaseDelete(databaseId: number): Promise<void> {
    await this.cancelOpenRuns({ databaseId }, "the database was deleted");
  }

  /** A service's volume backups and restores (resource backups of its components' volumes) stop with it. */
  async beforeServiceDelete(serviceId: number): Promise<void> {
    await this.cancelOpenRuns({ serviceId }, "the service was deleted");
  }

  /** Cancels the open backup and restore jobs of a resource's schedules (their rows go with the resource). */
  private async cancelOpenRuns(resource: { databaseId: number } | { serviceId: number }, reason: string): Promise<void> {
    for (const id of await openRunJobs(this.lookups.db, resource)) await this.lookups.deps.jobs.cancel(id, reason);
    // Cron tasks of its schedules find nothing to claim from then on; the next reconcile drops them.
  }

  private async scheduleViews(rows: ScheduleRow[], databaseUuid: string): Promise<ScheduleView[]> {
    if (!rows.length) return [];
    // The newest execution per schedule, one indexed lookup each ([scheduleId, id]): a database
    // has a handful of schedules, and a DISTINCT over all executions would read every one.
    const last = new Map<number, ExecutionRow>();
    const newest = await Promise.all(rows.map((r) => this.lookups.db.backupExecution.findFirst({ where: { scheduleId: r.id }, orderBy: { id: "desc" } })));
    for (const e of newest) if (e) last.set(e.scheduleId, e);
    const running = await this.lookups.runningJobs([...last.values()]);
    return rows.map((r) => {
      const e = last.get(r.id);
      return {
        row: r,
        databaseUuid,
        nextRunAt: r.enabled ? (this.lookups.watcher?.nextRun(r.id, r.frequency) ?? null) : null,
        last: e ? { row: e, running } : null,
      };
    });
  }
}
