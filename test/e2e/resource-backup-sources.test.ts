import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResourceBackupPayload, ResourceRestorePayload } from "@capstan/shared";
import { listS3 } from "@capstan/shared/s3";
import { sh } from "./support/kit.js";
import { startVolumeAppKit, type VolumeAppKit } from "./support/volume-app.js";

/**
 * Resource backups of services and standalone databases, a restore into another resource and
 * remote retention (issue 19, w8/rbsources), on the real local engine and a real S3-compatible
 * server, with the agent's own handlers (support/volume-app.ts). The payloads are the ones the
 * control plane writes (test/api/resource-backup-sources.test.ts checks them): a service's
 * volumes each name the component whose container mounts it; a database's is its data volume.
 */
let kit: VolumeAppKit;

beforeAll(async () => {
  kit = await startVolumeAppKit();
}, 120_000);

afterAll(async () => {
  await kit?.stop();
}, 120_000);

const labelArgs = () => Object.entries(kit.labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
/** A shell that fills its volume once (marker .ready), then idles and exits on SIGTERM. */
const idle = (fill: string, marker: string) => `{ test -f ${marker} || { ${fill} && touch ${marker}; }; } && trap 'exit 0' TERM; while true; do sleep 1; done`;

async function waitFor(container: string, marker: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if ((await sh("docker", ["exec", container, "sh", "-c", `test -f ${marker} && echo yes`]).catch(() => "")).trim() === "yes") return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${container} did not get ready`);
}

/** Every entry under `dir` of a container: type, size and sha256 of files, link targets (sorted). */
async function listing(container: string, dir: string): Promise<string> {
  const script =
    `cd / && find ${dir} | sort | while read -r f; do ` +
    'if [ -L "$f" ]; then echo "L $f -> $(readlink "$f")"; elif [ -d "$f" ]; then echo "D $f $(stat -c %a "$f")"; ' +
    'else echo "F $f $(stat -c %a "$f") $(stat -c %s "$f") $(sha256sum < "$f" | cut -d" " -f1)"; fi; done';
  return sh("docker", ["exec", container, "sh", "-c", script]);
}

const state = (container: string) => sh("docker", ["inspect", "-f", "{{.State.Status}}", container]).then((s) => s.trim());

function backupPayload(resource: ResourceBackupPayload["resource"], volumes: ResourceBackupPayload["volumes"], opts: { filename?: string; keepRemote?: number | null; prefix?: string } = {}): ResourceBackupPayload {
  const execution = randomUUID();
  return {
    resource,
    volumes,
    schedule_uuid: "schedule-1",
    execution_uuid: execution,
    filename: opts.filename ?? `volume-20260301T030000Z-${execution.slice(0, 8)}.tar.gz`,
    keep_locally: 3,
    s3: { target: kit.target, prefix: opts.prefix ?? `capstan/${resource.uuid}/schedule-1/`, keep_remote: opts.keepRemote ?? null },
    passphrase: null,
    stop_during_backup: false,
    backup_type: "volume",
    configuration: null,
  };
}

function restorePayload(resource: ResourceRestorePayload["resource"], volumes: ResourceRestorePayload["volumes"], key: string, passphrase: string | null = null): ResourceRestorePayload {
  return { resource, volumes, execution_uuid: randomUUID(), from: { local_path: null, s3: { target: kit.target, key } }, passphrase, backup_type: "volume", apply: null };
}

describe("a service's volumes: every component's, each through its own container", () => {
  it("backup -> wipe both components' volumes -> restore from S3: the same data in each, both containers running again", async () => {
    const svc = randomUUID();
    const web = randomUUID();
    const cache = randomUUID();
    // Both components mount their own volume at the same path: only the component tells them apart.
    for (const v of ["site", "cachedata"]) await sh("docker", ["volume", "create", ...labelArgs(), `${svc}-${v}`]);
    const component = async (name: string, uuid: string, volume: string, fill: string) =>
      sh("docker", [
        "run", "-d", "--name", `${svc}-${name}`, ...labelArgs(),
        "--label", "capstan.managed=true", "--label", `capstan.resource.uuid=${svc}`, "--label", "capstan.resource.type=service", "--label", `capstan.service.component=${uuid}`,
        "-v", `${svc}-${volume}:/data`, "capstan-test/busybox", "sh", "-c", idle(fill, "/data/.ready"),
      ]);
    await component("web", web, "site", "mkdir -p /data/css && echo '<h1>web</h1>' > /data/index.html && echo 'b{}' > /data/css/a.css && ln -s index.html /data/home.html");
    await component("cache", cache, "cachedata", "mkdir -p /data/appendonly && head -c 2000000 /dev/urandom > /data/appendonly/dump.bin && echo cached > /data/.hidden");
    await waitFor(`${svc}-web`, "/data/.ready");
    await waitFor(`${svc}-cache`, "/data/.ready");
    const before = { web: await listing(`${svc}-web`, "/data"), cache: await listing(`${svc}-cache`, "/data") };
    expect(before.cache).toContain("/data/appendonly/dump.bin");
    expect(before.web).not.toBe(before.cache);

    const resource = { kind: "service" as const, uuid: svc, name: "svc" };
    const volumes = [
      { name: "site", mount_path: "/data", component: web },
      { name: "cachedata", mount_path: "/data", component: cache },
    ];
    const backupCtx = kit.job();
    const backup = await kit.handlers["resource.backup"](backupPayload(resource, volumes), backupCtx);
    expect(backup.s3_key).toMatch(new RegExp(`^capstan/${svc}/schedule-1/volume-`));
    expect(backupCtx.lines.join("\n")).toMatch(/volume site \(\/data\): 3 file\(s\)\nvolume cachedata \(\/data\): 3 file\(s\)/);

    // Wipe both volumes (and leave something new behind).
    await sh("docker", ["exec", `${svc}-web`, "sh", "-c", "rm -rf /data/* /data/.ready && echo stray > /data/stray.txt"]);
    await sh("docker", ["exec", `${svc}-cache`, "sh", "-c", "rm -rf /data/appendonly /data/.hidden"]);

    const ctx = kit.job();
    const r = await kit.handlers["resource.restore"](restorePayload(resource, volumes, backup.s3_key!), ctx);
    expect(r.volumes).toEqual(["site", "cachedata"]);
    expect(ctx.lines.join("\n")).toMatch(new RegExp(`restore: stopping .*${svc}-(web|cache).*${svc}-(web|cache)`));
    expect(await state(`${svc}-web`)).toBe("running");
    expect(await state(`${svc}-cache`)).toBe("running");
    expect(await listing(`${svc}-web`, "/data")).toBe(before.web);
    expect(await listing(`${svc}-cache`, "/data")).toBe(before.cache);
  });
});

describe("a standalone database's data volume: a file-level copy", () => {
  it("backup (stop_during_backup) -> the data changed and removed -> restore: the database's files are back and it runs again", async () => {
    const db = randomUUID();
    const volume = `capstan-db-${db}`;
    const container = `capstan-db-${db.slice(0, 12)}`;
    await sh("docker", ["volume", "create", ...labelArgs(), volume]);
    // A database container as the agent labels one (db.deploy), its data volume at the engine's data directory.
    await sh("docker", [
      "run", "-d", "--name", container, ...labelArgs(),
      "--label", "capstan.managed=true", "--label", `capstan.resource.uuid=${db}`, "--label", "capstan.resource.type=database", "--label", "capstan.database.engine=redis",
      "-v", `${volume}:/data`, "capstan-test/busybox", "sh", "-c",
      idle("head -c 500000 /dev/urandom > /data/dump.rdb && mkdir -p /data/appendonlydir && echo 'SET k v' > /data/appendonlydir/appendonly.aof.1.incr.aof", "/data/.ready"),
    ]);
    await waitFor(container, "/data/.ready");
    const before = await listing(container, "/data");
    const resource = { kind: "database" as const, uuid: db, name: "orders" };
    const volumes = [{ name: "data", mount_path: "/data" }];
    const passphrase = `pass-${randomBytes(8).toString("hex")}`;
    const ctx = kit.job();
    const backup = await kit.handlers["resource.backup"]({ ...backupPayload(resource, volumes), passphrase, filename: `volume-20260301T030000Z-${db.slice(0, 8)}.tar.gz.gpg`, stop_during_backup: true }, ctx);
    expect(backup.is_encrypted).toBe(true);
    // stop_during_backup stopped the database for the copy and started it again.
    expect(ctx.lines.join("\n")).toMatch(/stop_during_backup: stopping/);
    expect(await state(container)).toBe("running");

    await sh("docker", ["exec", container, "sh", "-c", "rm -rf /data/appendonlydir && head -c 1000 /dev/urandom > /data/dump.rdb"]);
    expect(await listing(container, "/data")).not.toBe(before);
    const r = await kit.handlers["resource.restore"](restorePayload(resource, volumes, backup.s3_key!, passphrase), kit.job());
    expect(r).toMatchObject({ files: 3, volumes: ["data"] });
    expect(await state(container)).toBe("running");
    expect(await listing(container, "/data")).toBe(before);
  });
});

describe("target_uuid: a restore into another application (a clone)", () => {
  it("one application's backup restored into another: the clone has the source's files, the source is untouched", async () => {
    const source = randomUUID();
    const clone = randomUUID();
    await kit.app(source, "mkdir -p /srv/site/css /data/uploads/2026 && echo '<h1>source</h1>' > /srv/site/index.html && head -c 100000 /dev/urandom > /data/uploads/2026/a.bin && touch /srv/site/.ready");
    await kit.app(clone, "echo '<h1>clone</h1>' > /srv/site/index.html && echo mine > /data/uploads/own.txt && touch /srv/site/.ready");
    const tree = async (uuid: string) => `${await listing(`${uuid}-app`, "/srv/site")}${await listing(`${uuid}-app`, "/data/uploads")}`;
    const sourceBefore = await tree(source);
    const backup = await kit.handlers["resource.backup"](kit.payload(source), kit.job());

    // What the control plane sends for target_uuid: the clone as the resource, its own storages by name.
    const p = restorePayload({ kind: "application", uuid: clone, name: "clone" }, kit.payload(clone).volumes, backup.s3_key!);
    await kit.handlers["resource.restore"](p, kit.job());
    expect(await tree(clone)).toBe(sourceBefore);
    expect(await sh("docker", ["exec", `${clone}-app`, "cat", "/srv/site/index.html"])).toBe("<h1>source</h1>");
    expect(await tree(source)).toBe(sourceBefore);
    expect(await state(`${clone}-app`)).toBe("running");
  });
});

describe("remote retention (number_of_backups_remote)", () => {
  it("keeps the newest archives of the schedule's prefix in S3 and deletes the oldest after a successful upload; other prefixes are untouched", async () => {
    const uuid = randomUUID();
    await kit.app(uuid, "echo hi > /srv/site/index.html && touch /srv/site/.ready");
    const prefix = `capstan/${uuid}/schedule-r/`;
    const other = `capstan/${uuid}/schedule-other/`;
    const base = kit.payload(uuid);
    const run = (day: number, p = prefix) => {
      const execution = randomUUID();
      return kit.handlers["resource.backup"](
        { ...base, execution_uuid: execution, schedule_uuid: p === prefix ? "schedule-r" : "schedule-other", filename: `volume-2026030${day}T030000Z-${execution.slice(0, 8)}.tar.gz`, s3: { target: kit.target, prefix: p, keep_remote: 2 } },
        kit.job(),
      );
    };
    const first = await run(1);
    const neighbour = await run(1, other);
    const second = await run(2);
    expect(second.removed_remote).toEqual([]);
    const third = await run(3);
    expect(third.removed_remote).toEqual([first.s3_key]);
    const keys = (await listS3(kit.target, prefix)).map((o) => o.key).sort();
    expect(keys).toEqual([second.s3_key, third.s3_key].sort());
    // Another schedule's archive (its own prefix) is not counted and stays.
    expect((await listS3(kit.target, other)).map((o) => o.key)).toEqual([neighbour.s3_key]);
  });
});
