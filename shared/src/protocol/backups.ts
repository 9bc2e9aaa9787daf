import { z } from "zod";
import { DatabaseEngine, DbCredentials, DbRef } from "./databases.js";
import { CONFIGURATION_MAX_BYTES, ResourceJobBackupType, hasConfiguration, hasVolumes } from "./configuration.js";

/**
 * Where a backup goes in S3 (or any S3-compatible server). Keys travel only inside sealed job
 * payloads. `allow_private`: the instance allows endpoints on loopback / link-local / metadata
 * addresses (PLATFORM_ALLOW_PRIVATE_ENDPOINTS); otherwise the agent refuses to connect there
 * (private networks are always allowed).
 */
export const S3Target = z.object({
  endpoint: z.url({ protocol: /^https?$/ }),
  region: z.string().min(1).max(64),
  bucket: z.string().min(3).max(63),
  path_style: z.boolean(),
  access_key: z.string().min(1).max(256),
  secret_key: z.string().min(1).max(256),
  allow_private: z.boolean(),
});
export type S3Target = z.infer<typeof S3Target>;

/** Object key or file name segment: no traversal, no leading slash. */
const KeyPath = z
  .string()
  .min(1)
  .max(1024)
  .regex(/^[A-Za-z0-9._\/-]+$/)
  .refine((v) => !v.startsWith("/") && !v.split("/").some((s) => s === ".." || s === "."), "no traversal");
const FileName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,200}$/);

/**
 * db.backup: dump with the engine's own tool, streamed (gzip, then OpenPGP symmetric AEAD when a
 * passphrase is given) into `<backup dir>/<db uuid>/<schedule uuid>/<filename>` on the server,
 * upload to `s3.prefix + filename`, then keep the newest `keep_locally` files of this schedule on
 * the server (0: the file is removed after a successful upload) and, when keep_remote is set, the
 * newest keep_remote objects under the prefix.
 */
export const DbBackupPayload = z.object({
  db: DbRef,
  engine: DatabaseEngine,
  credentials: DbCredentials,
  schedule_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  execution_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  filename: FileName,
  keep_locally: z.number().int().min(0).max(1000),
  s3: z.object({ target: S3Target, prefix: KeyPath.or(z.literal("")), keep_remote: z.number().int().min(1).max(10_000).nullable() }).nullable(),
  passphrase: z.string().min(1).max(1024).nullable(),
});
export type DbBackupPayload = z.infer<typeof DbBackupPayload>;
export const DbBackupResult = z.object({
  filename: z.string(),
  /** bytes of the stored file */
  size: z.number().int().min(0),
  is_encrypted: z.boolean(),
  /** absolute path on the server while kept locally */
  local_path: z.string().nullable(),
  s3_key: z.string().nullable(),
  /** files / objects removed by retention (their executions lose local_path / s3_key) */
  removed_local: z.array(z.string()),
  removed_remote: z.array(z.string()),
});
export type DbBackupResult = z.infer<typeof DbBackupResult>;

/** Where the file to restore (or delete) is: on the server, in S3, or both (local is preferred). */
export const BackupLocation = z.object({
  local_path: z.string().max(4096).nullable(),
  s3: z.object({ target: S3Target, key: KeyPath }).nullable(),
});
export type BackupLocation = z.infer<typeof BackupLocation>;

export const DbRestorePayload = z.object({
  db: DbRef,
  engine: DatabaseEngine,
  credentials: DbCredentials,
  from: BackupLocation,
  /** the file is OpenPGP-encrypted with this passphrase */
  passphrase: z.string().min(1).max(1024).nullable(),
});
export type DbRestorePayload = z.infer<typeof DbRestorePayload>;
export const DbRestoreResult = z.object({ bytes: z.number().int().min(0) });

export const BackupDeletePayload = BackupLocation;
export const BackupDeleteResult = z.object({ local_removed: z.boolean(), remote_removed: z.boolean() });

// resource backups (issue 19)
/**
 * resource.backup (backup_type volume): the resource's named volumes, read through one of its
 * containers (the engine's archive of each mount path, running or stopped), re-packed into one
 * tar under `volumes/<storage name>/` with a `manifest.json` (every file's path, size and sha256)
 * as its last entry, gzip, OpenPGP AEAD when a passphrase is given; then stored and retained
 * exactly as db.backup (`<backup dir>/<resource uuid>/<schedule uuid>/<filename>`, S3, retention).
 */
export const ResourceBackupPayload = z.object({
  /** w8/rbsources: services (containers of every component) and standalone databases too */
  resource: z.object({ kind: z.enum(["application", "service", "database"]), uuid: z.string().regex(/^[a-z0-9-]{1,64}$/), name: z.string().max(255) }),
  volumes: z
    .array(
      z.object({
        /** the storage's name: the folder of its files in the archive */
        name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/),
        /** absolute path inside the container */
        mount_path: z.string().min(2).max(1024).regex(/^\/[^\0]*$/),
        /** w8/rbsources: a service's volume is read and written through its component's container (capstan.service.component) */
        component: z.string().regex(/^[a-z0-9-]{1,64}$/).optional(),
      }),
    )
    // configuration backups (w8/rbconfig) archive no volume: the refinement below says which types need them.
    .max(64),
  schedule_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  execution_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  filename: FileName,
  keep_locally: z.number().int().min(0).max(1000),
  s3: DbBackupPayload.shape.s3,
  passphrase: z.string().min(1).max(1024).nullable(),
  /** stop the resource's running containers for the archive and start them again (agent journal: backup/stop-journal.ts) */
  stop_during_backup: z.boolean().default(false),
  // ---- configuration and full backups (issue 19, w8/rbconfig) ----
  /** volume: the volumes; configuration: the configuration document only; full: both in one archive */
  backup_type: ResourceJobBackupType.default("volume"),
  /** the configuration document (protocol/configuration.ts) as the JSON text the archive holds */
  configuration: z.string().max(CONFIGURATION_MAX_BYTES).nullable().default(null),
}).superRefine((p, ctx) => {
  if (hasVolumes(p.backup_type) && p.volumes.length === 0) ctx.addIssue({ code: "custom", path: ["volumes"], message: `a ${p.backup_type} backup needs at least one volume` });
  if (hasConfiguration(p.backup_type) !== (p.configuration !== null)) ctx.addIssue({ code: "custom", path: ["configuration"], message: `a ${p.backup_type} backup ${hasConfiguration(p.backup_type) ? "needs" : "has no"} configuration document` });
  if (!hasVolumes(p.backup_type) && p.stop_during_backup) ctx.addIssue({ code: "custom", path: ["stop_during_backup"], message: "a configuration backup stops nothing" });
});
export type ResourceBackupPayload = z.infer<typeof ResourceBackupPayload>;
/** As db.backup's: the stored file and what retention removed. */
export const ResourceBackupResult = DbBackupResult;
export type ResourceBackupResult = z.infer<typeof ResourceBackupResult>;

/** One file of a volume archive's manifest (`manifest.json`, the archive's last entry). */
export const VolumeManifest = z.object({
  format: z.literal("capstan-volume-backup/1"),
  resource: z.object({ kind: z.string(), uuid: z.string() }),
  /** (w8/rbconfig) absent in volume archives written before configuration backups */
  backup_type: ResourceJobBackupType.optional(),
  volumes: z.array(z.object({ name: z.string(), mount_path: z.string() })),
  files: z.array(z.object({ path: z.string(), size: z.number().int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) })),
});
export type VolumeManifest = z.infer<typeof VolumeManifest>;

// ---- resource restores (issue 19, w7/restore) ----
/**
 * resource.restore (backup_type volume): one stored volume backup (local or S3) streamed back,
 * decrypted (OpenPGP AEAD) and gunzipped, its volume entries staged in a tar on the agent's disk
 * and checked against the archive's manifest (paths, sizes, sha256) before anything is touched;
 * then the resource's running containers are stopped (stop journal), each volume's contents are
 * replaced with the staged ones through a helper container, and the containers are started again.
 */
export const ResourceRestorePayload = z.object({
  resource: ResourceBackupPayload.shape.resource,
  /** the resource's storages now: every volume of the archive must be one of them */
  volumes: ResourceBackupPayload.shape.volumes,
  /** the execution restored (the stop journal's and staging file's key) */
  execution_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  from: BackupLocation,
  /** the file is OpenPGP-encrypted with this passphrase */
  passphrase: z.string().min(1).max(1024).nullable(),
  // ---- configuration and full restores (issue 19, w8/rbconfig) ----
  /**
   * the backup's type: volume restores volumes; configuration reads and checks the archive's
   * configuration document and hands it back (the control plane applies it; nothing is stopped);
   * full does both, the document checked before anything is stopped
   */
  backup_type: ResourceJobBackupType.default("volume"),
  /** read by the control plane's outcome, not by the agent: what the restore's caller may change (bind mounts the document adds) */
  apply: z.object({ may_add_bind_mounts: z.boolean() }).nullable().default(null),
});
export type ResourceRestorePayload = z.infer<typeof ResourceRestorePayload>;
export const ResourceRestoreResult = z.object({
  /** regular files restored (checked against the manifest) and their bytes */
  files: z.number().int().min(0),
  bytes: z.number().int().min(0),
  volumes: z.array(z.string()),
  /** (w8/rbconfig) configuration and full: the archive's configuration document, checked against its manifest */
  configuration: z.string().max(CONFIGURATION_MAX_BYTES).nullable().default(null),
});
export type ResourceRestoreResult = z.infer<typeof ResourceRestoreResult>;
