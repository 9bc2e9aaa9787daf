import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import type { DbRestorePayload } from "@capstan/shared";
import { downloadS3 } from "@capstan/shared/s3";
import type { Engine } from "../docker/engine.js";
import { decryptStream, looksLikeGzip, looksLikeOpenPgp } from "./crypto.js";
import { DRIVERS } from "./engines/index.js";
import { BackupToolError } from "./exec.js";
import { backupsRoot, containedBackupFile, ensurePrivateDir } from "./paths.js";
import { runningDbContainer } from "./target.js";

export interface RestoreRunOptions {
  stateDir: string;
  pollMs: number;
}

interface Ctx {
  signal: AbortSignal;
  progress(line: string): void;
}

/** The first bytes of a stream, and the stream again from its start. */
async function peek(src: AsyncIterable<Buffer | Uint8Array>, n: number): Promise<{ head: Buffer; rest: Readable }> {
  const it = src[Symbol.asyncIterator]();
  const chunks: Buffer[] = [];
  let len = 0;
  let ended = false;
  while (len < n) {
    const r = await it.next();
    if (r.done) {
      ended = true;
      break;
    }
    const b = Buffer.from(r.value);
    chunks.push(b);
    len += b.length;
  }
  const head = Buffer.concat(chunks);
  const rest = Readable.from(
    (async function* () {
      if (head.length) yield head;
      if (ended) return;
      for (;;) {
        const r = await it.next();
        if (r.done) return;
        yield Buffer.from(r.value);
      }
    })(),
    { objectMode: false },
  );
  return { head, rest };
}

/** The backup's bytes: the local file when it is still on this server, else the S3 object. */
async function openSource(p: DbRestorePayload, stateDir: string, signal: AbortSignal, progress: (l: string) => void): Promise<Readable> {
  if (p.from.local_path) {
    const real = await containedBackupFile(stateDir, p.from.local_path);
    if (real) {
      progress(`restoring from ${real}`);
      return createReadStream(real);
    }
    progress(`${p.from.local_path} is no longer on this server`);
  }
  if (p.from.s3) {
    progress(`restoring from S3 object ${p.from.s3.key}`);
    return downloadS3(p.from.s3.target, p.from.s3.key, signal);
  }
  throw new BackupToolError("the backup file is neither on this server nor in S3");
}

/**
 * db.restore: backup file (local or S3) -> OpenPGP decrypt (when encrypted) -> gunzip -> the
 * engine's restore tool. Nothing reaches the database before the decryption key checked out
 * and the first bytes decompressed (a wrong passphrase or a file that is not a backup fails
 * first). Later damage fails the stream; the engines' drivers then make the tool fail (psql
 * rolls the whole restore back) rather than take a clean end of input.
 */
export async function runRestore(engine: Engine, p: DbRestorePayload, opts: RestoreRunOptions, ctx: Ctx): Promise<{ bytes: number }> {
  const { signal, progress } = ctx;
  const container = await runningDbContainer(engine, p.db.uuid, signal);
  const workDir = backupsRoot(opts.stateDir);
  await ensurePrivateDir(workDir);
  const source = await openSource(p, opts.stateDir, signal, progress);
  let stage: Readable;
  try {
    const { head, rest } = await peek(source, 2);
    if (looksLikeGzip(head)) stage = rest;
    else if (looksLikeOpenPgp(head)) {
      if (!p.passphrase) throw new BackupToolError("the backup is OpenPGP-encrypted and no passphrase was given");
      stage = await decryptStream(rest, p.passphrase);
    } else throw new BackupToolError("the file is not a Capstan backup (neither gzip nor OpenPGP)");
  } catch (err) {
    source.destroy();
    throw err;
  }
  const gunzip = createGunzip();
  stage.on("error", (err) => gunzip.destroy(err));
  stage.pipe(gunzip);
  let first: { head: Buffer; rest: Readable };
  try {
    first = await peek(gunzip, 1);
  } catch (err) {
    source.destroy();
    throw new BackupToolError(`the backup cannot be read: ${(err as Error).message}`);
  }

  const driver = DRIVERS[p.engine];
  let bytes = 0;
  let inputError: unknown = null;
  const input = Readable.from(
    (async function* () {
      try {
        for await (const chunk of first.rest as AsyncIterable<Buffer>) {
          bytes += chunk.length;
          yield chunk;
        }
      } catch (err) {
        inputError = err;
        // Make the tool fail instead of seeing a clean end of input.
        if (driver.abortInput) yield driver.abortInput;
        else throw err;
      }
    })(),
    { objectMode: false },
  );
  progress(`restoring into ${p.engine} database ${p.db.name}`);
  try {
    await driver.restore(
      { engine, container: container.id, name: container.name, kind: p.engine, credentials: p.credentials, signal, progress, workDir, pollMs: opts.pollMs },
      input,
    );
  } catch (err) {
    source.destroy();
    if (inputError) throw new BackupToolError(`reading the backup failed midway (${(inputError as Error).message}); the restore was stopped: ${(err as Error).message}`);
    throw err;
  }
  if (inputError) throw new BackupToolError(`reading the backup failed midway: ${(inputError as Error).message}`);
  progress(`restored ${bytes} bytes`);
  return { bytes };
}
