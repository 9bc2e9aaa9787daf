import { createHash, randomBytes } from "node:crypto";
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { S3Target } from "@capstan/shared";
import { startS3Server, type S3Server } from "../../../test/support/s3-server.js";
import { storeBackup, type StoreSpec } from "./store.js";
import { scheduleDir } from "./paths.js";

/**
 * The storing half of every backup against a real S3-compatible server: the archive is uploaded
 * while it is written (the object and the kept file are the same bytes), and a failed upload or a
 * failed source leaves neither a file nor an object.
 */
let s3: S3Server;
let target: S3Target;

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-store"] });
  target = { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true };
});
afterAll(() => s3?.stop());

/** Random bytes, chunk by chunk, `total` in all (their SHA-256 in `seen` as they are read); it throws at `failAt`. */
function randomSource(total: number, failAt?: number): { source: AsyncIterable<Buffer>; seen: ReturnType<typeof createHash> } {
  const seen = createHash("sha256");
  async function* source() {
    for (let sent = 0; sent < total; ) {
      if (failAt !== undefined && sent >= failAt) throw new Error("the source broke");
      const chunk = randomBytes(Math.min(1024 * 1024, total - sent));
      seen.update(chunk);
      sent += chunk.length;
      yield chunk;
    }
  }
  return { source: source(), seen };
}

/** A name of the shape the control plane gives backups (retention only touches those). */
const name = (n: number) => `volume-20261127T120000Z-run${n}.tar.gz`;

function spec(over: Partial<StoreSpec> = {}): StoreSpec {
  return {
    stateDir: mkdtempSync(join(tmpdir(), "capstan-store-")),
    ownerUuid: "owner-1",
    scheduleUuid: `schedule-${randomBytes(4).toString("hex")}`,
    filename: name(1),
    keepLocally: 1,
    s3: { target, prefix: "store/", keep_remote: null },
    passphrase: null,
    ...over,
  };
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

describe("storeBackup with S3", { timeout: 60_000 }, () => {
  it("uploads while it writes: the object is the kept file, byte for byte, larger than one part", async () => {
    const s = spec();
    const lines: string[] = [];
    const input = randomSource(12 * 1024 * 1024);
    const result = await storeBackup(s, { signal: new AbortController().signal, progress: (l) => lines.push(l) }, (write) => write(input.source));
    expect(result).toMatchObject({ s3_key: `store/${name(1)}`, is_encrypted: false, local_path: join(scheduleDir(s.stateDir, "owner-1", s.scheduleUuid), name(1)) });
    const file = readFileSync(result.local_path!);
    const object = await s3.read(`store/${name(1)}`);
    expect(object.length).toBe(file.length);
    expect(result.size).toBe(file.length);
    expect(sha(object)).toBe(sha(file));
    expect(sha(gunzipSync(file))).toBe(input.seen.digest("hex"));
    // The upload started before the file was whole.
    expect(lines.findIndex((l) => l.startsWith("uploading to S3"))).toBeLessThan(lines.findIndex((l) => l.startsWith("backup file written")));
  });

  it("keep_locally 0: the object stays, the file goes", async () => {
    const s = spec({ keepLocally: 0, filename: name(2) });
    const result = await storeBackup(s, { signal: new AbortController().signal, progress: () => undefined }, (write) => write(randomSource(300_000).source));
    expect(result.local_path).toBeNull();
    expect((await s3.read(`store/${name(2)}`)).length).toBe(result.size);
    expect(readdirSync(scheduleDir(s.stateDir, "owner-1", s.scheduleUuid))).toEqual([]);
  });

  it("a file changed before the upload ended: neither the object nor the file is kept", async () => {
    const s = spec({ filename: name(5) });
    const path = join(scheduleDir(s.stateDir, "owner-1", s.scheduleUuid), name(5));
    const progress = (line: string) => {
      if (line === "backup file written") appendFileSync(path, "a second writer");
    };
    await expect(storeBackup(s, { signal: new AbortController().signal, progress }, (write) => write(randomSource(2 * 1024 * 1024).source))).rejects.toThrow(
      /the upload of store\/volume-.* sent \d+ bytes, but the backup file has \d+; the object and the file were removed/,
    );
    expect(readdirSync(scheduleDir(s.stateDir, "owner-1", s.scheduleUuid))).toEqual([]);
    expect(await s3.objects(`store/${name(5)}`)).toEqual([]);
  });

  it("an upload that fails stops the archive: no file and no object, the storage's reason", async () => {
    const s = spec({ s3: { target: { ...target, bucket: "no-such-bucket" }, prefix: "store/", keep_remote: null }, filename: name(3) });
    await expect(storeBackup(s, { signal: new AbortController().signal, progress: () => undefined }, (write) => write(randomSource(8 * 1024 * 1024).source))).rejects.toThrow(/bucket/i);
    const dir = scheduleDir(s.stateDir, "owner-1", s.scheduleUuid);
    expect(existsSync(dir) ? readdirSync(dir) : []).toEqual([]);
  });

  it("a producer that fails after its bytes went up (a dump tool's exit code): no file and no object, the producer's reason", async () => {
    for (const [n, settle] of [
      [6, false],
      [7, true],
    ] as const) {
      const s = spec({ filename: name(n) });
      const produce = async (write: (source: AsyncIterable<Buffer>) => Promise<void>) => {
        await write(randomSource(200_000).source);
        // Both orders: failing while the upload may still be completing, and after it surely stored the object.
        if (settle) await vi.waitFor(async () => expect(await s3.objects(`store/${name(n)}`)).toHaveLength(1), { timeout: 10_000, interval: 50 });
        throw new Error("mysqldump exited 2");
      };
      await expect(storeBackup(s, { signal: new AbortController().signal, progress: () => undefined }, produce)).rejects.toThrow("mysqldump exited 2");
      expect(readdirSync(scheduleDir(s.stateDir, "owner-1", s.scheduleUuid))).toEqual([]);
      expect(await s3.objects(`store/${name(n)}`), `object ${n}`).toEqual([]);
    }
  });

  it("a source that fails midway: no file and no object, the source's reason", async () => {
    const s = spec({ filename: name(4) });
    await expect(storeBackup(s, { signal: new AbortController().signal, progress: () => undefined }, (write) => write(randomSource(8 * 1024 * 1024, 3 * 1024 * 1024).source))).rejects.toThrow("the source broke");
    expect(readdirSync(scheduleDir(s.stateDir, "owner-1", s.scheduleUuid))).toEqual([]);
    expect(await s3.objects(`store/${name(4)}`)).toEqual([]);
  });
});
