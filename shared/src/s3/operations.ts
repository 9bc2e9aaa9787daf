import { randomBytes } from "node:crypto";
import { Readable, Transform } from "node:stream";
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  ListObjectsV2Command,
  PutObjectCommand,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import type { S3Target } from "../protocol/backups.js";
import { describeS3Error, S3_TIMEOUTS, s3Client, type S3Handle, type S3Timeouts } from "./client.js";

/**
 * Multipart sizing: at most QUEUE_SIZE parts in flight plus the one being filled, so an upload
 * holds about (QUEUE_SIZE + 1) * PART_SIZE bytes whatever the object's size. 16 MiB parts allow
 * objects up to ~160 GB within S3's 10,000-part limit.
 */
export const PART_SIZE = 16 * 1024 * 1024;
export const QUEUE_SIZE = 2;

/** Runs `fn` with a client for `t` and releases the client's sockets afterwards. */
async function withClient<T>(t: S3Target, fn: (h: S3Handle) => Promise<T>, timeouts: S3Timeouts = S3_TIMEOUTS): Promise<T> {
  const h = s3Client(t, timeouts);
  try {
    return await fn(h);
  } finally {
    h.close();
  }
}

/** An Error whose message is the server's (or the network's) own reason. */
export class S3Error extends Error {
  override name = "S3Error";
}

function wrap(action: string, err: unknown): S3Error {
  if (err instanceof S3Error) return err;
  return new S3Error(`S3 ${action} failed: ${describeS3Error(err)}`, { cause: err });
}

/**
 * Checks that the target works: the bucket answers (HeadBucket) and a small object can be written
 * and removed under `prefix`. A HEAD error carries no body, so on failure the server is asked once
 * more with a listing to learn its own error code (e.g. InvalidAccessKeyId).
 */
export async function testS3(t: S3Target, prefix = ""): Promise<{ ok: true } | { ok: false; error: string }> {
  let h: S3Handle;
  try {
    h = s3Client(t);
  } catch (err) {
    return { ok: false, error: describeS3Error(err) };
  }
  try {
    try {
      await h.client.send(new HeadBucketCommand({ Bucket: t.bucket }));
    } catch (headErr) {
      try {
        await h.client.send(new ListObjectsV2Command({ Bucket: t.bucket, MaxKeys: 1 }));
      } catch (listErr) {
        return { ok: false, error: `bucket ${t.bucket}: ${describeS3Error(listErr)}` };
      }
      return { ok: false, error: `bucket ${t.bucket}: ${describeS3Error(headErr)}` };
    }
    const key = `${prefix}.capstan-test-${randomBytes(8).toString("hex")}`;
    try {
      await h.client.send(new PutObjectCommand({ Bucket: t.bucket, Key: key, Body: "capstan connection test\n", ContentType: "text/plain" }));
    } catch (err) {
      return { ok: false, error: `writing ${key}: ${describeS3Error(err)}` };
    }
    try {
      await h.client.send(new DeleteObjectCommand({ Bucket: t.bucket, Key: key }));
    } catch (err) {
      return { ok: false, error: `deleting ${key}: ${describeS3Error(err)}` };
    }
    return { ok: true };
  } finally {
    h.close();
  }
}

/**
 * Streams `body` to `key` (multipart once it exceeds one part; a failed multipart upload is
 * aborted so no parts are left behind). Resolves with the number of bytes sent.
 */
export async function uploadS3(t: S3Target, key: string, body: Readable, signal?: AbortSignal, timeouts: S3Timeouts = S3_TIMEOUTS): Promise<{ size: number }> {
  let h: S3Handle;
  try {
    signal?.throwIfAborted();
    h = s3Client(t, timeouts);
  } catch (err) {
    // Never read: its own late errors (a file opened after this) must not go unhandled.
    body.on("error", () => undefined);
    body.destroy();
    throw wrap(`upload of ${key}`, err);
  }
  let size = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      size += chunk.length;
      cb(null, chunk);
    },
  });
  body.on("error", (err) => counter.destroy(err));
  body.pipe(counter);
  const abortController = new AbortController();
  const onAbort = () => abortController.abort(signal?.reason);
  signal?.addEventListener("abort", onAbort, { once: true });
  const upload = new Upload({
    client: h.client,
    params: { Bucket: t.bucket, Key: key, Body: counter, ContentType: "application/octet-stream" },
    partSize: PART_SIZE,
    queueSize: QUEUE_SIZE,
    leavePartsOnError: false,
    abortController,
  });
  try {
    await upload.done();
    return { size };
  } catch (err) {
    // Nothing reads the body any more: stop it, and let its late errors go nowhere.
    counter.on("error", () => undefined);
    body.destroy();
    counter.destroy();
    if (signal?.aborted) throw new S3Error(`S3 upload of ${key} cancelled`, { cause: err });
    throw wrap(`upload of ${key}`, err);
  } finally {
    signal?.removeEventListener("abort", onAbort);
    h.close();
  }
}

/** The object's bytes as a stream (the client's sockets are released when the stream ends or fails). */
export async function downloadS3(t: S3Target, key: string, signal?: AbortSignal, timeouts: S3Timeouts = S3_TIMEOUTS): Promise<Readable> {
  const h = s3Client(t, timeouts);
  try {
    const res = await h.client.send(new GetObjectCommand({ Bucket: t.bucket, Key: key }), signal ? { abortSignal: signal } : {});
    const body = res.Body;
    if (!(body instanceof Readable)) throw new S3Error(`S3 download of ${key} returned no stream`);
    body.once("close", () => h.close());
    return body;
  } catch (err) {
    h.close();
    throw wrap(`download of ${key}`, err);
  }
}

/** Removes objects (absent keys are fine); fails with the server's reason for any key it kept. */
export async function deleteS3(t: S3Target, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await withClient(t, async (h) => {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      let res;
      try {
        res = await h.client.send(new DeleteObjectsCommand({ Bucket: t.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
      } catch (err) {
        throw wrap(`delete of ${batch.length} object(s)`, err);
      }
      const failed = res.Errors ?? [];
      if (failed.length > 0) {
        const first = failed[0]!;
        throw new S3Error(`S3 delete failed for ${failed.length} object(s), e.g. ${first.Key}: ${first.Code ?? "Error"} ${first.Message ?? ""}`.trim());
      }
    }
  });
}

/** Every object under `prefix` (all pages). */
export async function listS3(t: S3Target, prefix: string): Promise<{ key: string; size: number; lastModified: Date }[]> {
  return withClient(t, async (h) => {
    const out: { key: string; size: number; lastModified: Date }[] = [];
    let token: string | undefined;
    // Bounded: 10,000 pages of 1,000 keys; a bucket beyond that is not one Capstan manages.
    for (let page = 0; page < 10_000; page++) {
      let res;
      try {
        res = await h.client.send(new ListObjectsV2Command({ Bucket: t.bucket, Prefix: prefix, ContinuationToken: token }));
      } catch (err) {
        throw wrap(`listing of ${prefix || "/"}`, err);
      }
      for (const o of res.Contents ?? []) {
        if (o.Key) out.push({ key: o.Key, size: o.Size ?? 0, lastModified: o.LastModified ?? new Date(0) });
      }
      if (!res.IsTruncated || !res.NextContinuationToken) return out;
      token = res.NextContinuationToken;
    }
    throw new S3Error(`S3 listing of ${prefix || "/"} has more than 10,000 pages`);
  });
}
