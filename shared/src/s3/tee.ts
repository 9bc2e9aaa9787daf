import { once } from "node:events";
import { PassThrough, Writable } from "node:stream";
import { finished } from "node:stream/promises";
import { uploadS3 } from "./operations.js";
import type { S3Target } from "../protocol/backups.js";

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
    // The error is this stream's to report (the writer's pipeline does): the destinations just close.
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
 * Writes one stream into `file` and uploads the same bytes to S3 as `key` at once (the slower of
 * the two sets the pace; memory stays flat): `write` pipes its source into the sink it is given.
 * A failed upload stops the writing, and a failed write stops the upload; the error is the one
 * that came first. Resolves with the bytes the upload sent once both have ended.
 */
export async function writeAndUpload(
  target: S3Target,
  key: string,
  file: Writable,
  signal: AbortSignal | undefined,
  write: (sink: Writable, signal: AbortSignal) => Promise<void>,
): Promise<{ size: number }> {
  const body = new PassThrough();
  const stop = new AbortController();
  const both = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
  const sent = uploadS3(target, key, body, both);
  sent.catch((err: unknown) => stop.abort(err));
  try {
    await write(fanOut(file, body), both);
  } catch (err) {
    // The upload's own failure stopped the writing: that is the reason. Otherwise the upload stops here.
    const uploadFailed = stop.signal.aborted;
    if (!uploadFailed) stop.abort(err);
    await sent.catch(() => undefined);
    throw uploadFailed ? stop.signal.reason : err;
  }
  return sent;
}
