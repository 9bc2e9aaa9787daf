import type { Logger } from "../../lib/log.js";
import type { JobRow } from "../../jobs/queue.js";
import { BackupLookups, type BackupServiceDeps, type ScheduleWatcher } from "./common.js";
import { BackupExecutions } from "./executions.js";
import { BackupOutcomes } from "./outcomes.js";
import { BackupRestores } from "./restore.js";
import { BackupSchedules } from "./schedules.js";
// resource backups (issue 19)
import { ResourceBackups } from "./resources.js";
import { PlatformBackups } from "./platform/index.js";
// ---- resource restores (issue 19, w7/restore) ----
import { ResourceRestores } from "./resource-restore.js";
// ---- configuration and full backups (issue 19, w8/rbconfig) ----
import { ConfigurationRestores, ResourceConfigurations, type ConfigurationKind } from "./configuration.js";
import { ApplicationConfigurationKind } from "./application-configuration.js";
import { DatabaseConfigurationKind } from "./database-configuration.js";
import { ResourceRestoreResult } from "@capstan/shared";
import { ResourceSources } from "./resource-sources.js";

export { volumeBackupFilename, RECENT_EXECUTIONS, type ResourceBackupView } from "./resources.js";
export { BACKUP_EXTENSIONS, backupFilename, backupKeyPrefix, cronErrors, shownStatus, type BackupServiceDeps, type ExecutionView, type ScheduleView, type ScheduleWatcher } from "./common.js";

/**
 * Backup schedules of standalone databases, their executions and restores: the one entry the
 * routes and other services use. Each part has one job: schedules.ts, executions.ts (runs,
 * manual and by the cron scheduler of backups/scheduler.ts), restore.ts, outcomes.ts (what a
 * job's end means for its execution, and the repair of what a replica that died missed);
 * common.ts holds the lookups and rules they share.
 */
export class BackupService {
  private readonly lookups: BackupLookups;
  private readonly schedules: BackupSchedules;
  private readonly executions: BackupExecutions;
  private readonly restores: BackupRestores;
  private readonly outcomes: BackupOutcomes;
  /** Resource backups (spec 4.10, issue 19): the routes of /resource-backups use these. */
  readonly resources: ResourceBackups;
  /** platform_instance backups (issue 19): run in the control plane. */
  private readonly platform: PlatformBackups;
  /** Restores of resource backups (POST /resource-backups/{id}/executions/{execution_id}/restore). */
  readonly resourceRestores: ResourceRestores;
  /** (w8/rbconfig) the configuration document a configuration or full restore hands back (an application's, a database's), applied by its outcome. */
  private readonly configurationRestores: ConfigurationRestores;
  private readonly configurations: ResourceConfigurations;

  constructor(deps: BackupServiceDeps) {
    this.lookups = new BackupLookups(deps);
    this.schedules = new BackupSchedules(this.lookups);
    this.executions = new BackupExecutions(this.lookups);
    this.restores = new BackupRestores(this.lookups);
    this.outcomes = new BackupOutcomes(this.lookups);
    const platform = new PlatformBackups(this.lookups, deps.platform ?? null);
    this.platform = platform;
    // w8/rbsources: the resources of resource backups (applications, services, databases).
    const sources = new ResourceSources(this.lookups);
    this.configurations = new ResourceConfigurations({
      application: new ApplicationConfigurationKind(deps.db, deps.box, deps.dialect, deps.hostsChanged ?? (async () => undefined)),
      database: new DatabaseConfigurationKind(this.lookups, deps.databases),
    });
    this.resources = new ResourceBackups(this.lookups, this.executions, platform, sources, this.configurations);
    this.resourceRestores = new ResourceRestores(this.lookups, sources);
    this.configurationRestores = new ConfigurationRestores(this.lookups, this.configurations);
  }

  /** Outcome of resource.restore: a configuration document it hands back is applied (configuration.ts), else the restore fields as db.restore's. */
  async applyResourceRestoreEnd(job: Parameters<ConfigurationRestores["restoreEnded"]>[0]): Promise<void> {
    if (await this.configurationRestores.restoreEnded(job)) return;
    await this.outcomes.applyRestoreEnd(job, ResourceRestoreResult);
  }

  /** Outcome of backup.delete (jobs/outcome-map.ts): the row is gone already; a failure is worth a line in the log. */
  async deleteEnded(job: Pick<JobRow, "id" | "status" | "error">): Promise<void> {
    if (job.status !== "succeeded") this.lookups.log.warn({ job: job.id, error: job.error }, "removing a deleted backup's file failed");
  }

  /** A service's configuration documents (services/services/configuration.ts): the service layer is built on top of this one. */
  bindServiceConfiguration(configuration: ConfigurationKind): void {
    this.configurations.bind("service", configuration);
  }

  bindScheduler(watcher: ScheduleWatcher, log?: Pick<Logger, "error" | "warn">): void {
    this.lookups.watcher = watcher;
    if (log) this.lookups.log = log;
  }

  // Schedules
  countSchedules: BackupSchedules["countSchedules"] = (...a) => this.schedules.countSchedules(...a);
  listSchedules: BackupSchedules["listSchedules"] = (...a) => this.schedules.listSchedules(...a);
  schedulesOfDatabase: BackupSchedules["schedulesOfDatabase"] = (...a) => this.schedules.schedulesOfDatabase(...a);
  getSchedule: BackupSchedules["getSchedule"] = (...a) => this.schedules.getSchedule(...a);
  createSchedule: BackupSchedules["createSchedule"] = (...a) => this.schedules.createSchedule(...a);
  updateSchedule: BackupSchedules["updateSchedule"] = (...a) => this.schedules.updateSchedule(...a);
  deleteSchedule: BackupSchedules["deleteSchedule"] = (...a) => this.schedules.deleteSchedule(...a);
  beforeDatabaseDelete: BackupSchedules["beforeDatabaseDelete"] = (...a) => this.schedules.beforeDatabaseDelete(...a);
  beforeServiceDelete: BackupSchedules["beforeServiceDelete"] = (...a) => this.schedules.beforeServiceDelete(...a);

  // Executions
  countExecutions: BackupExecutions["countExecutions"] = (...a) => this.executions.countExecutions(...a);
  listExecutions: BackupExecutions["listExecutions"] = (...a) => this.executions.listExecutions(...a);
  deleteExecution: BackupExecutions["deleteExecution"] = (...a) => this.executions.deleteExecution(...a);
  execute: BackupExecutions["execute"] = (...a) => this.executions.execute(...a);
  claimTick: BackupExecutions["claimTick"] = (...a) => this.executions.claimTick(...a);

  // Restore
  restore: BackupRestores["restore"] = (...a) => this.restores.restore(...a);

  // Job outcomes and their repair
  applyBackupEnd: BackupOutcomes["applyBackupEnd"] = (...a) => this.outcomes.applyBackupEnd(...a);
  applyRestoreEnd: BackupOutcomes["applyRestoreEnd"] = (...a) => this.outcomes.applyRestoreEnd(...a);
  repair: BackupOutcomes["repair"] = async () => {
    await this.outcomes.repair();
    await this.platform.repair();
  };
}
