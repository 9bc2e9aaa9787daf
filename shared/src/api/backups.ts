import { z } from "zod";
import { BodyId, Timestamp, Uuid, listOf, resourceId, requestBody } from "./common.js";
import { BackupPassphrase } from "./s3-storages.js";

/**
 * Backup schedules of a standalone database (spec 4.5: /databases/{uuid}/backups) and their
 * executions. Extensions of the spec, documented in docs/backups.md: number_of_backups_remote,
 * POST .../backups/{backup_uuid}/execute (a run outside the schedule) and
 * POST .../executions/{execution_uuid}/restore.
 */

/**
 * A cron expression of five fields (minute hour day-of-month month day-of-week, evaluated in
 * UTC) or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly. The shape is
 * checked here; the control plane checks the fields themselves with node-cron.
 */
export const CRON_MACROS = ["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"] as const;
export const CronExpression = z
  .string()
  .trim()
  .min(1)
  .max(128)
  .transform((v) => v.replace(/\s+/g, " "))
  .refine(
    (v) => (CRON_MACROS as readonly string[]).includes(v) || v.split(" ").length === 5,
    "Use five cron fields (minute hour day-of-month month day-of-week, in UTC), e.g. '0 3 * * *', or @hourly, @daily, @weekly, @monthly, @yearly.",
  )
  .meta({ description: "Cron expression (5 fields, UTC) or @hourly/@daily/@weekly/@monthly/@yearly", example: "0 3 * * *" });

const LocalCount = z.number().int().min(0).max(1000);
const RemoteCount = z.number().int().min(1).max(10_000);

export const CreateBackupScheduleBody = requestBody({
  frequency: CronExpression,
  s3_storage_id: BodyId.nullable()
    .optional()
    .meta({ description: "An S3 storage of the team (GET /s3-storages); absent or null: backups stay on the server only" }),
  number_of_backups_locally: LocalCount.default(7).meta({
    description: "Newest backup files kept on the database's server; 0 (only with an S3 storage): the file is removed once uploaded",
  }),
  number_of_backups_remote: RemoteCount.nullable()
    .default(null)
    .meta({ description: "Extension: newest backups of this database kept in the S3 storage; null keeps every one" }),
  enabled: z.boolean().default(true),
});
export type CreateBackupScheduleBody = z.output<typeof CreateBackupScheduleBody>;

export const UpdateBackupScheduleBody = requestBody({
    frequency: CronExpression.optional(),
    s3_storage_id: BodyId.nullable().optional(),
    number_of_backups_locally: LocalCount.optional(),
    number_of_backups_remote: RemoteCount.nullable().optional(),
    enabled: z.boolean().optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateBackupScheduleBody = z.output<typeof UpdateBackupScheduleBody>;

export const BACKUP_EXECUTION_STATUSES = ["queued", "running", "success", "failed"] as const;
export const BackupExecutionStatus = z.enum(BACKUP_EXECUTION_STATUSES);
export type BackupExecutionStatus = z.infer<typeof BackupExecutionStatus>;
export const RestoreStatus = BackupExecutionStatus;

export const BackupExecution = z
  .object({
    uuid: z.string(),
    status: BackupExecutionStatus,
    /** schedule: a cron tick; manual: POST .../execute */
    trigger: z.enum(["schedule", "manual"]),
    scheduled_for: Timestamp.nullable().meta({ description: "The cron tick (UTC minute) of scheduled runs" }),
    filename: z.string().nullable(),
    size: z.number().int().nullable().meta({ description: "Bytes of the stored file (compressed, and encrypted when is_encrypted)" }),
    is_encrypted: z.boolean(),
    s3_storage_id: z
      .number()
      .int()
      .nullable()
      .meta({ description: "The S3 storage this backup was sent to (the schedule may have moved to another since); null: kept on the server only" }),
    s3_key: z.string().nullable().meta({ description: "Object key in that storage while the object exists" }),
    stored_locally: z.boolean().meta({ description: "The file is still kept on the database's server" }),
    reason: z.string().nullable().meta({ description: "Why the backup failed" }),
    restore_status: RestoreStatus.nullable().meta({ description: "Last restore of this backup; null: never restored" }),
    restore_reason: z.string().nullable(),
    restored_at: Timestamp.nullable(),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
  })
  .meta({ id: "BackupExecution" });
export type BackupExecution = z.infer<typeof BackupExecution>;

export const BackupSchedule = z
  .object({
    uuid: z.string().meta({ description: "The backup_uuid of the paths" }),
    database_uuid: z.string(),
    frequency: z.string(),
    enabled: z.boolean(),
    s3_storage_id: z.number().int().nullable(),
    number_of_backups_locally: z.number().int(),
    number_of_backups_remote: z.number().int().nullable(),
    next_run_at: Timestamp.nullable().meta({ description: "Next cron tick (UTC) while enabled" }),
    last_execution: BackupExecution.pick({ uuid: true, status: true, created_at: true, finished_at: true }).nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "BackupSchedule" });
export type BackupSchedule = z.infer<typeof BackupSchedule>;

export const BackupScheduleList = listOf(BackupSchedule);
export const BackupScheduleMutation = z.object({ message: z.string(), data: BackupSchedule });
export const BackupExecutionList = listOf(BackupExecution);

export const DatabaseBackupsParams = z.object({ uuid: resourceId("database", Uuid) });
export const BackupScheduleParams = z.object({ uuid: resourceId("database", Uuid), backup_uuid: resourceId("backup_schedule", Uuid) });
export const BackupExecutionParams = z.object({
  uuid: resourceId("database", Uuid),
  backup_uuid: resourceId("backup_schedule", Uuid),
  execution_uuid: resourceId("backup_execution", Uuid),
});

/** POST .../execute and .../restore: the job is queued; follow the execution's status fields. */
export const BackupJobQueued = z.object({ message: z.string(), execution_uuid: z.string() });

export const RestoreBackupBody = requestBody({
  passphrase: BackupPassphrase.optional().meta({
    description: "Passphrase the backup was encrypted with, when it differs from the storage's current one (it was changed or removed since)",
  }),
});
export type RestoreBackupBody = z.output<typeof RestoreBackupBody>;
