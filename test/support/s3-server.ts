import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import { createRequire } from "node:module";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Transform, type TransformCallback } from "node:stream";

/**
 * A real S3-compatible server for tests: s3rver (objects on disk in a private temp dir) behind a
 * small front that verifies AWS Signature V4 against this server's own access key / secret.
 * s3rver 3.x only checks that a V4 access key id exists and never checks the signature, so the
 * front does the check (header and presigned-query forms, a 15-minute clock window, the declared
 * payload SHA-256 when one is given) and rejects anonymous requests. It also decodes `aws-chunked`
 * bodies (newer AWS SDKs send them with trailing checksums), which s3rver would store verbatim.
 * Chunk signatures of STREAMING-AWS4-HMAC-SHA256-PAYLOAD are not verified (the SDK does not use it).
 * s3rver itself listens on a unix socket inside the 0700 temp dir, so only the front is reachable.
 */

const require = createRequire(import.meta.url);
// s3rver is CommonJS without type declarations: describe the part used here.
interface S3rverStore {
  listObjects(bucket: string, o: { prefix?: string; maxKeys?: number }): Promise<{ objects: { key: string; size: number }[] }>;
  getObject(bucket: string, key: string): Promise<{ content: NodeJS.ReadableStream | null } | null>;
}
interface S3rverApp {
  store: S3rverStore;
  logger?: { exceptions?: { unhandle(): void }; close(): void };
  configureBuckets(): Promise<unknown>;
  callback(): http.RequestListener;
}
type S3rverCtor = new (o: Record<string, unknown>) => S3rverApp;
const S3rver = require("s3rver") as S3rverCtor;
const AWSAccount = require("s3rver/lib/models/account.js") as {
  DUMMY_ACCOUNT: { createKeyPair(id: string, secret: string): void; revokeAccessKey(id: string): void };
};

export interface S3ServerOptions {
  /** Buckets created at start; the first is `bucket`. Default ["capstan-test"]. */
  buckets?: string[];
  /** Listen address: 127.0.0.1 (default) or 0.0.0.0 for agents in containers. */
  host?: string;
  /** Fixed port; default any free port. */
  port?: number;
  /** Host name/IP put into `endpoint`; default `host` (127.0.0.1 when listening on all addresses). */
  advertiseHost?: string;
  /** When set, requests signed for another region are refused (as AWS does). */
  region?: string;
}

export interface S3Server {
  /** http://<advertised host>:<port> */
  endpoint: string;
  port: number;
  accessKey: string;
  secretKey: string;
  bucket: string;
  buckets: string[];
  /** the private temp dir (object store + s3rver socket) */
  dir: string;
  /** The endpoint as seen from another address (e.g. a docker bridge gateway IP). */
  endpointFor(host: string): string;
  /** Objects under `prefix` in `bucket` (default the first bucket), sorted by key. */
  objects(prefix?: string, bucket?: string): Promise<{ key: string; size: number }[]>;
  read(key: string, bucket?: string): Promise<Buffer>;
  /** Requests the front refused (bad signature, unknown key, anonymous...). */
  rejected(): number;
  stop(): Promise<void>;
}

const EMPTY_SHA256 = createHash("sha256").update("").digest("hex");
const MAX_SKEW_MS = 15 * 60_000;

class S3Fault extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

function xmlEscape(s: string): string {
  return s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);
}

function sendFault(res: http.ServerResponse, f: S3Fault): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${f.code}</Code><Message>${xmlEscape(f.message)}</Message></Error>`;
  res.writeHead(f.status, { "content-type": "application/xml", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

/** RFC 3986 encoding as SigV4 wants it (encodeURIComponent leaves !'()* alone). */
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

function decodeComponent(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new S3Fault(400, "InvalidArgument", "malformed query string");
  }
}

function parseQuery(raw: string): [string, string][] {
  if (!raw) return [];
  return raw
    .split("&")
    .filter((p) => p.length > 0)
    .map((p) => {
      const i = p.indexOf("=");
      return i < 0 ? [decodeComponent(p), ""] : [decodeComponent(p.slice(0, i)), decodeComponent(p.slice(i + 1))];
    });
}

function canonicalQuery(pairs: [string, string][]): string {
  return pairs
    .map(([k, v]) => [rfc3986(k), rfc3986(v)] as const)
    .sort((a, b) => (a[0] === b[0] ? (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0) : a[0] < b[0] ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
}

function headerValue(req: http.IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  if (v === undefined) return undefined;
  return (Array.isArray(v) ? v.join(",") : v).trim().replace(/\s+/g, " ");
}

function hmac(key: Buffer | string, data: string): Buffer {
  return createHmac("sha256", key).update(data, "utf8").digest();
}

function amzDate(s: string | undefined): Date {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s ?? "");
  if (!m) throw new S3Fault(403, "AccessDenied", "missing or malformed X-Amz-Date");
  return new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
}

interface SigParts {
  credential: string;
  signedHeaders: string[];
  signature: string;
  date: string;
  payloadHash: string;
}

interface Verified {
  /** the declared payload hash (hex, UNSIGNED-PAYLOAD or STREAMING-...) */
  payloadHash: string;
}

/** Verify one request's SigV4 signature; throws S3Fault with an S3-style code when it is not valid. */
function verify(req: http.IncomingMessage, keys: { accessKey: string; secretKey: string; region?: string }): Verified {
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q < 0 ? url : url.slice(0, q);
  let query = parseQuery(q < 0 ? "" : url.slice(q + 1));
  const auth = req.headers.authorization;
  const presigned = query.some(([k]) => k === "X-Amz-Algorithm");
  let parts: SigParts;
  if (auth && presigned) throw new S3Fault(400, "InvalidArgument", "only one auth mechanism allowed");
  if (auth) {
    const m = /^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/.exec(auth.trim());
    if (!m) throw new S3Fault(400, "AuthorizationHeaderMalformed", "only AWS4-HMAC-SHA256 header signatures are accepted");
    const payloadHash = headerValue(req, "x-amz-content-sha256");
    if (!payloadHash) throw new S3Fault(400, "InvalidRequest", "missing x-amz-content-sha256");
    parts = {
      credential: m[1]!,
      signedHeaders: m[2]!.split(";"),
      signature: m[3]!,
      date: headerValue(req, "x-amz-date") ?? "",
      payloadHash,
    };
  } else if (presigned) {
    const get = (k: string): string => query.find(([n]) => n === k)?.[1] ?? "";
    if (get("X-Amz-Algorithm") !== "AWS4-HMAC-SHA256") throw new S3Fault(400, "AuthorizationQueryParametersError", "bad X-Amz-Algorithm");
    const expires = Number(get("X-Amz-Expires"));
    const issued = amzDate(get("X-Amz-Date"));
    if (!Number.isInteger(expires) || expires < 1 || expires > 604_800) {
      throw new S3Fault(400, "AuthorizationQueryParametersError", "bad X-Amz-Expires");
    }
    if (Date.now() > issued.getTime() + expires * 1000) throw new S3Fault(403, "AccessDenied", "Request has expired");
    parts = {
      credential: get("X-Amz-Credential"),
      signedHeaders: get("X-Amz-SignedHeaders").split(";"),
      signature: get("X-Amz-Signature"),
      date: get("X-Amz-Date"),
      payloadHash: "UNSIGNED-PAYLOAD",
    };
    query = query.filter(([k]) => k !== "X-Amz-Signature");
  } else {
    throw new S3Fault(403, "AccessDenied", "Access Denied (anonymous requests are refused)");
  }

  const [accessKey, scopeDate, region, service, terminator, ...rest] = parts.credential.split("/");
  if (!accessKey || !scopeDate || !region || service !== "s3" || terminator !== "aws4_request" || rest.length) {
    throw new S3Fault(400, "AuthorizationHeaderMalformed", "malformed credential scope");
  }
  if (accessKey !== keys.accessKey) {
    throw new S3Fault(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
  }
  if (keys.region && region !== keys.region) {
    throw new S3Fault(400, "AuthorizationHeaderMalformed", `the region '${region}' is wrong; expecting '${keys.region}'`);
  }
  const when = amzDate(parts.date);
  if (!presigned && Math.abs(Date.now() - when.getTime()) > MAX_SKEW_MS) {
    throw new S3Fault(403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large.");
  }
  if (parts.date.slice(0, 8) !== scopeDate) throw new S3Fault(400, "AuthorizationHeaderMalformed", "scope date differs from X-Amz-Date");
  if (!parts.signedHeaders.includes("host")) throw new S3Fault(400, "AuthorizationHeaderMalformed", "host must be signed");

  const canonicalHeaders = parts.signedHeaders
    .map((h) => {
      const v = headerValue(req, h);
      if (v === undefined) throw new S3Fault(403, "SignatureDoesNotMatch", `signed header ${h} is missing`);
      return `${h}:${v}\n`;
    })
    .join("");
  const canonicalRequest = [
    req.method ?? "GET",
    path,
    canonicalQuery(query),
    canonicalHeaders,
    parts.signedHeaders.join(";"),
    parts.payloadHash,
  ].join("\n");
  const scope = `${scopeDate}/${region}/s3/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", parts.date, scope, createHash("sha256").update(canonicalRequest).digest("hex")].join("\n");
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${keys.secretKey}`, scopeDate), region), "s3"), "aws4_request");
  const expected = hmac(signingKey, stringToSign);
  const given = Buffer.from(parts.signature, "hex");
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
    throw new S3Fault(
      403,
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
    );
  }
  return { payloadHash: parts.payloadHash };
}

/** Decodes an aws-chunked body (`<hex size>[;ext]\r\n<data>\r\n` ... `0\r\n<trailers>\r\n`). */
class AwsChunkedDecoder extends Transform {
  private buf: Buffer = Buffer.alloc(0);
  private remaining = -1; // bytes of the current chunk still to pass on; -1: expecting a size line
  private done = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    try {
      this.drain();
      cb();
    } catch (err) {
      cb(err as Error);
    }
  }

  override _flush(cb: TransformCallback): void {
    cb(this.done ? null : new Error("aws-chunked body ended early"));
  }

  private drain(): void {
    while (!this.done && this.buf.length) {
      if (this.remaining === -1) {
        const nl = this.buf.indexOf("\r\n");
        if (nl < 0) {
          if (this.buf.length > 4096) throw new Error("aws-chunked size line too long");
          return;
        }
        const size = parseInt(this.buf.subarray(0, nl).toString("latin1").split(";")[0]!, 16);
        if (!Number.isFinite(size) || size < 0) throw new Error("bad aws-chunked size line");
        this.buf = this.buf.subarray(nl + 2);
        if (size === 0) {
          // trailers (checksums) follow; they are not part of the object
          this.done = true;
          return;
        }
        this.remaining = size;
      } else if (this.remaining > 0) {
        const n = Math.min(this.remaining, this.buf.length);
        this.push(this.buf.subarray(0, n));
        this.buf = this.buf.subarray(n);
        this.remaining -= n;
      } else {
        if (this.buf.length < 2) return;
        this.buf = this.buf.subarray(2); // the CRLF after a chunk's data
        this.remaining = -1;
      }
    }
  }
}

/** Passes bytes through and fails at the end when their SHA-256 differs from the declared one. */
class Sha256Check extends Transform {
  private readonly hash = createHash("sha256");
  constructor(private readonly expected: string) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.hash.update(chunk);
    cb(null, chunk);
  }
  override _flush(cb: TransformCallback): void {
    const got = this.hash.digest("hex");
    cb(got === this.expected ? null : new S3Fault(400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed."));
  }
}

export async function startS3Server(opts: S3ServerOptions = {}): Promise<S3Server> {
  const buckets = opts.buckets?.length ? opts.buckets : ["capstan-test"];
  const host = opts.host ?? "127.0.0.1";
  const dir = await mkdtemp(join(tmpdir(), "capstan-s3-"));
  const accessKey = `CAPSTANTEST${randomBytes(6).toString("hex").toUpperCase()}`;
  const secretKey = randomBytes(24).toString("base64url");
  const socketPath = join(dir, "s3rver.sock");

  const app = new S3rver({
    silent: true,
    directory: join(dir, "data"),
    configureBuckets: buckets.map((name) => ({ name })),
    // Host names (not IPs) would be read as virtual-hosted buckets; tests use path style or IPs.
    vhostBuckets: true,
  });
  // s3rver refuses V4 requests whose key id it does not know; the front already checked the signature.
  AWSAccount.DUMMY_ACCOUNT.createKeyPair(accessKey, secretKey);
  await app.configureBuckets();
  const backend = http.createServer(app.callback());
  await new Promise<void>((resolve, reject) => {
    backend.once("error", reject);
    backend.listen(socketPath, () => resolve());
  });

  let rejectedCount = 0;
  const front = http.createServer((req, res) => {
    let v: Verified;
    try {
      v = verify(req, { accessKey, secretKey, region: opts.region });
    } catch (err) {
      rejectedCount += 1;
      req.resume();
      sendFault(res, err instanceof S3Fault ? err : new S3Fault(400, "InvalidRequest", String(err)));
      return;
    }
    const headers: http.OutgoingHttpHeaders = { ...req.headers };
    delete headers.expect; // this front already answered 100-continue
    let body: NodeJS.ReadableStream = req;
    const encodings = String(req.headers["content-encoding"] ?? "")
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    if (v.payloadHash.startsWith("STREAMING-") || encodings.includes("aws-chunked")) {
      const rest = encodings.filter((e) => e !== "aws-chunked");
      if (rest.length) headers["content-encoding"] = rest.join(",");
      else delete headers["content-encoding"];
      delete headers["x-amz-trailer"];
      const decoded = req.headers["x-amz-decoded-content-length"];
      delete headers["content-length"];
      if (typeof decoded === "string") headers["content-length"] = decoded;
      else headers["transfer-encoding"] = "chunked";
      body = req.pipe(new AwsChunkedDecoder());
    } else if (/^[0-9a-f]{64}$/.test(v.payloadHash) && v.payloadHash !== EMPTY_SHA256) {
      body = req.pipe(new Sha256Check(v.payloadHash));
    }
    const upstream = http.request({ socketPath, method: req.method, path: req.url, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    const fail = (err: unknown): void => {
      // Abort the upstream request before it completes so a corrupt body is never stored whole.
      upstream.destroy();
      sendFault(res, err instanceof S3Fault ? err : new S3Fault(400, "IncompleteBody", (err as Error).message));
    };
    upstream.on("error", (err) => {
      if (!res.headersSent) sendFault(res, new S3Fault(502, "InternalError", err.message));
      else res.destroy();
    });
    if (body !== req) (body as Transform).on("error", fail);
    req.on("error", fail);
    body.pipe(upstream);
  });
  await new Promise<void>((resolve, reject) => {
    front.once("error", reject);
    front.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (front.address() as AddressInfo).port;
  const endpointFor = (h: string): string => `http://${h.includes(":") ? `[${h}]` : h}:${port}`;
  const advertised = opts.advertiseHost ?? (host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host);

  const bucketOf = (b?: string): string => b ?? buckets[0]!;
  let stopped = false;
  return {
    endpoint: endpointFor(advertised),
    port,
    accessKey,
    secretKey,
    bucket: buckets[0]!,
    buckets,
    dir,
    endpointFor,
    rejected: () => rejectedCount,
    async objects(prefix = "", bucket) {
      const { objects } = await app.store.listObjects(bucketOf(bucket), { prefix, maxKeys: 100_000 });
      return objects.map((o) => ({ key: o.key, size: o.size })).sort((a, b) => (a.key < b.key ? -1 : 1));
    },
    async read(key, bucket) {
      const obj = await app.store.getObject(bucketOf(bucket), key);
      if (!obj?.content) throw new Error(`no object ${bucketOf(bucket)}/${key}`);
      const chunks: Buffer[] = [];
      for await (const c of obj.content as AsyncIterable<Buffer>) chunks.push(c);
      return Buffer.concat(chunks);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      front.closeAllConnections();
      backend.closeAllConnections();
      await new Promise((r) => front.close(r));
      await new Promise((r) => backend.close(r));
      app.logger?.exceptions?.unhandle();
      app.logger?.close();
      AWSAccount.DUMMY_ACCOUNT.revokeAccessKey(accessKey);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
