import { once } from "node:events";
import { PassThrough, Writable } from "node:stream";
import { finished } from "node:stream/promises";
import type { S3Target } from "../protocol/backups.js";
import { deleteS3, uploadS3 } from "./operations.js";

/** A stream that writes each chunk to both destinations, waiting for both to take it; ends both, and is done when both are. */
export function fanOut(a: Writable, b: Writable): Writable {
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

/**
 * An upload of the bytes a backup file gets, made while the file is written (one pass: the
 * slower of the two sets the pace). Started before the archive; `signal` stops the archive's
 * pipeline when the upload fails, and the upload when the caller's signal aborts. The backup
 * stores of the agent (backup/store.ts) and of the control plane's platform backups use it.
 */
export class UploadBeside {
  readonly signal: AbortSignal;
  /** The upload's end: the bytes the object got. */
  readonly sent: Promise<{ size: number }>;
  readonly #stop = new AbortController();
  readonly #body = new PassThrough();

  constructor(
    private readonly target: S3Target,
    readonly key: string,
    signal?: AbortSignal,
  ) {
    this.signal = signal ? AbortSignal.any([signal, this.#stop.signal]) : this.#stop.signal;
    this.sent = uploadS3(target, key, this.#body, this.signal);
    this.sent.catch((err: unknown) => this.#stop.abort(err));
  }

  /** The archive's last stage: each chunk to `file` and to the upload (to the upload alone without a file). */
  sink(file?: Writable): Writable {
    return file ? fanOut(file, this.#body) : this.#body;
  }

  /**
   * The archive's pipeline failed: stops the upload and gives the reason to report (the upload's
   * own failure when that is what stopped the archive).
   */
  async failed(err: unknown): Promise<unknown> {
    const uploadFailed = this.#stop.signal.aborted;
    if (!uploadFailed) this.#stop.abort(err);
    await this.sent.catch(() => undefined);
    return uploadFailed ? this.#stop.signal.reason : err;
  }

  /**
   * The backup failed after its bytes were written (a dump tool's exit code, a rename): the
   * upload is stopped, or its object removed when it already ended, so no object stays of a
   * failed backup. Returns the removal's failure, if any, for the caller to report.
   */
  async discard(reason: unknown): Promise<Error | null> {
    this.#stop.abort(reason);
    const stored = await this.sent.then(
      () => true,
      () => false,
    );
    if (!stored) return null;
    return deleteS3(this.target, [this.key]).then(
      () => null,
      (err: Error) => err,
    );
  }
}
