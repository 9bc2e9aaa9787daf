import { createWriteStream } from "node:fs";
import { chmod, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { DbBackupPayload, DbBackupResult } from "@capstan/shared";
import { deleteS3, writeAndUpload } from "@capstan/shared/s3";
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
  // The object's key in the storage, with S3.
  const remote = spec.s3 ? { target: spec.s3.target, key: `${spec.s3.prefix}${spec.filename}` } : null;
  // Set by write() when it starts the upload (a holder: the closure assigns it).
  const upload: { sent: Promise<{ size: number }> | null } = { sent: null };
  const write: BackupWriter = async (source) => {
    const stages: ((s: AsyncIterable<Buffer>) => AsyncIterable<Uint8Array>)[] = passphrase ? [(s) => encryptStream(s, passphrase)] : [];
    const file = createWriteStream(tmp, { mode: 0o600, flags: "wx" });
    if (!remote) {
      await pipeline(source, createGzip(), ...stages, file, { signal });
      return;
    }
    // The upload runs while the archive is written (shared/src/s3/tee.ts).
    progress(`uploading to S3 as ${remote.key} while the archive is written`);
    const sent = writeAndUpload(remote.target, remote.key, file, signal, (sink, both) => pipeline(source, createGzip(), ...stages, sink, { signal: both }));
    upload.sent = sent;
    await sent;
  };
  try {
    await produce(write);
    await rename(tmp, finalPath);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
  progress("backup file written");

  let s3Key: string | null = null;
  let size: number;
  if (remote) {
    let sent: number;
    try {
      if (!upload.sent) throw new BackupToolError("the backup wrote no archive to upload");
      sent = (await upload.sent).size;
      // Measured once the object is stored: a file changed meanwhile (a second writer, a bad disk) is caught below.
      size = (await stat(finalPath)).size;
    } catch (err) {
      await unlink(finalPath).catch(() => undefined);
      throw err;
    }
    if (sent !== size) {
      // The file changed under the upload (or was cut short): neither copy is the backup.
      await deleteS3(remote.target, [remote.key]).catch((err: Error) => progress(`removing the object again failed: ${err.message}`));
      await unlink(finalPath).catch(() => undefined);
      throw new BackupToolError(`the upload of ${remote.key} sent ${sent} bytes, but the backup file has ${size}; the object and the file were removed`);
    }
    s3Key = remote.key;
    progress(`uploaded ${size} bytes`);
  } else {
    size = (await stat(finalPath)).size;
    progress(`the backup file has ${size} bytes`);
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
