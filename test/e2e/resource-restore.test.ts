import { randomBytes, randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResourceRestorePayload } from "@capstan/shared";
import { uploadS3 } from "@capstan/shared/s3";
import { sh } from "./support/kit.js";
import { startVolumeAppKit, type VolumeAppKit } from "./support/volume-app.js";

/**
 * resource.restore (issue 19, w7/restore) on the real local engine and a real S3-compatible
 * server, with the setup of resource-backups.test.ts (support/volume-app.ts): an application's
 * volumes are backed up, wiped (and changed), and restored: every file comes back
 * byte-identical, what was added since is gone, and the application runs again with its data.
 * A tampered encrypted archive and a truncated one fail with the reason before anything is
 * stopped, and leave the volumes as they were. (The 409 of a restore asked for during a
 * deployment is the control plane's: test/api/resource-backups.test.ts, "resource restores".)
 */
let kit: VolumeAppKit;

beforeAll(async () => {
  kit = await startVolumeAppKit();
}, 120_000);

afterAll(async () => {
  await kit?.stop();
}, 120_000);

const FILL =
  "mkdir -p /srv/site/css /data/uploads/2026/deep && echo '<h1>hello</h1>' > /srv/site/index.html && echo 'body{}' > /srv/site/css/a.css" +
  " && head -c 3000000 /dev/urandom > /data/uploads/2026/big.bin && echo secret > /data/uploads/.hidden && : > /data/uploads/2026/deep/empty" +
  " && ln -s index.html /srv/site/home.html && chmod 640 /srv/site/css/a.css && touch /srv/site/.ready";

/** Every entry of both volumes: type, mode, size and sha256 of each file, link targets (sorted). */
async function listing(uuid: string): Promise<string> {
  const script =
    "cd / && for d in /srv/site /data/uploads; do find $d | sort | while read -r f; do " +
    'if [ -L "$f" ]; then echo "L $f -> $(readlink "$f")"; elif [ -d "$f" ]; then echo "D $f $(stat -c %a "$f")"; ' +
    'else echo "F $f $(stat -c %a "$f") $(stat -c %s "$f") $(sha256sum < "$f" | cut -d" " -f1)"; fi; done; done';
  return sh("docker", ["exec", `${uuid}-app`, "sh", "-c", script]);
}

const startedAt = (uuid: string) => sh("docker", ["inspect", "-f", "{{.State.Status}} {{.State.StartedAt}}", `${uuid}-app`]);

function restorePayload(uuid: string, from: ResourceRestorePayload["from"], passphrase: string | null): ResourceRestorePayload {
  return {
    resource: { kind: "application", uuid, name: `app ${uuid.slice(0, 8)}` },
    volumes: [
      { name: "site", mount_path: "/srv/site" },
      { name: "uploads", mount_path: "/data/uploads" },
    ],
    execution_uuid: randomUUID(),
    from,
    passphrase,
    backup_type: "volume",
    apply: null,
  };
}

describe("resource.restore: volumes of an application", () => {
  it("backup (encrypted, S3 only) -> wipe and change the volumes -> restore from S3: every file back byte-identical, the app running with it", async () => {
    const uuid = randomUUID();
    await kit.app(uuid, FILL);
    const before = await listing(uuid);
    expect(before).toContain("/data/uploads/2026/big.bin");
    const passphrase = `pass-${randomBytes(8).toString("hex")}`;
    // keep_locally 0: the server's copy goes once uploaded, so the restore reads S3.
    const backup = await kit.handlers["resource.backup"](kit.payload(uuid, { passphrase, keepLocally: 0 }), kit.job());
    expect(backup.local_path).toBeNull();

    await sh("docker", ["exec", `${uuid}-app`, "sh", "-c", "rm -rf /srv/site/* /srv/site/.ready /data/uploads/2026 && echo new > /data/uploads/added.txt && echo changed > /data/uploads/.hidden"]);
    expect(await listing(uuid)).not.toBe(before);

    const ctx = kit.job();
    const r = await kit.handlers["resource.restore"](restorePayload(uuid, { local_path: null, s3: { target: kit.target, key: backup.s3_key! } }, passphrase), ctx);
    expect(r).toEqual({ files: 6, bytes: expect.any(Number), volumes: ["site", "uploads"], configuration: null });
    expect(r.bytes).toBeGreaterThan(3_000_000);
    expect(ctx.lines.join("\n")).not.toContain(passphrase);
    // The archive was checked before the application was stopped.
    const lines = ctx.lines.join("\n");
    expect(lines.indexOf("checked out against its manifest")).toBeGreaterThan(-1);
    expect(lines.indexOf("checked out against its manifest")).toBeLessThan(lines.indexOf("restore: stopping"));
    expect((await startedAt(uuid)).split(" ")[0]).toBe("running");
    expect(await listing(uuid)).toBe(before);
    expect(await sh("docker", ["exec", `${uuid}-app`, "cat", "/srv/site/index.html"])).toBe("<h1>hello</h1>");
    // No helper container is left behind.
    expect((await sh("docker", ["ps", "-aq", "--filter", `label=capstan.restore-helper`, "--filter", `label=capstan.test.run=${kit.run}`])).trim()).toBe("");
  });

  it("a tampered encrypted archive and a truncated one fail with the reason and leave the volumes and the app untouched", async () => {
    const uuid = randomUUID();
    await kit.app(uuid, FILL);
    const passphrase = `pass-${randomBytes(8).toString("hex")}`;
    const enc = await kit.handlers["resource.backup"](kit.payload(uuid, { passphrase }), kit.job());
    const plain = await kit.handlers["resource.backup"](kit.payload(uuid, { s3: null }), kit.job());
    // What the volumes hold now (changed since the backups): a failed restore must leave exactly this.
    await sh("docker", ["exec", `${uuid}-app`, "sh", "-c", "echo after > /data/uploads/after.txt && rm /srv/site/css/a.css"]);
    const now = await listing(uuid);
    const running = await startedAt(uuid);

    // One byte flipped in the middle of the encrypted archive, uploaded as another object.
    const bytes = Buffer.from(await kit.s3.read(enc.s3_key!));
    bytes[Math.floor(bytes.length / 2)]! ^= 0x40;
    const key = `capstan/${uuid}/tampered.tar.gz.gpg`;
    await uploadS3(kit.target, key, Readable.from([bytes]));
    const tampered = kit.handlers["resource.restore"](restorePayload(uuid, { local_path: null, s3: { target: kit.target, key } }, passphrase), kit.job());
    await expect(tampered).rejects.toThrow(/damaged|authenticat|tag|integrity|modification/i);
    expect(await listing(uuid)).toBe(now);
    expect(await startedAt(uuid)).toBe(running);

    // The plain archive cut at two thirds, on the server.
    const whole = await readFile(plain.local_path!);
    const cut = join(kit.stateDir, "backups", uuid, "schedule-1", "volume-20260301T040000Z-truncate.tar.gz");
    await writeFile(cut, whole.subarray(0, Math.floor((whole.length * 2) / 3)));
    const truncated = kit.handlers["resource.restore"](restorePayload(uuid, { local_path: cut, s3: null }, null), kit.job());
    await expect(truncated).rejects.toThrow(/truncated/i);
    expect(await listing(uuid)).toBe(now);
    expect(await startedAt(uuid)).toBe(running);

    // The whole plain archive still restores (the checks above are the archives', not the setup's).
    await kit.handlers["resource.restore"](restorePayload(uuid, { local_path: plain.local_path, s3: null }, null), kit.job());
    const restored = await listing(uuid);
    expect(restored).toContain("/srv/site/css/a.css");
    expect(restored).not.toContain("after.txt");
  });
});
