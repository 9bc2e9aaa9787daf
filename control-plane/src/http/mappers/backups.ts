import { BackupExecution, BackupSchedule } from "@capstan/shared";
import { iso } from "../dto.js";
import { shownStatus, type ExecutionView, type ScheduleView } from "../../services/backups/index.js";
import type { Out } from "./types.js";

export const at = (d: Date | null) => (d ? iso(d) : null);

/** The stored file and its restore, as every backup execution (database or resource) shows them. */
export function storedFileFields({ row: r, running }: ExecutionView) {
  return {
    filename: r.filename,
    size: r.size === null ? null : Number(r.size),
    is_encrypted: r.isEncrypted,
    s3_storage_id: r.s3StorageId,
    s3_key: r.s3Key,
    stored_locally: r.localPath !== null,
    reason: r.reason,
    restore_status: r.restoreStatus === null ? null : shownStatus(r.restoreStatus, r.restoreJobId, running),
    restore_reason: r.restoreReason,
  };
}

export function backupScheduleDto(v: ScheduleView): Out<typeof BackupSchedule> {
  const { row: r, last } = v;
  return {
    uuid: r.uuid,
    database_uuid: v.databaseUuid,
    frequency: r.frequency,
    enabled: r.enabled,
    s3_storage_id: r.s3StorageId,
    number_of_backups_locally: r.numberOfBackupsLocally,
    number_of_backups_remote: r.numberOfBackupsRemote,
    next_run_at: at(v.nextRunAt),
    last_execution: last
      ? { uuid: last.row.uuid, status: shownStatus(last.row.status, last.row.jobId, last.running), created_at: iso(last.row.createdAt), finished_at: at(last.row.finishedAt) }
      : null,
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
  };
}

export function backupExecutionDto(v: ExecutionView): Out<typeof BackupExecution> {
  const { row: r, running } = v;
  return {
    uuid: r.uuid,
    status: shownStatus(r.status, r.jobId, running),
    trigger: r.trigger === "manual" ? "manual" : "schedule",
    scheduled_for: at(r.scheduledFor),
    ...storedFileFields(v),
    restored_at: at(r.restoredAt),
    created_at: iso(r.createdAt),
    finished_at: at(r.finishedAt),
  };
}
