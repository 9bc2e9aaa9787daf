import { createHash, randomBytes } from "node:crypto";
import http from "node:http";
import net from "node:net";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type S3Server } from "../../../test/support/s3-server.js";
import type { S3Target } from "../protocol/backups.js";
import { deleteS3, downloadS3, listS3, PART_SIZE, S3_TIMEOUTS, s3Client, testS3, uploadS3 } from "./index.js";

let s3: S3Server;
let target: S3Target;

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-unit"] });
  target = {
    endpoint: s3.endpoint,
    region: "us-east-1",
    bucket: s3.bucket,
    path_style: true,
    access_key: s3.accessKey,
    secret_key: s3.secretKey,
    allow_private: true,
  };
});
afterAll(() => s3?.stop());

/** Random bytes produced chunk by chunk (never held whole), with their SHA-256 once read. */
function generated(total: number): { stream: Readable; sha256: () => string } {
  const hash = createHash("sha256");
  let sent = 0;
  const stream = new Readable({
    read() {
      if (sent >= total) return void this.push(null);
      const chunk = randomBytes(Math.min(1024 * 1024, total - sent));
      hash.update(chunk);
      sent += chunk.length;
      this.push(chunk);
    },
  });
  return { stream, sha256: () => hash.digest("hex") };
}

async function sha256Of(stream: Readable): Promise<{ sha: string; size: number }> {
  const hash = createHash("sha256");
  let size = 0;
  for await (const c of stream as AsyncIterable<Buffer>) {
    hash.update(c);
    size += c.length;
  }
  return { sha: hash.digest("hex"), size };
}

describe("S3 helpers against a real S3-compatible server", { timeout: 60_000 }, () => {
  it("testS3 succeeds and leaves no test object behind", async () => {
    expect(await testS3(target, "backups/")).toEqual({ ok: true });
    expect(await s3.objects("backups/")).toEqual([]);
  });

  it("uploads a stream larger than one part (multipart), downloads the same bytes, lists and deletes", async () => {
    const size = PART_SIZE + 3 * 1024 * 1024 + 17;
    const src = generated(size);
    const key = "db-1/big.sql.gz";
    expect(await uploadS3(target, key, src.stream)).toEqual({ size });
    expect(await s3.objects("db-1/")).toEqual([{ key, size }]);

    const small = "db-1/small.sql.gz";
    expect(await uploadS3(target, small, Readable.from([Buffer.from("hello")]))).toEqual({ size: 5 });

    const down = await sha256Of(await downloadS3(target, key));
    expect(down).toEqual({ sha: src.sha256(), size });

    const listed = await listS3(target, "db-1/");
    expect(listed.map((o) => [o.key, o.size]).sort()).toEqual([
      [key, size],
      [small, 5],
    ]);
    for (const o of listed) expect(o.lastModified.getTime()).toBeGreaterThan(Date.now() - 3_600_000);

    await deleteS3(target, [key, small, "db-1/never-existed"]);
    expect(await listS3(target, "db-1/")).toEqual([]);
    expect(await s3.objects("db-1/")).toEqual([]);
  });

  it("reports the server's own error for bad credentials and a missing bucket", async () => {
    const bad = await testS3({ ...target, secret_key: "wrong-secret" });
    expect(bad.ok).toBe(false);
    expect(!bad.ok && bad.error).toMatch(/SignatureDoesNotMatch/);
    const unknownKey = await testS3({ ...target, access_key: "NOSUCHKEY" });
    expect(!unknownKey.ok && unknownKey.error).toMatch(/InvalidAccessKeyId/);
    const noBucket = await testS3({ ...target, bucket: "no-such-bucket" });
    expect(!noBucket.ok && noBucket.error).toMatch(/NoSuchBucket|404/);
    await expect(uploadS3({ ...target, secret_key: "wrong-secret" }, "x/y", Readable.from([Buffer.from("z")]))).rejects.toThrow(/SignatureDoesNotMatch/);
    await expect(downloadS3(target, "x/absent")).rejects.toThrow(/NoSuchKey/);
    expect(await s3.objects("x/")).toEqual([]);
  });

  it("refuses a loopback endpoint, literal or by name, unless private endpoints are allowed; nothing reaches the server", async () => {
    const before = s3.rejected();
    const literal = await testS3({ ...target, allow_private: false });
    expect(literal.ok).toBe(false);
    expect(!literal.ok && literal.error).toMatch(/127\.0\.0\.1 is a loopback address; .* refused \(PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows them\)/);
    const byName = { ...target, endpoint: s3.endpoint.replace("127.0.0.1", "localhost"), allow_private: false };
    const named = await testS3(byName);
    expect(!named.ok && named.error).toMatch(/localhost resolves to .* loopback address/);
    await expect(uploadS3(byName, "refused/x", Readable.from([randomBytes(10)]))).rejects.toThrow(/loopback address/);
    await expect(listS3(byName, "")).rejects.toThrow(/loopback address/);
    expect(s3.rejected()).toBe(before);
    expect(await s3.objects("refused/")).toEqual([]);
  });

  it("takes private-network endpoints (self-hosted S3 servers) and refuses metadata ones without connecting", () => {
    // Building a client judges a literal endpoint; no request is sent.
    for (const endpoint of ["http://10.0.0.5:9000", "http://172.16.0.1:9000", "http://192.168.1.10", "http://[fd12:3456::1]:9000"]) {
      s3Client({ ...target, endpoint, allow_private: false }).close();
    }
    for (const endpoint of ["http://169.254.169.254", "http://[fe80::1]:9000", "http://0.0.0.0:9000"]) {
      expect(() => s3Client({ ...target, endpoint, allow_private: false }), endpoint).toThrow(/refused \(PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows them\)/);
    }
  });

  it("an aborted upload fails and leaves no object", async () => {
    const ac = new AbortController();
    const src = generated(PART_SIZE * 3);
    const done = uploadS3(target, "aborted/obj", src.stream, ac.signal);
    setTimeout(() => ac.abort(new Error("cancelled by test")), 50);
    await expect(done).rejects.toThrow(/cancelled/);
    expect(await s3.objects("aborted/")).toEqual([]);
  });
});

describe("S3 servers that stall", { timeout: 60_000 }, () => {
  const timeouts = { connectMs: 2000, idleMs: 500 };
  const sockets = new Set<net.Socket>();
  const servers: net.Server[] = [];
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((srv) => new Promise((r) => srv.close(r))));
  });
  const targetAt = (port: number): S3Target => ({ ...target, endpoint: `http://127.0.0.1:${port}` });
  async function listen(srv: net.Server): Promise<number> {
    servers.push(srv);
    srv.on("connection", (sock: net.Socket) => {
      sockets.add(sock);
      sock.on("close", () => sockets.delete(sock));
    });
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    return (srv.address() as net.AddressInfo).port;
  }

  it("bounds every request with a connection and an idle timeout by default", () => {
    expect(S3_TIMEOUTS.connectMs).toBeGreaterThan(0);
    expect(S3_TIMEOUTS.idleMs).toBeGreaterThan(0);
    const config = s3Client(target).client.config.requestHandler as unknown as { configProvider: Promise<{ connectionTimeout?: number; socketTimeout?: number }> };
    return expect(config.configProvider).resolves.toMatchObject({ connectionTimeout: S3_TIMEOUTS.connectMs, socketTimeout: S3_TIMEOUTS.idleMs });
  });

  it("an upload to a server that accepts and never answers fails with a timeout, in bounded time", async () => {
    // Reads what is sent (so the body is not what stalls) and never answers.
    const port = await listen(net.createServer((sock) => sock.resume()));
    const started = Date.now();
    const err = await uploadS3(targetAt(port), "stalled/obj", Readable.from([randomBytes(1024)]), undefined, timeouts).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/^S3 upload of stalled\/obj failed: TimeoutError: the request socket timed out after 500 ms of inactivity/);
    // Three attempts (maxAttempts) of at most the idle timeout each, and the SDK's backoff between them.
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it("a download whose body stops midway fails the stream with a timeout", async () => {
    const srv = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": "100000" });
      res.write(Buffer.alloc(1000));
      // ...and nothing more.
    });
    const port = await listen(srv);
    const started = Date.now();
    const body = await downloadS3(targetAt(port), "stalled/obj", undefined, timeouts);
    await expect(sha256Of(body)).rejects.toThrow(/timed out after 500 ms of inactivity/);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
