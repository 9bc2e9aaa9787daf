import {
  RESOURCE_CLASS,
  SUPPORTED_RESOURCE_BACKUP,
  resourceKindOf,
  ResourceJobBackupType,
  hasVolumes,
  type CreateResourceBackupBody,
  type ResourceBackupPayload,
  type ResourceBackupQuery,
  type UpdateResourceBackupBody,
} from "@capstan/shared";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, Invalid, NotFound } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import { BackupLookups, OPEN, PayloadError, backupKeyPrefix, cronErrors, type ExecutionRow, type ScheduleRow } from "./common.js";
import type { BackupExecutions, PreparedRun, RunTarget } from "./executions.js";
import { PlatformBackups } from "./platform/index.js";
import { configurationDocument } from "./configuration.js";

/** Executions shown in a resource backup's detail (newest first). */
export const RECENT_EXECUTIONS = 20;

/** `<volume|configuration|full>-<UTC yyyymmddThhmmssZ>-<first 8 of the execution uuid>.tar.gz[.gpg]` (agent retention knows the prefixes). */
export function volumeBackupFilename(at: Date, executionUuid: string, encrypted: boolean, type: ResourceJobBackupType = "volume"): string {
  const stamp = at.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
  return `${type}-${stamp}-${executionUuid.slice(0, 8)}.tar.gz${encrypted ? ".gpg" : ""}`;
}

/** A resource backup as the API shows it: its row, its resource, its next tick here and (detail) its newest executions. */
export interface ResourceBackupView {
  row: ScheduleRow;
  resourceType: keyof typeof RESOURCE_CLASS;
  resourceId: number | null;
  nextRunAt: Date | null;
  executions: { row: ExecutionRow; running: ReadonlySet<string> }[] | null;
}

type AppOfSchedule = { id: number; uuid: string; name: string; serverId: number; environment: { id: number; projectId: number }; server: { id: number; name: string; status: string } };

/**
 * Resource backups (spec 4.10, issue 19): schedules of the one BackupSchedule table with a
 * backupType (and here an application), so that runs, the cron scheduler with its one claim per
 * tick, job outcomes, retention and the repair sweep are the database backups' own. This
 * version backs up applications' volumes, their configuration document (configuration.ts) or
 * both; the spec's other resource types answer 422.
 */
export class ResourceBackups {
  constructor(
    private readonly lookups: BackupLookups,
    private readonly executions: BackupExecutions,
    private readonly platform: PlatformBackups,
  ) {
    executions.resourceTarget = (schedule) => this.targetOf(schedule);
    executions.platformRun = (schedule, run) => platform.start(schedule, run);
  }

  private get db() {
    return this.lookups.db;
  }

  /** A resource backup of the team by id, its application checked for `need` (404 for another team's or an invisible one). */
  private async find(scope: TeamScope, id: number, need: "view" | "deploy" | "manage"): Promise<{ row: ScheduleRow }> {
    const row = await this.db.backupSchedule.findFirst({ where: { id, teamId: scope.teamId, backupType: { not: null } }, include: { application: { select: { id: true, uuid: true } } } });
    // platform_instance (issue 19): the root team's owners and admins only, whatever the need.
    if (row && PlatformBackups.is(row)) {
      await this.platform.requireInstanceAdmin(scope);
      const { application: _a, ...schedule } = row;
      return { row: schedule };
    }
    if (!row || !row.application) throw new NotFound("Resource backup");
    try {
      await scope.application(row.application.uuid, need);
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound("Resource backup");
      throw err;
    }
    const { application: _app, ...schedule } = row;
    return { row: schedule };
  }

  async list(scope: TeamScope, query: ResourceBackupQuery): Promise<ResourceBackupView[]> {
    const kind = query.resource_type ? resourceKindOf(query.resource_type) : null;
    // Only applications have resource backups in this version: a filter for another kind lists none.
    if (kind && kind !== "application") return [];
    const rows = await this.db.backupSchedule.findMany({
      where: { teamId: scope.teamId, backupType: { not: null }, applicationId: query.resource_id ?? { not: null } },
      include: { application: { select: { environment: { select: { id: true, projectId: true } } } } },
      orderBy: { id: "asc" },
    });
    const live = rows.filter((r) => r.application);
    const visible = await scope.canSeeEnvironments(live.map((r) => r.application!.environment));
    const shown = live.filter((_, i) => visible[i]).map(({ application: _a, ...row }) => this.view(row, null));
    // platform_instance schedules (issue 19): listed without a filter, to the root team's owners and admins.
    if (kind || query.resource_id !== undefined) return shown;
    const platform = await this.db.backupSchedule.findMany({ where: { teamId: scope.teamId, backupType: "platform_instance" }, orderBy: { id: "asc" } });
    if (!platform.length || !(await this.platform.requireInstanceAdmin(scope).then(() => true, () => false))) return shown;
    return [...shown, ...platform.map((row) => this.view(row, null))].sort((a, b) => a.row.id - b.row.id);
  }

  async get(scope: TeamScope, id: number): Promise<ResourceBackupView> {
    const { row } = await this.find(scope, id, "view");
    const executions = await this.db.backupExecution.findMany({ where: { scheduleId: row.id }, orderBy: { id: "desc" }, take: RECENT_EXECUTIONS });
    const running = await this.lookups.runningJobs(executions);
    return this.view(row, executions.map((e) => ({ row: e, running })));
  }

  /** Rules across fields (each field alone is checked by the shared schema). */
  private check(s: { frequency: string; s3StorageId: number | null; keepLocally: boolean; local: number }): void {
    const errors: Record<string, string[]> = {};
    const cronProblems = cronErrors(s.frequency);
    if (cronProblems) errors.frequency = cronProblems;
    if (s.s3StorageId === null && !s.keepLocally) errors.keep_locally = ["Without an S3 storage, backups must be kept on the server."];
    if (s.s3StorageId === null && s.keepLocally && s.local === 0) errors.number_of_backups_locally = ["Without an S3 storage, at least one backup must be kept on the server."];
    if (Object.keys(errors).length) throw new Invalid(errors);
  }

  async create(scope: TeamScope, input: CreateResourceBackupBody): Promise<ResourceBackupView> {
    const errors: Record<string, string[]> = {};
    if (!(SUPPORTED_RESOURCE_BACKUP.resourceTypes as readonly string[]).includes(input.resource_type)) {
      errors.resource_type = [`This version backs up ${SUPPORTED_RESOURCE_BACKUP.resourceTypes.join(", ")} resources; ${input.resource_type} is not supported yet.`];
    }
    if (!(SUPPORTED_RESOURCE_BACKUP.backupTypes as readonly string[]).includes(input.backup_type)) {
      errors.backup_type = [`This version runs ${SUPPORTED_RESOURCE_BACKUP.backupTypes.join(", ")} backups; ${input.backup_type} is not supported yet.`];
    }
    if (input.resource_id === undefined && input.resource_type !== "platform_instance") errors.resource_id = ["Required for this resource_type."];
    // platform_instance (issue 19): the backup type and the resource type go together, and no resource.
    if ((input.backup_type === "platform_instance") !== (input.resource_type === "platform_instance")) errors.backup_type = ["platform_instance is both the resource_type and the backup_type of a platform backup."];
    if (input.resource_type === "platform_instance" && input.resource_id !== undefined) errors.resource_id = ["A platform backup has no resource_id."];
    if (input.resource_type === "platform_instance" && input.stop_during_backup) errors.stop_during_backup = ["A platform backup stops nothing."];
    if (input.backup_type === "configuration" && input.stop_during_backup) errors.stop_during_backup = ["A configuration backup stops nothing: it archives no volume."];
    if (Object.keys(errors).length) throw new Invalid(errors);
    if (input.backup_type === "platform_instance") {
      await this.platform.requireInstanceAdmin(scope);
      const s3StorageId = input.s3_storage_id ?? null;
      this.check({ frequency: input.frequency, s3StorageId, keepLocally: input.keep_locally, local: input.number_of_backups_locally });
      if (s3StorageId !== null) await scope.s3Storage(s3StorageId);
      const row = await this.platform.create(scope, input, s3StorageId);
      this.lookups.watcher?.changed(row.id);
      return this.view(row, null);
    }
    const found = await this.db.application.findFirst({ where: { id: input.resource_id!, teamId: scope.teamId }, select: { uuid: true } });
    if (!found) throw new NotFound("Application");
    const app = await scope.application(found.uuid, "manage");
    const s3StorageId = input.s3_storage_id ?? null;
    this.check({ frequency: input.frequency, s3StorageId, keepLocally: input.keep_locally, local: input.number_of_backups_locally });
    if (s3StorageId !== null) await scope.s3Storage(s3StorageId);
    const row = await this.db.backupSchedule.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        applicationId: app.id,
        backupType: input.backup_type,
        frequency: input.frequency,
        enabled: input.enabled,
        s3StorageId,
        keepLocally: input.keep_locally,
        numberOfBackupsLocally: input.number_of_backups_locally,
        stopDuringBackup: input.stop_during_backup,
      },
    });
    this.lookups.watcher?.changed(row.id);
    return this.view(row, null);
  }

  async update(scope: TeamScope, id: number, input: UpdateResourceBackupBody): Promise<ResourceBackupView> {
    const { row: current } = await this.find(scope, id, "manage");
    if (PlatformBackups.is(current) && input.stop_during_backup) throw new Invalid({ stop_during_backup: ["A platform backup stops nothing."] });
    if (current.backupType === "configuration" && input.stop_during_backup) throw new Invalid({ stop_during_backup: ["A configuration backup stops nothing: it archives no volume."] });
    const next = {
      frequency: input.frequency ?? current.frequency,
      s3StorageId: input.s3_storage_id === undefined ? current.s3StorageId : input.s3_storage_id,
      keepLocally: input.keep_locally ?? current.keepLocally,
      local: input.number_of_backups_locally ?? current.numberOfBackupsLocally,
    };
    this.check(next);
    if (next.s3StorageId !== null && next.s3StorageId !== current.s3StorageId) await scope.s3Storage(next.s3StorageId);
    const row = await this.db.backupSchedule.update({
      where: { id: current.id },
      data: {
        frequency: next.frequency,
        s3StorageId: next.s3StorageId,
        keepLocally: next.keepLocally,
        numberOfBackupsLocally: next.local,
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
        ...(input.stop_during_backup !== undefined ? { stopDuringBackup: input.stop_during_backup } : {}),
      },
    });
    this.lookups.watcher?.changed(row.id);
    return this.view(row, null);
  }

  /** Deletes the schedule and its execution records; a running backup is cancelled. Files and objects stay (spec 4.10). */
  async remove(scope: TeamScope, id: number): Promise<void> {
    const { row } = await this.find(scope, id, "manage");
    const open = await this.db.backupExecution.findMany({ where: { scheduleId: row.id, status: { in: OPEN } }, select: { jobId: true } });
    await this.db.backupSchedule.deleteMany({ where: { id: row.id } });
    this.lookups.watcher?.changed(row.id);
    for (const e of open) if (e.jobId) await this.lookups.deps.jobs.cancel(e.jobId, "the resource backup was deleted");
  }

  /** POST /resource-backups/{id}/execute: a run outside the cron schedule; returns the execution's id. */
  async execute(scope: TeamScope, id: number): Promise<number> {
    const { row } = await this.find(scope, id, "deploy");
    if (PlatformBackups.is(row)) {
      const started = await this.platform.start(row, { trigger: "manual", scheduledFor: null });
      if (started.kind === "refused") throw new Conflict(started.reason);
      if (started.kind === "lost") throw new Conflict("Cannot back up now: another run was just claimed.");
      return started.id;
    }
    const target = await this.targetOf(row);
    if (!target) throw new NotFound("Resource backup");
    const started = await this.executions.start(row, target, { trigger: "manual", scheduledFor: null });
    if (started.kind === "refused") throw new Conflict(started.reason);
    if (started.kind === "lost") throw new Conflict("Cannot back up now: another run was just claimed.");
    return started.id;
  }

  /** The run target of a resource backup schedule: its application's run lock, server and resource.backup job. */
  private async targetOf(schedule: ScheduleRow): Promise<RunTarget | null> {
    if (schedule.applicationId === null) return null;
    const app = await this.db.application.findUnique({
      where: { id: schedule.applicationId },
      select: { id: true, uuid: true, name: true, serverId: true, environment: { select: { id: true, projectId: true } }, server: { select: { id: true, name: true, status: true } } },
    });
    if (!app) return null;
    return {
      lock: { kind: "applicationRuns", id: app.id },
      serverId: app.serverId,
      server: app.server,
      clash: async (tx) => {
        if (await tx.backupExecution.count({ where: { scheduleId: schedule.id, status: { in: OPEN } } })) return "the previous backup of this schedule is still running";
        // resource restores (w7/restore): no backup while a restore of the application runs.
        if (await tx.backupExecution.count({ where: { schedule: { applicationId: app.id }, restoreStatus: { in: OPEN } } })) return "a restore of this application is running";
        return null;
      },
      prepare: (executionUuid, at) => this.prepare(schedule, app, executionUuid, at),
    };
  }

  private async prepare(schedule: ScheduleRow, app: AppOfSchedule, executionUuid: string, at: Date): Promise<PreparedRun> {
    // (w8/rbconfig) configuration: the document only; full: the volumes and the document in one archive.
    const type = ResourceJobBackupType.safeParse(schedule.backupType);
    if (!type.success) throw new PayloadError(`the backup type ${schedule.backupType} does not run on an agent`);
    const volumes = hasVolumes(type.data) ? await this.db.volume.findMany({ where: { applicationId: app.id }, orderBy: { id: "asc" }, select: { name: true, mountPath: true } }) : [];
    if (hasVolumes(type.data) && !volumes.length) throw new PayloadError(`the application ${app.name} has no persistent storages to back up`);
    const configuration = type.data === "volume" ? null : await configurationDocument(this.db, app.id, at);
    let s3: ResourceBackupPayload["s3"] = null;
    let passphrase: string | null = null;
    if (schedule.s3StorageId !== null) {
      const d = await this.lookups.deps.storages.destinationById(schedule.s3StorageId);
      if (!d) throw new PayloadError("the schedule's S3 storage was deleted");
      s3 = { target: d.target, prefix: backupKeyPrefix(d.prefix, app.uuid), keep_remote: schedule.numberOfBackupsRemote };
      passphrase = d.passphrase;
    }
    const payload: ResourceBackupPayload = {
      resource: { kind: "application", uuid: app.uuid, name: app.name },
      volumes: volumes.map((v) => ({ name: v.name, mount_path: v.mountPath })),
      schedule_uuid: schedule.uuid,
      execution_uuid: executionUuid,
      filename: volumeBackupFilename(at, executionUuid, passphrase !== null, type.data),
      // keep_locally false: the file goes once it is uploaded (the check above makes sure there is a storage).
      keep_locally: schedule.keepLocally ? schedule.numberOfBackupsLocally : 0,
      s3,
      passphrase,
      stop_during_backup: hasVolumes(type.data) && schedule.stopDuringBackup,
      backup_type: type.data,
      configuration,
    };
    return {
      filename: payload.filename,
      isEncrypted: passphrase !== null,
      s3StorageId: s3 ? schedule.s3StorageId : null,
      enqueue: (tx, serverId) => this.lookups.deps.jobs.enqueue(tx, serverId, "resource.backup", payload),
    };
  }

  private view(row: ScheduleRow, executions: ResourceBackupView["executions"]): ResourceBackupView {
    return {
      row,
      resourceType: PlatformBackups.is(row) ? "platform_instance" : "application",
      resourceId: row.applicationId,
      nextRunAt: row.enabled ? (this.lookups.watcher?.nextRun(row.id, row.frequency) ?? null) : null,
      executions,
    };
  }
}
