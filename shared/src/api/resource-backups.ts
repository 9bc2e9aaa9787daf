import { z } from "zod";
import { BodyId, IntId, Timestamp, listOf, requestBody, resourceId } from "./common.js";
import { BackupExecutionStatus, CronExpression, RestoreBackupBody, RestoreStatus } from "./backups.js";

/**
 * Resource backups (spec 4.10, issue 19): cron-scheduled backups of a resource, by integer id.
 * Applications, services and standalone databases: their named volumes (a service's of every
 * component, a database's data volume as a file-level copy: backup_type volume), their
 * configuration document (configuration), both in one archive (full); and the platform itself
 * (docs/resource-backups.md). `resource_type` is sent as the spec's plain word and answered as
 * the class-style string (RESOURCE_CLASS).
 */
export const RESOURCE_BACKUP_RESOURCE_TYPES = ["application", "service", "database", "platform_instance"] as const;
export const RESOURCE_BACKUP_TYPES = ["volume", "configuration", "full", "platform_instance"] as const;
/** What this version runs (the rest of the spec's values answer 422). */
export const SUPPORTED_RESOURCE_BACKUP = { resourceTypes: ["application", "service", "database", "platform_instance"], backupTypes: ["volume", "configuration", "full", "platform_instance"] } as const;
/** The backup types of each source kind. */
export const BACKUP_TYPES_OF_KIND = { application: ["volume", "configuration", "full"], service: ["volume", "configuration", "full"], database: ["volume", "configuration", "full"] } as const;

/** The class-style resource_type of responses (spec section 2), as Coolify's API names them. */
export const RESOURCE_CLASS = {
  application: "App\\Models\\Application",
  service: "App\\Models\\Service",
  database: "App\\Models\\StandaloneDatabase",
  platform_instance: "App\\Models\\InstanceSettings",
} as const;
export type ResourceBackupKind = keyof typeof RESOURCE_CLASS;
/** The plain word of a class-style string (or the word itself), null when it names no kind. */
export function resourceKindOf(value: string): ResourceBackupKind | null {
  for (const [kind, cls] of Object.entries(RESOURCE_CLASS)) if (value === kind || value === cls) return kind as ResourceBackupKind;
  return null;
}

const LocalCount = z.number().int().min(0).max(1000);
// ---- w8/rbsources: remote retention of resource backups (as number_of_backups_remote of database backups) ----
const RemoteCount = z.number().int().min(1).max(10_000).meta({
  description:
    "Newest archives of this resource backup kept in its S3 storage: after each successful upload the oldest beyond this count are deleted (only this schedule's archives, under its own key prefix). Null or absent: every object is kept. Only with an S3 storage",
});
/** Beyond the spec (docs/resource-backups.md): stop the resource's containers for the archive, start them again after. */
const StopDuringBackup = z.boolean().meta({
  description:
    "Beyond the spec: stop the resource's running containers while its volumes are archived (a consistent copy), and start them again afterwards, also after an agent crash. Default false: the backup runs live. Not with backup_type configuration (nothing is stopped)",
});

export const CreateResourceBackupBody = requestBody({
  resource_type: z.enum(RESOURCE_BACKUP_RESOURCE_TYPES).meta({
    description: "application, service (its components' named volumes), database (a standalone database's data volume, a file-level copy) or platform_instance (the root team's owners and admins only)",
  }),
  resource_id: BodyId.optional().meta({ description: "The resource's integer id (the `id` of its detail), resolved in the caller's team; required except for platform_instance" }),
  backup_type: z.enum(RESOURCE_BACKUP_TYPES).meta({
    description:
      "volume (the resource's persistent volumes), configuration (settings, variables with their values sealed, storages; a service's compose file, domains and label overrides; a database's credentials sealed: everything needed to recreate it), full (both in one archive), or platform_instance (the whole instance, with resource_type platform_instance)",
  }),
  frequency: CronExpression,
  s3_storage_id: BodyId.nullable().optional().meta({ description: "An S3 storage of the team; absent or null: backups stay on the server only" }),
  enabled: z.boolean().default(true),
  keep_locally: z.boolean().default(true).meta({ description: "Keep backup files on the resource's server; false (only with an S3 storage): removed once uploaded" }),
  number_of_backups_locally: LocalCount.default(7).meta({ description: "Newest backup files kept on the server while keep_locally" }),
  number_of_backups_remote: RemoteCount.nullable().optional(),
  stop_during_backup: StopDuringBackup.default(false),
});
export type CreateResourceBackupBody = z.output<typeof CreateResourceBackupBody>;

export const UpdateResourceBackupBody = requestBody({
  frequency: CronExpression.optional(),
  s3_storage_id: BodyId.nullable().optional(),
  enabled: z.boolean().optional(),
  keep_locally: z.boolean().optional(),
  number_of_backups_locally: LocalCount.optional(),
  number_of_backups_remote: RemoteCount.nullable().optional(),
  stop_during_backup: StopDuringBackup.optional(),
}).refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateResourceBackupBody = z.output<typeof UpdateResourceBackupBody>;

export const ResourceBackupQuery = z.object({
  resource_type: z
    .string()
    .max(64)
    .refine((v) => resourceKindOf(v) !== null && resourceKindOf(v) !== "platform_instance", "One of application, service, database.")
    .optional()
    .meta({ description: "application, service or database (the class-style strings are accepted too)" }),
  resource_id: IntId.optional(),
});
export type ResourceBackupQuery = z.output<typeof ResourceBackupQuery>;

export const ResourceBackupExecution = z
  .object({
    id: z.number().int(),
    status: BackupExecutionStatus,
    trigger: z.enum(["schedule", "manual"]),
    filename: z.string().nullable(),
    size: z.number().int().nullable().meta({ description: "Bytes of the stored archive (tar, gzip, and OpenPGP when is_encrypted)" }),
    is_encrypted: z.boolean(),
    s3_storage_id: z.number().int().nullable(),
    s3_key: z.string().nullable(),
    stored_locally: z.boolean(),
    reason: z.string().nullable().meta({ description: "Why the backup failed" }),
    restore_status: RestoreStatus.nullable(),
    restore_reason: z.string().nullable(),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
  })
  .meta({ id: "ResourceBackupExecution" });
export type ResourceBackupExecution = z.infer<typeof ResourceBackupExecution>;

export const ResourceBackup = z
  .object({
    id: z.number().int(),
    resource_type: z.string().meta({ description: "Class-style: App\\Models\\Application, App\\Models\\Service, App\\Models\\StandaloneDatabase, App\\Models\\InstanceSettings", example: "App\\Models\\Application" }),
    resource_id: z.number().int().nullable(),
    backup_type: z.enum(RESOURCE_BACKUP_TYPES),
    frequency: z.string(),
    s3_storage_id: z.number().int().nullable(),
    enabled: z.boolean(),
    keep_locally: z.boolean(),
    number_of_backups_locally: z.number().int(),
    number_of_backups_remote: z.number().int().nullable().meta({ description: "Newest archives kept in the S3 storage (null: all)" }),
    stop_during_backup: z.boolean().meta({ description: "Beyond the spec: the resource's containers are stopped during the backup and started again" }),
    next_run_at: Timestamp.nullable(),
    created_at: Timestamp,
  })
  .meta({ id: "ResourceBackup" });
export type ResourceBackup = z.infer<typeof ResourceBackup>;
export const ResourceBackupDetail = ResourceBackup.extend({ executions: z.array(ResourceBackupExecution).meta({ description: "The newest executions (up to 20), newest first" }) }).meta({
  id: "ResourceBackupDetail",
});
export const ResourceBackupList = listOf(ResourceBackup);
export const ResourceBackupMutation = z.object({ message: z.string(), data: ResourceBackup });
export const ResourceBackupParams = z.object({ id: resourceId("resource_backup", IntId) });
export const ResourceBackupQueued = z.object({ message: z.string(), execution_id: z.number().int() });

// ---- resource restores (issue 19, w7/restore) ----
export const ResourceBackupExecutionParams = z.object({
  id: resourceId("resource_backup", IntId),
  execution_id: resourceId("resource_backup_execution", IntId),
});
/**
 * POST /resource-backups/{id}/executions/{execution_id}/restore. target_uuid (w8/rbsources): a clone
 * into another resource of the same kind in the caller's team (manage permission on it), volumes
 * matched by storage name (docs/resource-backups.md, docs/decisions.md).
 */
export const RestoreResourceBackupBody = requestBody({
  passphrase: RestoreBackupBody.shape.passphrase,
  target_uuid: z
    .string()
    .max(64)
    .optional()
    .meta({
      description:
        "Restore into another resource of the same kind (a clone): the uuid of an application, service or database of the caller's team on which the caller has full access. Each volume of the backup goes into the target's storage of the same name (its own mount path); a target lacking one of them is a 422, one of another kind a 422, another team's a 404. Absent: the backup's own resource",
    }),
});
export type RestoreResourceBackupBody = z.output<typeof RestoreResourceBackupBody>;
export const ResourceRestoreQueued = z
  .object({ message: z.string(), execution_id: z.number().int(), restore_status: RestoreStatus })
  .meta({ id: "ResourceRestoreQueued" });
