import { RESOURCE_CLASS, ResourceBackup, ResourceBackupDetail, ResourceBackupExecution } from "@capstan/shared";
import { iso } from "../dto.js";
import { shownStatus, type ExecutionView, type ResourceBackupView } from "../../services/backups/index.js";
import type { Out } from "./types.js";
import { at, storedFileFields } from "./backups.js";

export function resourceBackupDto(v: ResourceBackupView): Out<typeof ResourceBackup> {
  const r = v.row;
  return {
    id: r.id,
    resource_type: RESOURCE_CLASS[v.resourceType],
    resource_id: v.resourceId,
    backup_type: (r.backupType ?? "volume") as Out<typeof ResourceBackup>["backup_type"],
    frequency: r.frequency,
    s3_storage_id: r.s3StorageId,
    enabled: r.enabled,
    keep_locally: r.keepLocally,
    number_of_backups_locally: r.numberOfBackupsLocally,
    number_of_backups_remote: r.numberOfBackupsRemote,
    stop_during_backup: r.stopDuringBackup,
    next_run_at: at(v.nextRunAt),
    created_at: iso(r.createdAt),
  };
}

export function resourceBackupExecutionDto(v: ExecutionView): Out<typeof ResourceBackupExecution> {
  const { row: r, running } = v;
  return {
    id: r.id,
    status: shownStatus(r.status, r.jobId, running),
    trigger: r.trigger === "schedule" ? "schedule" : "manual",
    ...storedFileFields(v),
    created_at: iso(r.createdAt),
    finished_at: at(r.finishedAt),
  };
}

export function resourceBackupDetailDto(v: ResourceBackupView): Out<typeof ResourceBackupDetail> {
  return { ...resourceBackupDto(v), executions: (v.executions ?? []).map(resourceBackupExecutionDto) };
}
