import { createReadStream, createWriteStream } from "node:fs";
import { chmod, rename, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";
import type { DbBackupPayload, DbBackupResult } from "@capstan/shared";
import { deleteS3, uploadS3 } from "@capstan/shared/s3";
import type { Engine } from "../docker/engine.js";
import { encryptStream } from "./crypto.js";
import { DRIVERS } from "./engines/index.js";
import { BackupToolError } from "./exec.js";
import { backupsRoot, ensurePrivateDir, partialPath, scheduleDir } from "./paths.js";
import { applyLocalRetention, applyRemoteRetention } from "./retention.js";
import { runningDbContainer } from "./target.js";

export interface BackupRunOptions {
  stateDir: string;
  pollMs: number;
}

interface Ctx {
  signal: AbortSignal;
  progress(line: string): void;
}

/**
 * db.backup: dump -> gzip -> (OpenPGP AEAD when a passphrase is given) -> a private file
 * (written under a temporary name, renamed when whole and the tool exited 0), -> S3 -> local
 * and remote retention. Every stage is a stream: memory stays flat whatever the size. A failed
 * run leaves nothing behind (its partial or finished file is removed) and fails with the tool's
 * or the storage's reason. Once the backup is stored, retention problems (local or remote) do
 * not fail the run: they are progress lines, and the result lists only what really went.
 */
export async function runBackup(engine: Engine, p: DbBackupPayload, opts: BackupRunOptions, ctx: Ctx): Promise<DbBackupResult> {
  const { signal, progress } = ctx;
  const container = await runningDbContainer(engine, p.db.uuid, signal);
  const dir = scheduleDir(opts.stateDir, p.db.uuid, p.schedule_uuid);
  await ensurePrivateDir(dir);
  await chmod(backupsRoot(opts.stateDir), 0o700);
  const finalPath = join(dir, p.filename);
  const tmp = partialPath(finalPath);
  const driver = DRIVERS[p.engine];
  const target = { engine, container: container.id, name: container.name, kind: p.engine, credentials: p.credentials, signal, progress, workDir: dir, pollMs: opts.pollMs };

  progress(`dumping ${p.engine} database ${p.db.name}${p.passphrase ? " (gzip, OpenPGP encrypted)" : " (gzip)"}`);
  const src = await driver.dump(target);
  try {
    const stages: ((s: AsyncIterable<Buffer>) => AsyncIterable<Uint8Array>)[] = p.passphrase ? [(s) => encryptStream(s, p.passphrase!)] : [];
    await pipeline(src.stream, createGzip(), ...stages, createWriteStream(tmp, { mode: 0o600, flags: "wx" }), { signal });
    await src.finished();
    await rename(tmp, finalPath);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    // When the output broke because the tool failed, the tool's reason is the one that helps.
    if (!(err instanceof BackupToolError)) {
      src.stream.destroy();
      await src.finished().catch((toolErr: unknown) => {
        if (toolErr instanceof BackupToolError) throw toolErr;
      });
    }
    throw err;
  }
  const { size } = await stat(finalPath);
  progress(`backup file written: ${size} bytes`);

  let s3Key: string | null = null;
  if (p.s3) {
    const key = `${p.s3.prefix}${p.filename}`;
    progress(`uploading to S3 as ${key}`);
    let sent: number;
    try {
      sent = (await uploadS3(p.s3.target, key, createReadStream(finalPath) as Readable, signal)).size;
    } catch (err) {
      await unlink(finalPath).catch(() => undefined);
      throw err;
    }
    if (sent !== size) {
      // The file changed under the upload (or was cut short): neither copy is the backup.
      await deleteS3(p.s3.target, [key]).catch((err: Error) => progress(`removing the object again failed: ${err.message}`));
      await unlink(finalPath).catch(() => undefined);
      throw new BackupToolError(`the upload of ${key} sent ${sent} bytes, but the backup file has ${size}; the object and the file were removed`);
    }
    s3Key = key;
    progress(`uploaded ${size} bytes`);
  }

  let local: { removed: string[]; currentRemoved: boolean } = { removed: [], currentRemoved: false };
  try {
    local = await applyLocalRetention(dir, p.keep_locally, finalPath, s3Key !== null, (path, err) =>
      progress(`local retention could not remove ${path} (the backup is stored; it is tried again next run): ${err.message}`),
    );
  } catch (err) {
    // As for remote retention: the backup itself is made and stored.
    progress(`local retention failed (the backup is stored): ${(err as Error).message}`);
  }
  if (local.removed.length) progress(`local retention removed ${local.removed.length} file(s)`);
  let removedRemote: string[] = [];
  if (p.s3 && s3Key && p.s3.keep_remote !== null) {
    try {
      removedRemote = await applyRemoteRetention(p.s3.target, p.s3.prefix, p.s3.keep_remote, s3Key);
      if (removedRemote.length) progress(`remote retention removed ${removedRemote.length} object(s)`);
    } catch (err) {
      // The backup itself is made and stored; older objects stay until the next run's retention.
      progress(`remote retention failed (the backup is stored): ${(err as Error).message}`);
    }
  }
  return {
    filename: p.filename,
    size,
    is_encrypted: p.passphrase !== null,
    local_path: local.currentRemoved ? null : finalPath,
    s3_key: s3Key,
    removed_local: local.removed,
    removed_remote: removedRemote,
  };
}
