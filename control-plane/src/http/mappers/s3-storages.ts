import {
  S3Storage,
} from "@capstan/shared";
import type { SecretBox } from "../../crypto/secret-box.js";
import { maskAccessKey, type S3StorageRecord } from "../../services/s3-storages.js";
import { iso } from "../dto.js";

/** The secret key and the passphrase are never mapped; the access key only masked. */
export const s3StorageDto = (s: S3StorageRecord, box: SecretBox): S3Storage => ({
  id: s.id,
  uuid: s.uuid,
  name: s.name,
  description: s.description,
  endpoint: s.endpoint,
  region: s.region,
  bucket: s.bucket,
  path_prefix: s.pathPrefix,
  path_style: s.pathStyle,
  access_key: maskAccessKey(s.accessKey, box),
  has_secret_key: s.secretKey.length > 0,
  is_encrypted: s.encryptionPassphrase !== null,
  is_usable: s.isUsable,
  last_tested_at: s.lastTestedAt ? iso(s.lastTestedAt) : null,
  schedule_count: s._count.schedules,
  backup_count: s._count.executions,
  created_at: iso(s.createdAt),
  updated_at: iso(s.updatedAt),
});
