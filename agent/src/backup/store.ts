import { createWriteStream } from "node:fs";
import { once } from "node:events";
import { chmod, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough, Writable, type Readable } from "node:stream";
import { finished, pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { DbBackupPayload, DbBackupResult } from "@capstan/shared";
import { deleteS3, uploadS3 } from "@capstan/shared/s3";
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

/** A stream that writes each chunk to both destinations, waiting for both to take it; ends both, and is done when both are. */
function fanOut(a: Writable, b: Writable): Writable {
  const taken = (w: Writable, ok: boolean) => (ok ? undefined : once(w, "drain"));
  const out = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (a.destroyed || b.destroyed) return done(new Error("a destination of the backup stream closed"));
      Promise.all([taken(a, a.write(chunk)), taken(b, b.write(chunk))]).then(() => done(), done);
    },
    final(done) {
      a.end();
      b.end();
      Promise.all([finished(a), finished(b)]).then(() => done(), done);
    },
    // The error is this stream's to report (the pipeline does): the destinations just close.
    destroy(err, done) {
      a.destroy();
      b.destroy();
      done(err);
    },
  });
  // A destination's failure (a full disk, the upload gone) is the stream's failure.
  for (const w of [a, b]) w.on("error", (err) => out.destroy(err));
  return out;
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
  const upload: { sent: Promise<{ size: number }> | null } = { sent: null };
  const write: BackupWriter = async (source) => {
    const stages: ((s: AsyncIterable<Buffer>) => AsyncIterable<Uint8Array>)[] = passphrase ? [(s) => encryptStream(s, passphrase)] : [];
    const file = createWriteStream(tmp, { mode: 0o600, flags: "wx" });
    if (!spec.s3 || !key) {
      await pipeline(source, createGzip(), ...stages, file, { signal });
      return;
    }
    // The upload runs while the archive is written: each chunk goes to the file and to S3 at once
    // (the slower of the two sets the pace). A failed upload stops the archive, and the other way round.
    progress(`uploading to S3 as ${key} while the archive is written`);
    const body = new PassThrough();
    const stop = new AbortController();
    const both = AbortSignal.any([signal, stop.signal]);
    const sent = uploadS3(spec.s3.target, key, body, both);
    upload.sent = sent;
    sent.catch((err: unknown) => stop.abort(err));
    try {
      await pipeline(source, createGzip(), ...stages, fanOut(file, body), { signal: both });
    } catch (err) {
      // The upload's own failure stopped the archive: that is the reason. Otherwise the upload stops here.
      const uploadFailed = stop.signal.aborted;
      if (!uploadFailed) stop.abort(err);
      await sent.catch(() => undefined);
      throw uploadFailed ? stop.signal.reason : err;
    }
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
  if (spec.s3 && key) {
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
