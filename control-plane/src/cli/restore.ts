import { createReadStream, existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import type { Readable } from "node:stream";
import { S3Target } from "@capstan/shared";
import { downloadS3 } from "@capstan/shared/s3";
import { loadConfig } from "../config.js";
import { restorePlatform } from "../services/backups/platform/restore.js";

/**
 * `capstan restore --from <file | s3://bucket/key> --data-dir <empty dir> [--passphrase-stdin]`
 * (issue 19, docs/resource-backups.md). Secrets never come from argv (ps, shell history): the
 * passphrase is CAPSTAN_RESTORE_PASSPHRASE or the first line of standard input
 * (--passphrase-stdin); S3 credentials are CAPSTAN_RESTORE_S3_ACCESS_KEY and
 * CAPSTAN_RESTORE_S3_SECRET_KEY, with CAPSTAN_RESTORE_S3_ENDPOINT, CAPSTAN_RESTORE_S3_REGION
 * (default us-east-1) and CAPSTAN_RESTORE_S3_PATH_STYLE (default true). The target database is
 * DATABASE_URL (a new, empty PostgreSQL database) or, unset, SQLite in the data directory.
 */
export interface RestoreOptions {
  from: string;
  dataDir: string;
  passphraseStdin: boolean;
  env: NodeJS.ProcessEnv;
  readLine(): Promise<string>;
  out(line: string): void;
}

export class RestoreUsageError extends Error {}

function s3Source(url: string, env: NodeJS.ProcessEnv, allowPrivate: boolean): { target: S3Target; key: string } {
  const m = /^s3:\/\/([^/]+)\/(.+)$/.exec(url);
  if (!m) throw new RestoreUsageError("--from s3://BUCKET/KEY");
  const parsed = S3Target.safeParse({
    endpoint: env.CAPSTAN_RESTORE_S3_ENDPOINT,
    region: env.CAPSTAN_RESTORE_S3_REGION || "us-east-1",
    bucket: m[1],
    path_style: (env.CAPSTAN_RESTORE_S3_PATH_STYLE ?? "true") !== "false",
    access_key: env.CAPSTAN_RESTORE_S3_ACCESS_KEY,
    secret_key: env.CAPSTAN_RESTORE_S3_SECRET_KEY,
    allow_private: allowPrivate,
  });
  if (!parsed.success) {
    throw new RestoreUsageError(
      "an s3:// source needs CAPSTAN_RESTORE_S3_ENDPOINT (http(s) URL), CAPSTAN_RESTORE_S3_ACCESS_KEY and CAPSTAN_RESTORE_S3_SECRET_KEY in the environment: " +
        parsed.error.issues.map((i) => i.path.join(".")).join(", "),
    );
  }
  return { target: parsed.data, key: m[2]! };
}

export async function restoreCommand(o: RestoreOptions): Promise<void> {
  const dataDir = resolve(o.dataDir);
  // The instance's own settings (DATABASE_URL, PLATFORM_ALLOW_PRIVATE_ENDPOINTS) with the new data directory.
  const config = loadConfig({ ...o.env, PLATFORM_DATA_DIR: dataDir });
  let open: () => Promise<Readable>;
  let archiveName: string;
  if (o.from.startsWith("s3://")) {
    const { target, key } = s3Source(o.from, o.env, config.allowPrivateEndpoints);
    open = () => downloadS3(target, key);
    archiveName = key.slice(key.lastIndexOf("/") + 1);
  } else {
    const file = resolve(o.from);
    if (!existsSync(file)) throw new RestoreUsageError(`--from: ${file} does not exist`);
    open = async () => createReadStream(file);
    archiveName = basename(file);
  }
  const passphrase = o.passphraseStdin ? await o.readLine() : o.env.CAPSTAN_RESTORE_PASSPHRASE || null;
  const r = await restorePlatform({ open, passphrase, archiveName, dataDir, database: config.database, progress: (line) => o.out(line) });
  o.out(`restored ${r.rows} rows of ${r.tables} tables (archive of ${r.header.created_at}, from ${r.header.source}) into ${dataDir}`);
  if (config.secretKey) o.out("note: PLATFORM_SECRET_KEY is set; unset it (the restored data directory holds the archive's key) or set it to that key before starting");
}
