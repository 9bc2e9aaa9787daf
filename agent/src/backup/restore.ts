import { createReadStream } from "node:fs";
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import type { BackupLocation, DbRestorePayload } from "@capstan/shared";
import { downloadS3 } from "@capstan/shared/s3";
import type { Engine } from "../docker/engine.js";
import { decryptStream, looksLikeGzip, looksLikeOpenPgp } from "./crypto.js";
import { DRIVERS } from "./engines/index.js";
import { BackupToolError } from "./exec.js";
import { backupsRoot, containedBackupFile, ensurePrivateDir } from "./paths.js";
import { runningDbContainer } from "./target.js";

interface Ctx {
  signal: AbortSignal;
  progress(line: string): void;
}

/** The first bytes of a stream, and the stream again from its start. */
export async function peek(src: AsyncIterable<Buffer | Uint8Array>, n: number): Promise<{ head: Buffer; rest: Readable }> {
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

/** The backup's bytes: the local file when it is still on this server, else the S3 object (db.restore and resource.restore). */
export async function openSource(p: { from: BackupLocation }, stateDir: string, signal: AbortSignal, progress: (l: string) => void): Promise<Readable> {
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

/** After a cancel, how long the restore tool gets to take the abort input and exit before it is stopped. */
export const RESTORE_ABORT_GRACE_MS = 20_000;

export interface RestoreRunOptions {
  stateDir: string;
  pollMs: number;
  /** default RESTORE_ABORT_GRACE_MS */
  abortGraceMs?: number;
}

/** Reads what is left of `input`: its size, and whether any of it is not a zero byte. */
async function drain(input: Readable): Promise<{ bytes: number; nonZero: boolean }> {
  input.unpipe();
  let bytes = 0;
  let nonZero = false;
  for await (const chunk of input as AsyncIterable<Buffer>) {
    bytes += chunk.length;
    if (!nonZero && chunk.some((b) => b !== 0)) nonZero = true;
  }
  return { bytes, nonZero };
}

/**
 * db.restore: backup file (local or S3) -> OpenPGP decrypt (when encrypted) -> gunzip -> the
 * engine's restore tool. Nothing reaches the database before the decryption key checked out
 * and the first bytes decompressed (a wrong passphrase or a file that is not a backup fails
 * first). Later damage fails the stream; the engines' drivers then make the tool fail (psql
 * rolls the whole restore back) rather than take a clean end of input. Success needs the tool's
 * exit 0 and the backup read to its end: the gzip CRC and the last AEAD tag are only checked
 * there.
 *
 * A cancel (or the deadline) ends the tool's input with the driver's abort input, as a damaged
 * file does, and gives the tool `abortGraceMs` to exit; then it is stopped. The connection is
 * never just closed: that is a clean end of input, and psql would commit what it got.
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
  if (first.head.length === 0) {
    source.destroy();
    throw new BackupToolError("the backup is empty: it decompresses to 0 bytes, and no dump tool writes that");
  }
  if (signal.aborted) {
    source.destroy();
    gunzip.destroy();
    throw signal.reason;
  }

  const driver = DRIVERS[p.engine];
  let bytes = 0;
  let inputError: unknown = null;
  let inputComplete = false;
  const input = Readable.from(
    (async function* () {
      try {
        for await (const chunk of first.rest as AsyncIterable<Buffer>) {
          bytes += chunk.length;
          yield chunk;
        }
        inputComplete = true;
      } catch (err) {
        inputError = err;
        // Make the tool fail instead of seeing a clean end of input.
        if (driver.abortInput) yield driver.abortInput;
        else throw err;
      }
    })(),
    { objectMode: false },
  );

  // The tool's own signal: a cancel reaches it only through its input first (see above).
  const tool = new AbortController();
  let cancelled: unknown = null;
  let grace: NodeJS.Timeout | undefined;
  const graceMs = opts.abortGraceMs ?? RESTORE_ABORT_GRACE_MS;
  const onCancel = () => {
    cancelled = signal.reason ?? new Error("cancelled");
    if (!driver.abortInput) return tool.abort(cancelled);
    progress("restore cancelled: ending the restore tool's input with a failing statement");
    // The input above stops at its next chunk and appends the abort input.
    first.rest.destroy(new BackupToolError("the restore was cancelled"));
    source.destroy();
    gunzip.destroy();
    grace = setTimeout(() => {
      progress(`the restore tool did not exit within ${graceMs / 1000} s of the cancel: stopping it`);
      tool.abort(cancelled);
    }, graceMs);
  };
  signal.addEventListener("abort", onCancel, { once: true });

  progress(`restoring into ${p.engine} database ${p.db.name}`);
  try {
    await driver.restore(
      { engine, container: container.id, name: container.name, kind: p.engine, credentials: p.credentials, signal: tool.signal, progress, workDir, pollMs: opts.pollMs },
      input,
    );
  } catch (err) {
    source.destroy();
    if (cancelled) throw new BackupToolError(`the restore was cancelled (${(cancelled as Error).message ?? String(cancelled)}); the restore tool was stopped: ${(err as Error).message}`);
    if (inputError) throw new BackupToolError(`reading the backup failed midway (${(inputError as Error).message}); the restore was stopped: ${(err as Error).message}`);
    throw err;
  } finally {
    clearTimeout(grace);
    signal.removeEventListener("abort", onCancel);
  }
  if (cancelled) {
    source.destroy();
    throw new BackupToolError(
      `the restore was cancelled (${(cancelled as Error).message ?? String(cancelled)}), but the restore tool had ${inputComplete ? "read the whole backup and exited" : "exited"} successfully first`,
    );
  }
  if (inputError) throw new BackupToolError(`reading the backup failed midway: ${(inputError as Error).message}`);
  if (!inputComplete) {
    // The tool exited 0 before the end of its input: read the rest, so that the gzip CRC and
    // the last AEAD tag are checked, and so that a tool that stopped early is not a success.
    const left = await drain(input);
    if (inputError) throw new BackupToolError(`the backup is damaged at its end (${(inputError as Error).message}), after the restore tool had exited successfully`);
    // A tar archive (ClickHouse) may end in zero padding the tool has no need to read.
    if (left.nonZero) throw new BackupToolError(`the restore tool exited successfully before it read the whole backup (${left.bytes} bytes were left)`);
  }
  progress(`restored ${bytes} bytes`);
  return { bytes };
}
