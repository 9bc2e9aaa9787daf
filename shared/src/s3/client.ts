import http from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import { S3Client } from "@aws-sdk/client-s3";
import type { S3Target } from "../protocol/backups.js";
import { assertHostAllowed, guardedLookup, ForbiddenEndpointError } from "../net/address-guard.js";

/**
 * What lifts the address check, named in refusals so an operator knows where to look. Without
 * it loopback, link-local and metadata addresses are refused; private networks stay reachable,
 * as for git endpoints: self-hosted S3 servers (MinIO, Ceph) often live there.
 */
export const ALLOW_PRIVATE_SETTING = "PLATFORM_ALLOW_PRIVATE_ENDPOINTS";

type ConnectCallback = (err: Error | null, stream: Duplex) => void;

/**
 * The `lookup` option covers names; a literal IP address never goes through a lookup, so the
 * agents also judge the connect target itself before opening the socket.
 */
function refuseLiteral(host: string | null | undefined): ForbiddenEndpointError | null {
  try {
    assertHostAllowed(host ?? "", ALLOW_PRIVATE_SETTING);
    return null;
  } catch (err) {
    return err as ForbiddenEndpointError;
  }
}

const lookup = guardedLookup(ALLOW_PRIVATE_SETTING);

class GuardedHttpAgent extends http.Agent {
  override createConnection(options: http.ClientRequestArgs, callback?: ConnectCallback): Duplex | null | undefined {
    const refused = refuseLiteral(options.host ?? options.hostname);
    if (refused) {
      callback?.(refused, undefined as never);
      return undefined;
    }
    return super.createConnection({ ...options, lookup: lookup as never }, callback);
  }
}

class GuardedHttpsAgent extends https.Agent {
  override createConnection(options: https.RequestOptions, callback?: ConnectCallback): Duplex | null | undefined {
    const refused = refuseLiteral(options.host ?? options.hostname);
    if (refused) {
      callback?.(refused, undefined as never);
      return undefined;
    }
    return super.createConnection({ ...options, lookup: lookup as never }, callback);
  }
}

/**
 * Bounds of every S3 request. `connectMs`: to open the TCP (and TLS) connection. `idleMs`: the
 * longest silence on an open connection, while sending or waiting for an answer or its body; a
 * stalled server fails the call instead of holding the job until its deadline. There is no
 * bound on a whole request: a large part on a slow link may take long while bytes still move.
 * Each attempt (maxAttempts) has its own bounds.
 */
export interface S3Timeouts {
  connectMs: number;
  idleMs: number;
}
export const S3_TIMEOUTS: S3Timeouts = { connectMs: 10_000, idleMs: 60_000 };

/** A client bound to one target; `close()` releases its sockets. */
export interface S3Handle {
  client: S3Client;
  bucket: string;
  close(): void;
}

/**
 * An S3 client for a user-chosen target. Checksums are only sent/validated where S3 requires them:
 * the SDK's default streaming trailer checksums are not understood by many S3-compatible servers.
 */
export function s3Client(t: S3Target, timeouts: S3Timeouts = S3_TIMEOUTS): S3Handle {
  const guarded = !t.allow_private;
  if (guarded) assertHostAllowed(new URL(t.endpoint).hostname, ALLOW_PRIVATE_SETTING);
  const agentOptions = { keepAlive: true, maxSockets: 8 };
  const httpAgent = guarded ? new GuardedHttpAgent(agentOptions) : new http.Agent(agentOptions);
  const httpsAgent = guarded ? new GuardedHttpsAgent(agentOptions) : new https.Agent(agentOptions);
  const client = new S3Client({
    endpoint: t.endpoint,
    region: t.region,
    forcePathStyle: t.path_style,
    credentials: { accessKeyId: t.access_key, secretAccessKey: t.secret_key },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    maxAttempts: 3,
    // requestTimeout would only log a warning (throwOnRequestTimeout is off by default), and
    // without socketTimeout nothing bounds a server that accepts and never answers.
    requestHandler: { httpAgent, httpsAgent, connectionTimeout: timeouts.connectMs, socketTimeout: timeouts.idleMs },
  });
  return {
    client,
    bucket: t.bucket,
    close() {
      client.destroy();
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

/** One line for a failed S3 call: the server's error code and message, or the network error. */
export function describeS3Error(err: unknown): string {
  if (err instanceof ForbiddenEndpointError) return err.message;
  const e = err as { name?: string; message?: string; Code?: string; $metadata?: { httpStatusCode?: number }; cause?: unknown };
  if (e?.cause instanceof ForbiddenEndpointError) return e.cause.message;
  if (e?.name === "TimeoutError" && e.message) {
    // "@smithy/node-http-handler - the request socket timed out after N ms of inactivity (configured by client requestHandler)."
    return `TimeoutError: ${e.message.replace(/^@smithy\/node-http-handler - /, "").replace(/ \((configured by client requestHandler|service default socket timeout)\)/, "")}`;
  }
  const status = e?.$metadata?.httpStatusCode;
  const code = e?.Code ?? e?.name ?? "Error";
  const message = e?.message && e.message !== "UnknownError" && e.message !== code ? e.message : null;
  const parts = [code];
  if (message) parts.push(message);
  if (status) parts.push(`(HTTP ${status})`);
  return parts.join(": ").replace(/: \(HTTP/, " (HTTP");
}
