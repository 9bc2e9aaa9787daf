import { createHash, randomBytes, randomUUID } from "node:crypto";
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { VolumeManifest, type S3Target } from "@capstan/shared";
import { decryptStream } from "../../agent/src/backup/crypto.js";
import { readTar } from "../../agent/src/backup/tar.js";
import { sh } from "./support/kit.js";
import { startVolumeAppKit, type VolumeAppKit } from "./support/volume-app.js";

/**
 * resource.backup (issue 19, volume backups of applications) on the real local engine and a
 * real S3-compatible server: an application container (busybox, labelled as the agent labels
 * an application's) with two named volumes; the handler runs in this process, as a host-process
 * agent would run it. The archive is read back from S3 (decrypted, gunzipped, untarred) and
 * compared with what the container holds (setup: support/volume-app.ts; restores:
 * resource-restore.test.ts).
 */
let kit: VolumeAppKit;
const job = () => kit.job();
const app = (uuid: string, script: string) => kit.app(uuid, script);
const payload = (uuid: string, opts?: Parameters<VolumeAppKit["payload"]>[1]) => kit.payload(uuid, opts);

/** The archive's files (path -> bytes) and its manifest. */
async function unpack(bytes: Buffer, passphrase: string | null): Promise<{ files: Map<string, Buffer>; types: Map<string, string>; manifest: VolumeManifest }> {
  const source = passphrase ? await decryptStream(Readable.from([bytes]), passphrase) : Readable.from([bytes]);
  const files = new Map<string, Buffer>();
  const types = new Map<string, string>();
  let manifest: VolumeManifest | null = null;
  for await (const e of readTar(source.pipe(createGunzip()))) {
    const chunks: Buffer[] = [];
    for await (const c of e.body) chunks.push(c);
    types.set(e.header.name, e.header.type);
    if (e.header.name === "manifest.json") manifest = VolumeManifest.parse(JSON.parse(Buffer.concat(chunks).toString()));
    else if (e.header.type === "0") files.set(e.header.name, Buffer.concat(chunks));
  }
  if (!manifest) throw new Error("no manifest");
  return { files, types, manifest };
}

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

beforeAll(async () => {
  kit = await startVolumeAppKit();
}, 120_000);

afterAll(async () => {
  await kit?.stop();
}, 120_000);

describe("resource.backup: volumes of an application", () => {
  it("streams both volumes, encrypted, to S3 and the server; the manifest matches every file; a stopped container is read too", async () => {
    const uuid = randomUUID();
    await app(
      uuid,
      "mkdir -p /srv/site/css /data/uploads/2026 && echo '<h1>hello</h1>' > /srv/site/index.html && echo 'body{}' > /srv/site/css/a.css" +
        " && head -c 3000000 /dev/urandom > /data/uploads/2026/big.bin && ln -s index.html /srv/site/home.html && touch /srv/site/.ready",
    );
    const passphrase = `pass-${randomBytes(8).toString("hex")}`;
    const p = payload(uuid, { passphrase });
    const ctx = job();
    const r = await kit.handlers["resource.backup"](p, ctx);
    expect(r).toEqual({
      filename: p.filename,
      size: expect.any(Number),
      is_encrypted: true,
      local_path: join(kit.stateDir, "backups", uuid, "schedule-1", p.filename),
      s3_key: `capstan/${uuid}/${p.filename}`,
      removed_local: [],
      removed_remote: [],
    });
    const object = await kit.s3.read(r.s3_key!);
    expect(object.length).toBe(r.size);
    expect(object.equals(await readFile(r.local_path!))).toBe(true);
    expect(ctx.lines.join("\n")).not.toContain(passphrase);

    const { files, types, manifest } = await unpack(object, passphrase);
    const big = await sh("docker", ["exec", `${uuid}-app`, "sha256sum", "/data/uploads/2026/big.bin"]);
    expect(manifest.resource).toEqual({ kind: "application", uuid });
    expect(manifest.volumes.map((v) => v.name)).toEqual(["site", "uploads"]);
    const byPath = new Map(manifest.files.map((f) => [f.path, f]));
    expect(files.get("volumes/site/index.html")?.toString()).toBe("<h1>hello</h1>\n");
    expect(files.get("volumes/site/css/a.css")?.toString()).toBe("body{}\n");
    expect(byPath.get("volumes/uploads/2026/big.bin")).toEqual({ path: "volumes/uploads/2026/big.bin", size: 3_000_000, sha256: big.split(" ")[0] });
    for (const [path, body] of files) expect(byPath.get(path)).toEqual({ path, size: body.length, sha256: sha(body) });
    expect(manifest.files.length).toBe(files.size);
    expect(types.get("volumes/site/home.html")).toBe("2");

    // Stopped: the engine's archive still reads the volumes (a backup never needs the app running).
    await sh("docker", ["stop", "-t", "1", `${uuid}-app`]);
    const plain = await kit.handlers["resource.backup"](payload(uuid, { s3: null }), job());
    expect(plain.is_encrypted).toBe(false);
    const again = await unpack(await readFile(plain.local_path!), null);
    expect(again.files.get("volumes/site/index.html")?.toString()).toBe("<h1>hello</h1>\n");
    expect(sha(again.files.get("volumes/uploads/2026/big.bin")!)).toBe(big.split(" ")[0]);
  });

  it("a failed upload fails the run with the storage's reason and leaves no file; no container fails with a reason", async () => {
    const uuid = randomUUID();
    await app(uuid, "echo x > /srv/site/f && touch /srv/site/.ready");
    const dead: S3Target = { ...kit.target, endpoint: "http://127.0.0.1:9" };
    await expect(kit.handlers["resource.backup"](payload(uuid, { s3: dead }), job())).rejects.toThrow(/ECONNREFUSED|connect|refused/i);
    expect(await readdir(join(kit.stateDir, "backups", uuid, "schedule-1"))).toEqual([]);
    await expect(kit.handlers["resource.backup"](payload(randomUUID()), job())).rejects.toThrow(/has no container on this server/);
  });
});
