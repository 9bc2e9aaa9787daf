import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JOBS, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { createImageApp, ok, placement, until } from "./support/applications.js";
import { createDatabase, resourceBackupResult, storageWorld, type StorageWorld } from "./support/backups.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { startS3Server, type S3Server } from "../support/s3-server.js";

/**
 * Resource backups of services and standalone databases, restores into another resource
 * (target_uuid) and remote retention (issue 19, w8/rbsources), through the real API on a real
 * database with a scripted agent; the real agent's archives and restores of these run in
 * test/e2e/resource-backup-sources.test.ts.
 */
let t: TestInstance;
let s3: S3Server;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const seen: string[] = [];
const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};

beforeAll(async () => {
  s3 = await startS3Server({ buckets: ["capstan-backups"] });
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  await s3?.stop();
  keys.cleanup();
});

const COMPOSE = `services:
  web:
    image: nginx:1.27
    volumes:
      - site:/srv/site
  cache:
    image: redis:7
    volumes:
      - cachedata:/data
      - site:/shared
      - /srv/host-config:/etc/config
volumes:
  site:
  cachedata:
`;

type World = StorageWorld;

const world = (opts: { agent?: boolean } = {}): Promise<World> => storageWorld(t, keys, s3, { agent: opts.agent, agents });

/** A custom compose service (web + cache, named volumes site and cachedata, a bind mount) with a storage `extra` on web. */
async function service(w: World, name = "svc") {
  const created = await ok(w.api.post("/services", { ...placement(w), docker_compose_raw: COMPOSE, name }), "service");
  await ok(w.api.post(`/services/${created.uuid}/storages`, { name: "extra", mount_path: "/extra", service_name: "web" }), "service storage");
  const d = await ok(w.api.get(`/services/${created.uuid}`), "service detail");
  const component = (n: string) => [...d.applications, ...d.databases].find((c: { name: string }) => c.name === n).uuid as string;
  return { uuid: created.uuid as string, id: d.id as number, web: component("web"), cache: component("cache") };
}

async function database(w: World, name = "orders") {
  const db = await createDatabase(w, name);
  const d = await ok(w.api.get(`/databases/${db.uuid}`), "database detail");
  return { uuid: db.uuid, id: d.id as number };
}

async function create(w: World, body: Record<string, unknown>) {
  const r = await track(w.api.post("/resource-backups", { backup_type: "volume", frequency: "0 3 * * *", s3_storage_id: w.storage.id, ...body }));
  if (r.status !== 201) throw new Error(`create: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.data as { id: number; [k: string]: unknown };
}

const detail = async (w: World, id: number) => (await ok(track(w.api.get(`/resource-backups/${id}`)), "detail")) as { executions: any[]; [k: string]: unknown };

const result = resourceBackupResult;

/** Runs the backup once: the agent's resource.backup job (returned) answered with `extra` in its result. */
async function runOnce(w: World, id: number, extra: (job: JobEnvelope) => Record<string, unknown> = () => ({})) {
  const queued = await track(w.api.post(`/resource-backups/${id}/execute`));
  expect(queued.status, JSON.stringify(queued.body)).toBe(200);
  const job = await w.agent!.nextJob(10_000);
  expect(job.type).toBe("resource.backup");
  await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: result(job, extra(job)) });
  await until(async () => (await detail(w, id)).executions.find((e) => e.id === queued.body.execution_id)?.status === "success");
  return { job, executionId: queued.body.execution_id as number, payload: JOBS["resource.backup"].payload.parse(job.payload) };
}

const restorePath = (id: number, executionId: number) => `/resource-backups/${id}/executions/${executionId}/restore`;

describe("services as sources", () => {
  it("a service's backup copies every component's named volumes (its storages too, bind mounts not), each through its component; class-style resource_type; list filters", async () => {
    const w = await world();
    const svc = await service(w);
    const s = await create(w, { resource_type: "service", resource_id: svc.id, number_of_backups_remote: 3 });
    expect(s).toMatchObject({ resource_type: "App\\Models\\Service", resource_id: svc.id, backup_type: "volume", number_of_backups_remote: 3 });
    expect((await track(w.api.get("/resource-backups?resource_type=service"))).body.data).toEqual([s]);
    expect((await track(w.api.get(`/resource-backups?resource_type=${encodeURIComponent("App\\Models\\Service")}&resource_id=${svc.id}`))).body.data).toEqual([s]);
    expect((await track(w.api.get("/resource-backups?resource_type=application"))).body.data).toEqual([]);
    expect((await track(w.api.get("/resource-backups?resource_type=database"))).body.data).toEqual([]);

    const { payload: p, executionId } = await runOnce(w, s.id);
    expect(p.resource).toEqual({ kind: "service", uuid: svc.uuid, name: "svc" });
    expect(p.volumes).toEqual([
      { name: "site", mount_path: "/srv/site", component: svc.web },
      { name: "extra", mount_path: "/extra", component: svc.web },
      { name: "cachedata", mount_path: "/data", component: svc.cache },
    ]);
    // The schedule's own key prefix, and its remote retention.
    expect(p.s3).toMatchObject({ prefix: `capstan/prod/${svc.uuid}/${p.schedule_uuid}/`, keep_remote: 3 });

    // The restore: into the service's own volumes, through the same components.
    const r = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const job = await w.agent!.nextJob(10_000);
    const rp = JOBS["resource.restore"].payload.parse(job.payload);
    expect(rp).toMatchObject({ resource: { kind: "service", uuid: svc.uuid }, volumes: p.volumes, passphrase: w.storage.passphrase });
    // While it runs, a backup of the service is refused.
    const during = await track(w.api.post(`/resource-backups/${s.id}/execute`));
    expect(during.status).toBe(409);
    expect(during.body.message).toMatch(/restore of this service is running/);
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { files: 3, bytes: 30, volumes: ["site", "extra", "cachedata"] } });
    await until(async () => (await detail(w, s.id)).executions[0]?.restore_status === "success");
  });

  it("a restore is refused with 409 while the service is being started or stopped", async () => {
    const w = await world();
    const svc = await service(w);
    const s = await create(w, { resource_type: "service", resource_id: svc.id });
    const { executionId } = await runOnce(w, s.id);
    // A stop the agent has not answered yet: its service.action job is open.
    const stopping = w.api.post(`/services/${svc.uuid}/stop`);
    const stopJob = await w.agent!.nextJob(10_000);
    expect(stopJob.type).toBe("service.action");
    const refused = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/being deployed, started or stopped/);
    await w.agent!.outcome({ id: stopJob.id, attempt: stopJob.attempt, ok: true, result: { components: [] } });
    await stopping;
    expect((await track(w.api.post(restorePath(s.id, executionId), {}))).status).toBe(202);
  });
});

describe("deleting a service cancels its resource backup and restore jobs", () => {
  it("a running backup and a running restore of the service end as cancelled; another service's backup runs on", async () => {
    const job = (id: string) => t.instance.database.prisma.job.findUniqueOrThrow({ where: { id } });
    const w = await world();
    const svc = await service(w);
    const restoring = await create(w, { resource_type: "service", resource_id: svc.id });
    const { executionId } = await runOnce(w, restoring.id);
    expect((await track(w.api.post(restorePath(restoring.id, executionId), {}))).status).toBe(202);
    const restore = await w.agent!.nextJob(10_000);
    expect(restore.type).toBe("resource.restore");

    const w2 = await world();
    const svc2 = await service(w2, "svc2");
    const backingUp = await create(w2, { resource_type: "service", resource_id: svc2.id });
    expect((await track(w2.api.post(`/resource-backups/${backingUp.id}/execute`))).status).toBe(200);
    const running = await w2.agent!.nextJob(10_000);
    expect(running.type).toBe("resource.backup");
    const bystander = await service(w2, "bystander");
    const other = await create(w2, { resource_type: "service", resource_id: bystander.id });
    expect((await track(w2.api.post(`/resource-backups/${other.id}/execute`))).status).toBe(200);
    const otherJob = await w2.agent!.nextJob(10_000);

    expect((await track(w.api.delete(`/services/${svc.uuid}`))).status).toBeLessThan(300);
    expect((await track(w2.api.delete(`/services/${svc2.uuid}`))).status).toBeLessThan(300);
    expect(await job(restore.id)).toMatchObject({ status: "cancelled", error: "the service was deleted" });
    expect(await job(running.id)).toMatchObject({ status: "cancelled", error: "the service was deleted" });
    expect((await job(otherJob.id)).status).not.toBe("cancelled");
    expect((await track(w.api.get(`/resource-backups/${restoring.id}`))).status).toBe(404);
    expect((await track(w2.api.get(`/resource-backups/${other.id}`))).status).toBe(200);
  });
});

describe("databases as sources", () => {
  it("a database's volume backup copies its data volume; its dump schedules (GET /databases/{uuid}/backups) neither list it nor change; resource_type is App\\Models\\StandaloneDatabase", async () => {
    const w = await world();
    const db = await database(w);
    const dump = (await ok(w.api.post(`/databases/${db.uuid}/backups`, { frequency: "0 2 * * *" }), "dump schedule")).data;
    const s = await create(w, { resource_type: "database", resource_id: db.id, stop_during_backup: true });
    expect(s).toMatchObject({ resource_type: "App\\Models\\StandaloneDatabase", resource_id: db.id });
    // The database backups API sees only its dump schedule.
    const dumps = await ok(w.api.get(`/databases/${db.uuid}/backups`), "dump schedules");
    expect(dumps.data.map((d: { uuid: string }) => d.uuid)).toEqual([dump.uuid]);
    expect((await track(w.api.get("/resource-backups?resource_type=database"))).body.data).toEqual([s]);
    expect((await track(w.api.get(`/resource-backups?resource_id=${db.id}`))).body.data.map((x: { id: number }) => x.id)).toContain(s.id);

    const { payload: p, executionId } = await runOnce(w, s.id);
    expect(p).toMatchObject({ resource: { kind: "database", uuid: db.uuid }, volumes: [{ name: "data", mount_path: "/var/lib/postgresql/data" }], stop_during_backup: true });
    // The dump schedule still runs as a dump (db.backup).
    const dumpRun = await track(w.api.post(`/databases/${db.uuid}/backups/${dump.uuid}/execute`));
    expect(dumpRun.status, JSON.stringify(dumpRun.body)).toBeLessThan(300);
    const dumpJob = await w.agent!.nextJob(10_000);
    expect(dumpJob.type).toBe("db.backup");
    // A volume restore waits for the dump to end (the database's runs share one lock and their clashes).
    const during = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(during.status).toBe(409);
    expect(during.body.message).toMatch(/backup of this database is running/);
    await w.agent!.outcome({ id: dumpJob.id, attempt: dumpJob.attempt, ok: false, error: "interrupted" });
    await until(async () => (await ok(w.api.get(`/databases/${db.uuid}/backups/${dump.uuid}/executions`), "dump runs")).data[0]?.status === "failed");

    const r = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const job = await w.agent!.nextJob(10_000);
    expect(JOBS["resource.restore"].payload.parse(job.payload)).toMatchObject({ resource: { kind: "database", uuid: db.uuid }, volumes: [{ name: "data", mount_path: "/var/lib/postgresql/data" }] });
    // A dump restore of the database waits for the volume restore.
    const dumpExec = (await ok(w.api.get(`/databases/${db.uuid}/backups/${dump.uuid}/executions`), "dump runs")).data[0];
    expect(dumpExec.status).toBe("failed");
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { files: 1, bytes: 10, volumes: ["data"] } });
    await until(async () => (await detail(w, s.id)).executions[0]?.restore_status === "success");
  });

  it("a database restore is refused with 409 while the database is being started or stopped", async () => {
    const w = await world();
    const db = await database(w);
    const s = await create(w, { resource_type: "database", resource_id: db.id });
    const { executionId } = await runOnce(w, s.id);
    const starting = w.api.post(`/databases/${db.uuid}/start`);
    const startJob = await w.agent!.nextJob(10_000);
    expect(startJob.type).toMatch(/^db\.(deploy|action)$/);
    const refused = await track(w.api.post(restorePath(s.id, executionId), {}));
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/being deployed, started or stopped/);
    await w.agent!.outcome({ id: startJob.id, attempt: startJob.attempt, ok: false, error: "no engine here" });
    await starting;
  });
});

describe("validation and permissions", () => {
  it("bad input and references outside the team: 422 / 404, nothing created", async () => {
    const w = await world({ agent: false });
    const other = await world({ agent: false });
    const svc = await service(w);
    const db = await database(w);
    const otherSvc = await service(other);
    const otherDb = await database(other);
    const app = await createImageApp(w);
    const appId = (await ok(w.api.get(`/applications/${app.uuid}`), "app")).id as number;
    const base = { backup_type: "volume", frequency: "0 3 * * *" };
    const before = await t.instance.database.prisma.backupSchedule.count();
    const cases: [Record<string, unknown>, number, string?][] = [
      [{ ...base, resource_type: "service", resource_id: otherSvc.id }, 404],
      [{ ...base, resource_type: "database", resource_id: otherDb.id }, 404],
      // An id of another kind is looked up as the kind named: another team's or no resource.
      [{ ...base, resource_type: "service", resource_id: 2_000_000_000 }, 404],
      [{ ...base, resource_type: "database", resource_id: 2_000_000_000 }, 404],
      [{ ...base, resource_type: "service" }, 422, "resource_id"],
      [{ ...base, resource_type: "database", resource_id: db.id, backup_type: "configuration", stop_during_backup: true }, 422, "stop_during_backup"],
      [{ ...base, resource_type: "service", resource_id: svc.id, number_of_backups_remote: 2 }, 422, "number_of_backups_remote"],
      [{ ...base, resource_type: "service", resource_id: svc.id, s3_storage_id: w.storage.id, number_of_backups_remote: 0 }, 422, "number_of_backups_remote"],
      [{ ...base, resource_type: "service", resource_id: svc.id, s3_storage_id: w.storage.id, number_of_backups_remote: "2" }, 422, "number_of_backups_remote"],
      [{ ...base, resource_type: "application", resource_id: appId, s3_storage_id: w.storage.id, number_of_backups_remote: 10_001 }, 422, "number_of_backups_remote"],
    ];
    for (const [body, status, field] of cases) {
      const r = await track(w.api.post("/resource-backups", body));
      expect(r.status, JSON.stringify([body, r.body])).toBe(status);
      if (field) expect(Object.keys(r.body.errors ?? {}), JSON.stringify(r.body)).toContain(field);
    }
    expect(await t.instance.database.prisma.backupSchedule.count()).toBe(before);

    // PUT: remote retention set and dropped with the storage.
    const s = await create(w, { resource_type: "service", resource_id: svc.id });
    expect((await track(w.api.put(`/resource-backups/${s.id}`, { number_of_backups_remote: 4 }))).body.data.number_of_backups_remote).toBe(4);
    expect((await track(w.api.put(`/resource-backups/${s.id}`, { s3_storage_id: null }))).body.data).toMatchObject({ s3_storage_id: null, number_of_backups_remote: null });
    const noStorage = await track(w.api.put(`/resource-backups/${s.id}`, { number_of_backups_remote: 4 }));
    expect(noStorage.status).toBe(422);
    expect(Object.keys(noStorage.body.errors)).toEqual(["number_of_backups_remote"]);
    // Another team sees none of it.
    expect((await track(other.api.get(`/resource-backups/${s.id}`))).status).toBe(404);
    expect((await track(other.api.get("/resource-backups?resource_type=service"))).body.data).toEqual([]);
  });

  it("members: view lists, deploy runs, full access creates and restores; a member without access to the environment gets 404", async () => {
    const w = await world();
    const svc = await service(w);
    const db = await database(w);
    const grant = async (level: string) => {
      const m = await t.newMember(w.team.teamId, "member");
      await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: m.userId, permission_level: level }), "grant");
      return t.api(m.token);
    };
    const viewer = await grant("view_only");
    const deployer = await grant("deploy");
    const full = await grant("full_access");
    const outsider = t.api((await t.newMember(w.team.teamId, "member")).token);
    for (const [kind, id] of [
      ["service", svc.id],
      ["database", db.id],
    ] as const) {
      const body = { resource_type: kind, resource_id: id, backup_type: "volume", frequency: "@daily", s3_storage_id: w.storage.id };
      expect((await track(outsider.post("/resource-backups", body))).status).toBe(404);
      expect((await track(viewer.post("/resource-backups", body))).status).toBe(403);
      expect((await track(deployer.post("/resource-backups", body))).status).toBe(403);
      const created = await track(full.post("/resource-backups", body));
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const s = created.body.data;
      expect((await track(viewer.get(`/resource-backups/${s.id}`))).status).toBe(200);
      expect((await track(outsider.get(`/resource-backups/${s.id}`))).status).toBe(404);
      expect((await track(outsider.get("/resource-backups"))).body.data).toEqual([]);
      expect((await track(viewer.post(`/resource-backups/${s.id}/execute`))).status).toBe(403);
      const { executionId } = await runOnce({ ...w, api: deployer }, s.id);
      expect((await track(deployer.post(restorePath(s.id, executionId), {}))).status).toBe(403);
      expect((await track(outsider.post(restorePath(s.id, executionId), {}))).status).toBe(404);
      const restored = await track(full.post(restorePath(s.id, executionId), {}));
      expect(restored.status, JSON.stringify(restored.body)).toBe(202);
      const job = await w.agent!.nextJob(10_000);
      await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { files: 0, bytes: 0, volumes: [] } });
      await until(async () => (await detail(w, s.id)).executions[0]?.restore_status === "success");
    }
  });
});

describe("target_uuid: a restore into another resource of the same kind", () => {
  it("clones an application's volumes into another application by storage name; other kinds 422, another team's 404, missing storages 422, the target needs manage", async () => {
    const w = await world();
    const other = await world({ agent: false });
    const storages = async (uuid: string, list: [string, string][]) => {
      for (const [name, mount_path] of list) await ok(w.api.post(`/applications/${uuid}/storages`, { name, mount_path }), "storage");
    };
    const source = await createImageApp(w);
    await storages(source.uuid, [
      ["site", "/usr/share/nginx/html"],
      ["uploads", "/srv/uploads"],
    ]);
    const sourceId = (await ok(w.api.get(`/applications/${source.uuid}`), "app")).id as number;
    // The clone mounts the same storages elsewhere, and has one more.
    const clone = await createImageApp(w, { name: "clone" });
    await storages(clone.uuid, [
      ["uploads", "/data/uploads"],
      ["site", "/var/www"],
      ["cache", "/cache"],
    ]);
    const lacking = await createImageApp(w, { name: "lacking" });
    await storages(lacking.uuid, [["site", "/var/www"]]);
    const svc = await service(w);
    const foreign = await createImageApp(other, { name: "foreign" });

    const s = await create(w, { resource_type: "application", resource_id: sourceId });
    const { executionId, payload: backup } = await runOnce(w, s.id);
    const path = restorePath(s.id, executionId);
    const refusals: [Record<string, unknown>, number, RegExp][] = [
      [{ target_uuid: svc.uuid }, 422, /This is a service; a backup of a application restores into a application only/],
      [{ target_uuid: lacking.uuid }, 422, /has no storage named uploads/],
      [{ target_uuid: foreign.uuid }, 404, /Application not found/],
      [{ target_uuid: randomUUID() }, 404, /Application not found/],
      [{ target_uuid: "x".repeat(65) }, 422, /target_uuid|64/],
    ];
    for (const [body, status, message] of refusals) {
      const r = await track(w.api.post(path, body));
      expect(r.status, JSON.stringify([body, r.body])).toBe(status);
      expect(JSON.stringify(r.body)).toMatch(message);
    }
    // A member with deploy on the clone's environment only (and full access on none) cannot clone into it.
    const m = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: m.userId, permission_level: "deploy" }), "grant");
    expect((await track(t.api(m.token).post(path, { target_uuid: clone.uuid }))).status).toBe(403);
    expect(await t.instance.database.prisma.job.count({ where: { type: "resource.restore", server: { uuid: w.server.uuid } } })).toBe(0);

    const r = await track(w.api.post(path, { target_uuid: clone.uuid }));
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const job = await w.agent!.nextJob(10_000);
    const p = JOBS["resource.restore"].payload.parse(job.payload);
    // The target's storages at their own mount paths; the source's file (same server) and its S3 copy.
    expect(p.resource).toMatchObject({ kind: "application", uuid: clone.uuid });
    expect(p.volumes).toEqual([
      { name: "uploads", mount_path: "/data/uploads" },
      { name: "site", mount_path: "/var/www" },
      { name: "cache", mount_path: "/cache" },
    ]);
    expect(p.from.s3?.key).toBe(`${backup.s3!.prefix}${backup.filename}`);
    // While the clone's restore runs: a backup of the clone and a second restore into it are refused.
    const cloneBackup = await create(w, { resource_type: "application", resource_id: (await ok(w.api.get(`/applications/${clone.uuid}`), "clone")).id });
    const busy = await track(w.api.post(`/resource-backups/${cloneBackup.id}/execute`));
    expect(busy.status).toBe(409);
    expect(busy.body.message).toMatch(/restore into this application is running/);
    await w.agent!.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { files: 2, bytes: 20, volumes: ["site", "uploads"] } });
    await until(async () => (await detail(w, s.id)).executions[0]?.restore_status === "success");
  });
});

describe("remote retention", () => {
  it("objects the agent's retention removed lose their s3_key on this schedule's executions only", async () => {
    const w = await world();
    const svc = await service(w);
    const a = await create(w, { resource_type: "service", resource_id: svc.id, number_of_backups_remote: 1 });
    const b = await create(w, { resource_type: "service", resource_id: svc.id, number_of_backups_remote: 1 });
    const first = await runOnce(w, a.id);
    const firstKey = `${first.payload.s3!.prefix}${first.payload.filename}`;
    const otherRun = await runOnce(w, b.id);
    await runOnce(w, a.id, () => ({ removed_remote: [firstKey] }));
    const runs = (await detail(w, a.id)).executions;
    expect(runs.find((e) => e.id === first.executionId)).toMatchObject({ s3_key: null });
    expect(runs[0].s3_key).toMatch(new RegExp(`^capstan/prod/${svc.uuid}/`));
    expect((await detail(w, b.id)).executions.find((e) => e.id === otherRun.executionId).s3_key).not.toBeNull();
  });
});

describe("secrets", () => {
  it("no response carried a storage secret or passphrase", () => {
    const all = seen.join("\n");
    expect(all).not.toContain(s3.secretKey);
    expect(all).not.toMatch(/backup-pass-[0-9a-f]{16}/);
  });
});
