import { z } from "zod";
import { multiline } from "../validation/text.js";
import { RelativeFolder } from "../validation/relative-path.js";
import { IntId, Timestamp, listOf, resourceId, requestBody } from "./common.js";

/**
 * S3 storages (/api/v1/s3-storages): team-level destinations of database backups. The integer
 * `id` is the `s3_storage_id` backup schedules name. Keys and the encryption passphrase are
 * write-only: no response carries them.
 */

/**
 * The service endpoint: an http(s) origin without credentials, path, query or fragment
 * (https://s3.eu-central-1.amazonaws.com, http://10.0.0.5:9000). Trailing slashes are dropped.
 * Whether the address may be a loopback/link-local/metadata one is decided by the control plane
 * (PLATFORM_ALLOW_PRIVATE_ENDPOINTS), not here.
 */
export const S3Endpoint = z
  .string()
  .trim()
  .max(2048)
  .superRefine((v, ctx) => {
    const fail = (message: string) => ctx.addIssue({ code: "custom", message, input: v });
    if (!URL.canParse(v)) return fail("Use an http(s) URL such as https://s3.eu-central-1.amazonaws.com.");
    const u = new URL(v);
    if (u.protocol !== "https:" && u.protocol !== "http:") return fail("The endpoint must use http or https.");
    if (u.username || u.password) return fail("Put the credentials in access_key and secret_key, never in the URL.");
    if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash || v.includes("?") || v.includes("#")) {
      return fail("The endpoint is an origin only: no path, query or fragment (use bucket and path_prefix).");
    }
  })
  .transform((v) => (URL.canParse(v) ? new URL(v).origin : v));

/** Region names: AWS style (eu-central-1) and what S3-compatible servers use (auto, garage, us-east-1). */
export const S3Region = z
  .string()
  .trim()
  .regex(/^[a-zA-Z0-9][a-zA-Z0-9_-]{0,63}$/, "Letters, digits, '-' and '_' only, at most 64 characters (e.g. us-east-1).");

/** General-purpose bucket naming rules of S3. */
export const S3Bucket = z
  .string()
  .trim()
  .min(3, "Bucket names have 3 to 63 characters.")
  .max(63, "Bucket names have 3 to 63 characters.")
  .regex(/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/, "Lowercase letters, digits, '.' and '-', starting and ending with a letter or digit.")
  .refine((v) => !v.includes(".."), "No two adjacent periods.")
  .refine((v) => !/^\d{1,3}(\.\d{1,3}){3}$/.test(v), "A bucket name must not look like an IP address.")
  .refine((v) => !v.startsWith("xn--") && !v.startsWith("sthree-"), "Names starting with xn-- or sthree- are reserved.")
  .refine((v) => !v.endsWith("-s3alias") && !v.endsWith("--ol-s3"), "Names ending with -s3alias or --ol-s3 are reserved.");

/** Object key prefix of every backup in the storage, normalised to end with '/' (backups/prod -> backups/prod/). */
export const S3PathPrefix = RelativeFolder.transform((v) => (v === "" ? "" : `${v}/`));

const AccessKey = z
  .string()
  .trim()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, "Printable characters without spaces.");
const SecretKey = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, "Printable characters without spaces.");
/** OpenPGP symmetric passphrase of the backups sent to this storage. */
export const BackupPassphrase = z
  .string()
  .min(12, "Use at least 12 characters.")
  .max(1024)
  .refine((v) => !/[\u0000-\u001f\u007f]/.test(v), "No control characters.");

const Name = z.string().trim().min(1).max(255);
const Description = multiline(z.string().trim().max(1024));

export const CreateS3StorageBody = requestBody({
  name: Name,
  description: Description.default(""),
  endpoint: S3Endpoint,
  region: S3Region.default("us-east-1"),
  bucket: S3Bucket,
  path_prefix: S3PathPrefix.default(""),
  path_style: z.boolean().default(true).meta({ description: "Path-style addressing (endpoint/bucket/key); false: virtual-hosted (bucket.endpoint/key)" }),
  access_key: AccessKey.meta({ description: "Stored encrypted; shown masked" }),
  secret_key: SecretKey.meta({ description: "Stored encrypted; never returned" }),
  encryption_passphrase: BackupPassphrase.optional().meta({
    description: "Backups sent to this storage are OpenPGP-encrypted (symmetric, AEAD) with it. Stored encrypted; never returned.",
  }),
});
export type CreateS3StorageBody = z.output<typeof CreateS3StorageBody>;

export const UpdateS3StorageBody = requestBody({
    name: Name.optional(),
    description: Description.optional(),
    endpoint: S3Endpoint.optional(),
    region: S3Region.optional(),
    bucket: S3Bucket.optional(),
    path_prefix: S3PathPrefix.optional(),
    path_style: z.boolean().optional(),
    access_key: AccessKey.optional(),
    secret_key: SecretKey.optional(),
    encryption_passphrase: BackupPassphrase.nullable().optional().meta({
      description: "null: later backups are not encrypted. Restoring older encrypted backups then needs the old passphrase in the restore request.",
    }),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateS3StorageBody = z.output<typeof UpdateS3StorageBody>;

export const S3Storage = z
  .object({
    id: z.number().int().meta({ description: "The s3_storage_id of backup schedules" }),
    uuid: z.string(),
    name: z.string(),
    description: z.string(),
    endpoint: z.string(),
    region: z.string(),
    bucket: z.string(),
    path_prefix: z.string(),
    path_style: z.boolean(),
    access_key: z.string().meta({ description: "Masked: only the last 4 characters of longer keys are shown" }),
    has_secret_key: z.boolean(),
    is_encrypted: z.boolean().meta({ description: "An encryption passphrase is set: backups sent here are encrypted" }),
    is_usable: z.boolean().meta({ description: "Result of the last connection test (false until tested; reset when the connection settings change)" }),
    last_tested_at: Timestamp.nullable(),
    schedule_count: z.number().int().meta({ description: "Backup schedules that send backups here" }),
    backup_count: z.number().int().meta({ description: "Backups whose object is in this storage (the storage cannot be deleted while there are any)" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "S3Storage" });
export type S3Storage = z.infer<typeof S3Storage>;

export const S3StorageList = listOf(S3Storage);
export const S3StorageParams = z.object({ id: resourceId("s3_storage", IntId) });
export const S3StorageMutation = z.object({ message: z.string(), data: S3Storage });

/** POST /s3-storages/{id}/test: always 200; `usable` says whether the connection works. */
export const S3StorageTestResult = z
  .object({
    message: z.string(),
    usable: z.boolean(),
    error: z.string().optional().meta({ description: "Short reason when usable is false" }),
  })
  .meta({ id: "S3StorageTestResult" });
export type S3StorageTestResult = z.infer<typeof S3StorageTestResult>;
