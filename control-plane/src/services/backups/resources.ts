import {
  RESOURCE_CLASS,
  SUPPORTED_RESOURCE_BACKUP,
  BACKUP_TYPES_OF_KIND,
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
import { BackupLookups, OPEN, PayloadError, cronErrors, openRunJobs, type ExecutionRow, type ScheduleRow } from "./common.js";
import type { BackupExecutions, PreparedRun, RunTarget } from "./executions.js";
import { PlatformBackups } from "./platform/index.js";
import type { ResourceConfigurations } from "./configuration.js";
// ---- w8/rbsources: services and databases as sources ----
import { ResourceSources, SOURCE_COLUMN, resourceKeyPrefix, runLock, sourceOf, type SourceKind, type SourceResource } from "./resource-sources.js";

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
    private readonly sources: ResourceSources,
    private readonly configurations: ResourceConfigurations,
  ) {
    executions.resourceTarget = (schedule) => this.targetOf(schedule);
    executions.platformRun = (schedule, run) => platform.start(schedule, run);
  }

  private get db() {
    return this.lookups.db;
  }

  /** A resource backup of the team by id, its resource checked for `need` (404 for another team's or an invisible one). */
  private async find(scope: TeamScope, id: number, need: "view" | "deploy" | "manage"): Promise<{ row: ScheduleRow }> {
    const row = await this.db.backupSchedule.findFirst({ where: { id, teamId: scope.teamId, backupType: { not: null } } });
    // platform_instance (issue 19): the root team's owners and admins only, whatever the need.
    if (row && PlatformBackups.is(row)) {
      await this.platform.requireInstanceAdmin(scope);
      return { row };
    }
    const source = row ? sourceOf(row) : null;
    const resource = source ? await this.sources.load(source.kind, source.id, scope.teamId) : null;
    if (!row || !resource) throw new NotFound("Resource backup");
    try {
      await this.sources.check(scope, resource, need);
    } catch (err) {
      if (err instanceof NotFound) throw new NotFound("Resource backup");
      throw err;
    }
    return { row };
  }

  async list(scope: TeamScope, query: ResourceBackupQuery): Promise<ResourceBackupView[]> {
    const kind = query.resource_type ? resourceKindOf(query.resource_type) : null;
    // w8/rbsources: applications, services and databases; resource_id alone matches a resource of any kind with that id.
    const kinds = kind && kind !== "platform_instance" ? [kind] : (["application", "service", "database"] as const);
    const env = { select: { environment: { select: { id: true, projectId: true } } } };
    const rows = await this.db.backupSchedule.findMany({
      where: { teamId: scope.teamId, backupType: { not: null }, OR: kinds.map((k) => ({ [SOURCE_COLUMN[k]]: query.resource_id ?? { not: null } })) },
      include: { application: env, service: env, database: env },
      orderBy: { id: "asc" },
    });
    // A database's dump schedules have no backupType (not listed); a schedule whose resource is gone meanwhile neither.
    const live = rows.flatMap(({ application, service, database, ...row }) => {
      const e = application?.environment ?? service?.environment ?? database?.environment;
      return e && sourceOf(row) ? [{ row, environment: e }] : [];
    });
    const visible = await scope.canSeeEnvironments(live.map((r) => r.environment));
    const shown = live.filter((_, i) => visible[i]).map(({ row }) => this.view(row, null));
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
  private check(s: { frequency: string; s3StorageId: number | null; keepLocally: boolean; local: number; remote?: number | null }): void {
    const errors: Record<string, string[]> = {};
    const cronProblems = cronErrors(s.frequency);
    if (cronProblems) errors.frequency = cronProblems;
    if (s.s3StorageId === null && !s.keepLocally) errors.keep_locally = ["Without an S3 storage, backups must be kept on the server."];
    if (s.s3StorageId === null && s.keepLocally && s.local === 0) errors.number_of_backups_locally = ["Without an S3 storage, at least one backup must be kept on the server."];
    // w8/rbsources: remote retention, as for database backups.
    if (s.s3StorageId === null && s.remote != null) errors.number_of_backups_remote = ["Only with an S3 storage (s3_storage_id)."];
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
    if (!errors.backup_type && input.resource_type !== "platform_instance") {
      const allowed: readonly string[] = BACKUP_TYPES_OF_KIND[input.resource_type];
      if (!allowed.includes(input.backup_type)) errors.backup_type = [`A ${input.resource_type} has ${allowed.join(", ")} backups in this version; ${input.backup_type} is not supported for it yet.`];
    }
    if (Object.keys(errors).length) throw new Invalid(errors);
    if (input.backup_type === "platform_instance") {
      await this.platform.requireInstanceAdmin(scope);
      const s3StorageId = input.s3_storage_id ?? null;
      this.check({ frequency: input.frequency, s3StorageId, keepLocally: input.keep_locally, local: input.number_of_backups_locally, remote: input.number_of_backups_remote });
      if (s3StorageId !== null) await scope.s3Storage(s3StorageId);
      const row = await this.platform.create(scope, input, s3StorageId);
      this.lookups.watcher?.changed(row.id);
      return this.view(row, null);
    }
    const resource = await this.sources.resolve(scope, input.resource_type as SourceKind, input.resource_id!, "manage");
    const s3StorageId = input.s3_storage_id ?? null;
    const remote = input.number_of_backups_remote ?? null;
    this.check({ frequency: input.frequency, s3StorageId, keepLocally: input.keep_locally, local: input.number_of_backups_locally, remote });
    if (s3StorageId !== null) await scope.s3Storage(s3StorageId);
    const row = await this.db.backupSchedule.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        [SOURCE_COLUMN[resource.kind]]: resource.id,
        numberOfBackupsRemote: remote,
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
      remote: input.number_of_backups_remote === undefined ? current.numberOfBackupsRemote : input.number_of_backups_remote,
    };
    // Dropping the storage drops remote retention with it (as for database backups).
    if (next.s3StorageId === null && input.number_of_backups_remote === undefined) next.remote = null;
    this.check(next);
    if (next.s3StorageId !== null && next.s3StorageId !== current.s3StorageId) await scope.s3Storage(next.s3StorageId);
    const row = await this.db.backupSchedule.update({
      where: { id: current.id },
      data: {
        frequency: next.frequency,
        s3StorageId: next.s3StorageId,
        keepLocally: next.keepLocally,
        numberOfBackupsLocally: next.local,
        numberOfBackupsRemote: next.remote,
        ...(input.enabled !== undefined ? { enabled: input.enabled } : {}),
        ...(input.stop_during_backup !== undefined ? { stopDuringBackup: input.stop_during_backup } : {}),
      },
    });
    this.lookups.watcher?.changed(row.id);
    return this.view(row, null);
  }

  /** Deletes the schedule and its execution records; a running backup or restore is cancelled. Files and objects stay (spec 4.10). */
  async remove(scope: TeamScope, id: number): Promise<void> {
    const { row } = await this.find(scope, id, "manage");
    // Its running backup and its running restore alike.
    const open = await openRunJobs(this.db, { id: row.id });
    await this.db.backupSchedule.deleteMany({ where: { id: row.id } });
    this.lookups.watcher?.changed(row.id);
    for (const id of open) await this.lookups.deps.jobs.cancel(id, "the resource backup was deleted");
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

  /**
   * The run target of a resource backup schedule: its resource's run lock (resource-sources.ts
   * runLock), server and resource.backup job (w8/rbsources: applications, services, databases).
   */
  private async targetOf(schedule: ScheduleRow): Promise<RunTarget | null> {
    const source = sourceOf(schedule);
    const resource = source ? await this.sources.load(source.kind, source.id) : null;
    if (!resource) return null;
    return {
      lock: runLock(resource),
      serverId: resource.serverId,
      server: resource.server,
      clash: async (tx) => {
        if (await tx.backupExecution.count({ where: { scheduleId: schedule.id, status: { in: OPEN } } })) return "the previous backup of this schedule is still running";
        // resource restores (w7/restore): no backup while a restore of the resource runs.
        return this.sources.clash(tx, resource, "backup");
      },
      prepare: (executionUuid, at) => this.prepare(schedule, resource, executionUuid, at),
    };
  }

  private async prepare(schedule: ScheduleRow, resource: SourceResource, executionUuid: string, at: Date): Promise<PreparedRun> {
    // (w8/rbconfig) configuration: the document only; full: the volumes and the document in one archive (applications, databases, services).
    const type = ResourceJobBackupType.safeParse(schedule.backupType);
    if (!type.success) throw new PayloadError(`the backup type ${schedule.backupType} does not run on an agent`);
    const volumes = hasVolumes(type.data) ? await this.sources.volumes(resource) : [];
    if (hasVolumes(type.data) && !volumes.length) throw new PayloadError(`the ${resource.kind} ${resource.name} has no persistent storages (volumes) to back up`);
    const kind = type.data === "volume" ? null : this.configurations.of(resource.kind);
    if (type.data !== "volume" && !kind) throw new PayloadError(`a ${type.data} backup of a ${resource.kind} does not run on this instance`);
    const configuration = kind ? await kind.document(resource.id, at) : null;
    let s3: ResourceBackupPayload["s3"] = null;
    let passphrase: string | null = null;
    if (schedule.s3StorageId !== null) {
      const d = await this.lookups.deps.storages.destinationById(schedule.s3StorageId);
      if (!d) throw new PayloadError("the schedule's S3 storage was deleted");
      // w8/rbsources: under the schedule's own prefix, so that remote retention counts its archives only.
      s3 = { target: d.target, prefix: resourceKeyPrefix(d.prefix, resource.uuid, schedule.uuid), keep_remote: schedule.numberOfBackupsRemote };
      passphrase = d.passphrase;
    }
    const payload: ResourceBackupPayload = {
      resource: { kind: resource.kind, uuid: resource.uuid, name: resource.name },
      volumes,
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
      resourceType: PlatformBackups.is(row) ? "platform_instance" : (sourceOf(row)?.kind ?? "application"),
      resourceId: sourceOf(row)?.id ?? null,
      nextRunAt: row.enabled ? (this.lookups.watcher?.nextRun(row.id, row.frequency) ?? null) : null,
      executions,
    };
  }
}
