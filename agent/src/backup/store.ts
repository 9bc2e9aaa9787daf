import { createWriteStream } from "node:fs";
import { chmod, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { DbBackupPayload, DbBackupResult } from "@capstan/shared";
import { deleteS3, UploadBeside } from "@capstan/shared/s3";
import { encryptStream } from "./crypto.js";
import { BackupToolError } from "./exec.js";
import { backupsRoot, ensurePrivateDir, partialPath, scheduleDir } from "./paths.js";
import { applyLocalRetention, applyRemoteRetention } from "./retention.js";

/** Where and how one backup is stored (the parts db.backup and resource.backup share). */
export interface StoreSpec {
  stateDir: string;
  /** the database's or resource's uuid: the first folder under `<state dir>/backups/` */
  ownerUuid: string;
  scheduleUuid: string;
  filename: string;
  keepLocally: number;
  s3: DbBackupPayload["s3"];
  passphrase: string | null;
}

export interface StoreCtx {
  signal: AbortSignal;
  progress(line: string): void;
}

/** Writes one source's bytes through gzip (and OpenPGP AEAD when there is a passphrase) into the backup file. */
export type BackupWriter = (source: Readable | AsyncIterable<Buffer | Uint8Array>) => Promise<void>;

/**
 * The storing half of every backup: `produce` writes its source through the writer it is given
 * (source -> gzip -> OpenPGP AEAD when a passphrase is given -> a private file written under a
 * temporary name, renamed when whole; with S3 the same bytes are uploaded as they are written),
 * then local and remote retention. Every stage is
 * a stream: memory stays flat whatever the size. A failed run leaves nothing behind (its partial
 * or finished file is removed) and fails with the producer's or the storage's reason. Once the
 * backup is stored, retention problems (local or remote) do not fail the run: they are progress
 * lines, and the result lists only what really went.
 */
export async function storeBackup(spec: StoreSpec, ctx: StoreCtx, produce: (write: BackupWriter) => Promise<void>): Promise<DbBackupResult> {
  const { signal, progress } = ctx;
  const dir = scheduleDir(spec.stateDir, spec.ownerUuid, spec.scheduleUuid);
  await ensurePrivateDir(dir);
  await chmod(backupsRoot(spec.stateDir), 0o700);
  const finalPath = join(dir, spec.filename);
  const tmp = partialPath(finalPath);
  const passphrase = spec.passphrase;
  const key = spec.s3 ? `${spec.s3.prefix}${spec.filename}` : null;
  // Set by write() when it starts the upload (a holder: the closure assigns it).
  const upload: { beside: UploadBeside | null } = { beside: null };
  const write: BackupWriter = async (source) => {
    const stages: ((s: AsyncIterable<Buffer>) => AsyncIterable<Uint8Array>)[] = passphrase ? [(s) => encryptStream(s, passphrase)] : [];
    const file = createWriteStream(tmp, { mode: 0o600, flags: "wx" });
    if (!spec.s3 || !key) {
      await pipeline(source, createGzip(), ...stages, file, { signal });
      return;
    }
    // The upload runs while the archive is written: each chunk goes to the file and to S3 at once.
    // A failed upload stops the archive, and the other way round.
    progress(`uploading to S3 as ${key} while the archive is written`);
    const beside = new UploadBeside(spec.s3.target, key, signal);
    upload.beside = beside;
    try {
      await pipeline(source, createGzip(), ...stages, beside.sink(file), { signal: beside.signal });
    } catch (err) {
      throw await beside.failed(err);
    }
  };
  try {
    await produce(write);
    await rename(tmp, finalPath);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    // The producer may fail after its bytes went up (the dump tool's exit code): no object stays.
    const left = await upload.beside?.discard(err);
    if (left) progress(`removing the object again failed: ${left.message}`);
    throw err;
  }
  progress("backup file written");

  let s3Key: string | null = null;
  let size: number;
  if (spec.s3 && key) {
    let sent: number;
    try {
      if (!upload.beside) throw new BackupToolError("the backup wrote no archive to upload");
      sent = (await upload.beside.sent).size;
      // Measured once the object is stored: a file changed meanwhile (a second writer, a bad disk) is caught below.
      size = (await stat(finalPath)).size;
    } catch (err) {
      await unlink(finalPath).catch(() => undefined);
      throw err;
    }
    if (sent !== size) {
      // The file changed under the upload (or was cut short): neither copy is the backup.
      await deleteS3(spec.s3.target, [key]).catch((err: Error) => progress(`removing the object again failed: ${err.message}`));
      await unlink(finalPath).catch(() => undefined);
      throw new BackupToolError(`the upload of ${key} sent ${sent} bytes, but the backup file has ${size}; the object and the file were removed`);
    }
    s3Key = key;
    progress(`uploaded ${size} bytes`);
  } else {
    size = (await stat(finalPath)).size;
    progress(`${size} bytes`);
  }

  let local: { removed: string[]; currentRemoved: boolean } = { removed: [], currentRemoved: false };
  try {
    local = await applyLocalRetention(dir, spec.keepLocally, finalPath, s3Key !== null, (path, err) =>
      progress(`local retention could not remove ${path} (the backup is stored; it is tried again next run): ${err.message}`),
    );
  } catch (err) {
    // As for remote retention: the backup itself is made and stored.
    progress(`local retention failed (the backup is stored): ${(err as Error).message}`);
  }
  if (local.removed.length) progress(`local retention removed ${local.removed.length} file(s)`);
  let removedRemote: string[] = [];
  if (spec.s3 && s3Key && spec.s3.keep_remote !== null) {
    try {
      removedRemote = await applyRemoteRetention(spec.s3.target, spec.s3.prefix, spec.s3.keep_remote, s3Key);
      if (removedRemote.length) progress(`remote retention removed ${removedRemote.length} object(s)`);
    } catch (err) {
      // The backup itself is made and stored; older objects stay until the next run's retention.
      progress(`remote retention failed (the backup is stored): ${(err as Error).message}`);
    }
  }
  return {
    filename: spec.filename,
    size,
    is_encrypted: passphrase !== null,
    local_path: local.currentRemoved ? null : finalPath,
    s3_key: s3Key,
    removed_local: local.removed,
    removed_remote: removedRemote,
  };
}
