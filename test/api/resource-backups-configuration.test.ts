import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApplicationConfiguration, DatabaseConfiguration, JOBS, ServiceConfiguration, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { answerNext, connectedWorld, createImageApp, ok, placement, until, type AppWorld } from "./support/applications.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { createDb } from "./support/standalone-databases.js";

/**
 * Configuration and full resource backups (issue 19, w8/rbconfig) through the real API on a real
 * database, the agent scripted: the document a run sends (values sealed, never plain), and what
 * a restore's outcome does with the document the agent hands back: the application reset to it,
 * or (a document that cannot be applied) a failed restore with the reason and nothing changed.
 * The real agent's archive: agent/src/backup/configuration.test.ts; end to end:
 * test/e2e/resource-config-backups.test.ts.
 */
let t: TestInstance;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];

beforeAll(async () => {
  t = await startTestInstance({});
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

interface World {
  w: AppWorld;
  agent: ScriptedAgent;
  app: { uuid: string; id: number };
}

const SECRET = `very-secret-${randomBytes(6).toString("hex")}`;

async function world(): Promise<World> {
  const { w, agent } = await connectedWorld(t, keys, agents);
  agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: ["capstan"] } }));
  const app = await createImageApp(w, { name: "shop", fqdn: `https://shop-${randomBytes(3).toString("hex")}.example.com`, description: "the shop" });
  await ok(w.api.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "API_KEY", value: SECRET }, { key: "MODE", value: "live", is_build_time: true }] }), "envs");
  const id = (await ok(w.api.get(`/applications/${app.uuid}`), "detail")).id as number;
  return { w, agent, app: { uuid: app.uuid, id } };
}

async function backup(x: World, backupType: "configuration" | "full", extra: Record<string, unknown> = {}) {
  const r = await x.w.api.post("/resource-backups", { resource_type: "application", resource_id: x.app.id, backup_type: backupType, frequency: "0 3 * * *", ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body.data.id as number;
}

const executions = async (x: World, id: number) => (await ok(x.w.api.get(`/resource-backups/${id}`), "detail")).executions as Record<string, any>[];

/** Runs the backup; the scripted agent stores it. Answers the execution id and the job. */
async function run(x: World, id: number): Promise<{ executionId: number; job: JobEnvelope }> {
  const queued = await ok(x.w.api.post(`/resource-backups/${id}/execute`), "execute");
  const job = await x.agent.nextJob(10_000);
  const p = JOBS["resource.backup"].payload.parse(job.payload);
  await x.agent.outcome({
    id: job.id,
    attempt: job.attempt,
    ok: true,
    result: { filename: p.filename, size: 1234, is_encrypted: false, local_path: `/var/lib/capstan-agent/backups/${p.resource.uuid}/${p.schedule_uuid}/${p.filename}`, s3_key: null, removed_local: [], removed_remote: [] },
  });
  await until(async () => (await executions(x, id))[0]?.status === "success");
  return { executionId: queued.execution_id as number, job };
}

/** Asks for the restore; the scripted agent hands `configuration` back. Answers the execution once the restore ended. */
async function restore(x: World, id: number, executionId: number, configuration: string | null, volumes: string[] = []): Promise<Record<string, any>> {
  const r = await x.w.api.post(`/resource-backups/${id}/executions/${executionId}/restore`, {});
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  await answerNext(x.agent, "resource.restore", { result: { files: volumes.length, bytes: 0, volumes, configuration } });
  await until(async () => ["success", "failed"].includes((await executions(x, id)).find((e) => e.id === executionId)?.restore_status));
  return (await executions(x, id)).find((e) => e.id === executionId)!;
}

const envs = async (x: World) =>
  ((await ok(x.w.api.get(`/applications/${x.app.uuid}/envs`), "envs")).data as Record<string, unknown>[]).map(({ key, value, is_build_time, is_preview }) => ({ key, value, is_build_time, is_preview }));
const settings = async (x: World) => {
  const { status: _s, deployments: _d, updated_at: _u, envs: _e, storages: _st, ...rest } = await ok(x.w.api.get(`/applications/${x.app.uuid}`), "detail");
  return rest;
};

describe("configuration backups: the run", () => {
  it("sends the configuration document (settings, variables sealed, storages) and no volume; an application without storages backs up; stop_during_backup is refused", async () => {
    const x = await world();
    const id = await backup(x, "configuration");
    const { job } = await run(x, id);
    const p = JOBS["resource.backup"].payload.parse(job.payload);
    expect(p).toMatchObject({ backup_type: "configuration", volumes: [], stop_during_backup: false });
    expect(p.filename).toMatch(/^configuration-\d{8}T\d{6}Z-[0-9a-f]{8}\.tar\.gz$/);
    expect(p.configuration).not.toContain(SECRET);
    const doc = ApplicationConfiguration.parse(JSON.parse(p.configuration!));
    expect(doc.application).toMatchObject({ uuid: x.app.uuid, name: "shop", description: "the shop", source: "dockerimage", docker_registry_image_name: "nginx:1.27" });
    expect(doc.envs.map((e) => [e.key, e.is_build_time, e.value_sealed.startsWith("v1:")])).toEqual([
      ["API_KEY", false, true],
      ["MODE", true, true],
    ]);
    expect(doc.storages).toEqual([]);

    // stop_during_backup: nothing to stop in a configuration backup (create and PUT), while a full one takes it.
    const refused = await x.w.api.post("/resource-backups", { resource_type: "application", resource_id: x.app.id, backup_type: "configuration", frequency: "0 3 * * *", stop_during_backup: true });
    expect(refused.status).toBe(422);
    expect(Object.keys(refused.body.errors)).toEqual(["stop_during_backup"]);
    const put = await x.w.api.put(`/resource-backups/${id}`, { stop_during_backup: true });
    expect(put.status).toBe(422);
    expect(Object.keys(put.body.errors)).toEqual(["stop_during_backup"]);

    // full: the volumes too, so an application without storages is refused with the reason.
    const full = await backup(x, "full", { stop_during_backup: true });
    const noVolumes = await x.w.api.post(`/resource-backups/${full}/execute`);
    expect(noVolumes.status).toBe(409);
    expect(noVolumes.body.message).toMatch(/no persistent storages/);
    await ok(x.w.api.post(`/applications/${x.app.uuid}/storages`, { name: "data", mount_path: "/data" }), "storage");
    const { job: fullJob } = await run(x, full);
    const fp = JOBS["resource.backup"].payload.parse(fullJob.payload);
    expect(fp).toMatchObject({ backup_type: "full", volumes: [{ name: "data", mount_path: "/data" }], stop_during_backup: true });
    expect(fp.filename).toMatch(/^full-/);
    expect(ApplicationConfiguration.parse(JSON.parse(fp.configuration!)).storages).toMatchObject([{ name: "data", mount_path: "/data", host_path: null }]);
  });
});

describe("configuration restores: the outcome applies the document", () => {
  it("resets settings, variables (changed, removed, added) and storages to the document; the job says which backup type it restores", async () => {
    const x = await world();
    await ok(x.w.api.post(`/applications/${x.app.uuid}/storages`, { name: "data", mount_path: "/data" }), "storage");
    const id = await backup(x, "configuration");
    const { executionId, job } = await run(x, id);
    const document = JOBS["resource.backup"].payload.parse(job.payload).configuration!;
    const beforeSettings = await settings(x);
    const beforeEnvs = await envs(x);

    await ok(x.w.api.patch(`/applications/${x.app.uuid}`, { name: "renamed", description: "changed", ports_exposes: "3000", health_check_enabled: true, limits_cpus: "0.5" }), "patch");
    await ok(x.w.api.patch(`/applications/${x.app.uuid}/envs/bulk`, { variables: [{ key: "API_KEY", value: "leaked" }, { key: "NEW_ONE", value: "x", is_preview: true }] }), "envs");
    const mode = ((await ok(x.w.api.get(`/applications/${x.app.uuid}/envs`), "envs")).data as { uuid: string; key: string }[]).find((e) => e.key === "MODE")!;
    await ok(x.w.api.delete(`/applications/${x.app.uuid}/envs/${mode.uuid}`), "delete env");
    const storage = ((await ok(x.w.api.get(`/applications/${x.app.uuid}/storages`), "storages")).data as { uuid: string }[])[0]!;
    await ok(x.w.api.delete(`/applications/${x.app.uuid}/storages/${storage.uuid}`), "delete storage");
    await ok(x.w.api.post(`/applications/${x.app.uuid}/storages`, { name: "extra", mount_path: "/extra" }), "storage");

    const r = await x.w.api.post(`/resource-backups/${id}/executions/${executionId}/restore`, {});
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const restoreJob = await x.agent.nextJob(10_000);
    const p = JOBS["resource.restore"].payload.parse(restoreJob.payload);
    expect(p).toMatchObject({ backup_type: "configuration", apply: { may_add_bind_mounts: true } });
    await x.agent.outcome({ id: restoreJob.id, attempt: restoreJob.attempt, ok: true, result: { files: 0, bytes: 0, volumes: [], configuration: document } });
    await until(async () => (await executions(x, id))[0]?.restore_status === "success");

    expect(await settings(x)).toEqual(beforeSettings);
    expect(await envs(x)).toEqual(beforeEnvs);
    expect(((await ok(x.w.api.get(`/applications/${x.app.uuid}/storages`), "storages")).data as { name: string; uuid: string }[]).map((s) => [s.name, s.uuid])).toEqual([["data", storage.uuid]]);

    // The outcome delivered again (a replica's repair sweep) applies nothing twice: a change made since stays.
    await ok(x.w.api.patch(`/applications/${x.app.uuid}`, { description: "after the restore" }), "patch");
    const row = await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id: restoreJob.id } });
    await t.instance.services.backups.applyResourceRestoreEnd({ ...row, status: "succeeded" });
    expect((await settings(x)).description).toBe("after the restore");
  });

  it("a document that cannot be applied fails the restore with the reason and changes nothing", async () => {
    const x = await world();
    const id = await backup(x, "configuration");
    const { executionId, job } = await run(x, id);
    const document = JSON.parse(JOBS["resource.backup"].payload.parse(job.payload).configuration!) as ApplicationConfiguration;
    await ok(x.w.api.patch(`/applications/${x.app.uuid}`, { description: "current" }), "patch");
    const current = { settings: await settings(x), envs: await envs(x) };

    // Its domain taken meanwhile by another application of the team.
    const taken = { ...document, application: { ...document.application, fqdn: "https://taken.example.com" } };
    await createImageApp(x.w, { name: "other", fqdn: "https://taken.example.com" });
    const domain = await restore(x, id, executionId, JSON.stringify(taken));
    expect(domain).toMatchObject({ restore_status: "failed", restore_reason: expect.stringMatching(/taken\.example\.com is used by another resource/) });

    // A value sealed with another instance key.
    const foreign = { ...document, envs: document.envs.map((e) => ({ ...e, value_sealed: "v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAA==:AAAA" })) };
    const sealed = await restore(x, id, executionId, JSON.stringify(foreign));
    expect(sealed).toMatchObject({ restore_status: "failed", restore_reason: expect.stringMatching(/cannot be opened with this instance's key/) });

    // Another source, and a document this version does not read.
    const source = await restore(x, id, executionId, JSON.stringify({ ...document, application: { ...document.application, source: "dockerfile" } }));
    expect(source.restore_reason).toMatch(/source of an application does not change/);
    const unreadable = await restore(x, id, executionId, JSON.stringify({ ...document, format: "something-else/1" }));
    expect(unreadable.restore_reason).toMatch(/not one this version reads/);
    // Values the API would refuse (a document is only authenticated when the archive is encrypted).
    const forged = { ...document, envs: [{ ...document.envs[0]!, key: "BAD KEY;rm" }], storages: [{ uuid: "v-1", name: "etc", mount_path: "relative", host_path: null }] };
    const refusedValues = await restore(x, id, executionId, JSON.stringify(forged));
    expect(refusedValues.restore_reason).toMatch(/values the API does not accept: variable "BAD KEY;rm", storage etc/);

    expect({ settings: await settings(x), envs: await envs(x) }).toEqual(current);
  });

  it("409 while a deployment of the application runs (a configuration restore as a volume one)", async () => {
    const x = await world();
    const id = await backup(x, "configuration");
    const { executionId } = await run(x, id);
    const deploy = await x.w.api.post(`/applications/${x.app.uuid}/deploy`);
    expect(deploy.status, JSON.stringify(deploy.body)).toBeLessThan(300);
    const during = await x.w.api.post(`/resource-backups/${id}/executions/${executionId}/restore`, {});
    expect(during.status).toBe(409);
    expect(during.body.message).toMatch(/deployment of this application is running/);
    expect(await t.instance.database.prisma.job.count({ where: { type: "resource.restore", server: { uuid: x.w.server.uuid } } })).toBe(0);
  });
});

// ---- standalone databases: configuration and full backups ----

interface DbWorld {
  w: AppWorld;
  agent: ScriptedAgent;
  db: { uuid: string; id: number };
}

const DB_SECRET = `db-secret-${randomBytes(6).toString("hex")}`;

async function dbWorld(extra: Record<string, unknown> = {}): Promise<DbWorld> {
  const { w, agent } = await connectedWorld(t, keys, agents);
  const created = await createDb(w, "postgresql", { name: "orders", description: "the orders", postgres_password: DB_SECRET, ...extra });
  await ok(w.api.post(`/databases/${created.uuid}/envs`, { key: "PGTZ", value: "UTC" }), "env");
  await ok(w.api.post(`/databases/${created.uuid}/envs`, { key: "API_TOKEN", value: SECRET }), "env");
  const id = (await ok(w.api.get(`/databases/${created.uuid}`), "detail")).id as number;
  return { w, agent, db: { uuid: created.uuid, id } };
}

async function dbBackup(x: DbWorld, backupType: "configuration" | "full"): Promise<{ id: number; executionId: number; document: string; job: JobEnvelope }> {
  const r = await x.w.api.post("/resource-backups", { resource_type: "database", resource_id: x.db.id, backup_type: backupType, frequency: "0 3 * * *" });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const id = r.body.data.id as number;
  const { executionId, job } = await run({ w: x.w, agent: x.agent, app: x.db }, id);
  return { id, executionId, document: JOBS["resource.backup"].payload.parse(job.payload).configuration!, job };
}

async function dbRestore(x: DbWorld, id: number, executionId: number, configuration: string, volumes: string[] = []): Promise<Record<string, any>> {
  return restore({ w: x.w, agent: x.agent, app: x.db }, id, executionId, configuration, volumes);
}

const dbSettings = async (x: DbWorld) => {
  const { status: _s, updated_at: _u, envs: _e, ...rest } = await ok(x.w.api.get(`/databases/${x.db.uuid}`), "detail");
  return rest;
};
const dbEnvs = async (x: DbWorld) => ((await ok(x.w.api.get(`/databases/${x.db.uuid}/envs`), "envs")).data as Record<string, unknown>[]).map(({ key, value }) => ({ key, value }));

describe("databases: configuration and full backups", () => {
  it("the document carries the settings, the credentials and variables sealed (never plain); a restore resets settings and variables", async () => {
    const x = await dbWorld();
    const { id, executionId, job } = await dbBackup(x, "configuration");
    const p = JOBS["resource.backup"].payload.parse(job.payload);
    expect(p).toMatchObject({ resource: { kind: "database", uuid: x.db.uuid }, backup_type: "configuration", volumes: [] });
    expect(p.configuration).not.toContain(DB_SECRET);
    expect(p.configuration).not.toContain(SECRET);
    const doc = DatabaseConfiguration.parse(JSON.parse(p.configuration!));
    expect(doc.database).toMatchObject({ uuid: x.db.uuid, name: "orders", description: "the orders", engine: "postgresql", is_public: false, public_port: null });
    expect(doc.database.credentials_sealed).toMatch(/^v1:/);
    expect(doc.envs.map((e) => e.key)).toEqual(["PGTZ", "API_TOKEN"]);
    const before = { settings: await dbSettings(x), envs: await dbEnvs(x) };

    await ok(x.w.api.patch(`/databases/${x.db.uuid}`, { name: "renamed", description: "changed", image: "postgres:16-alpine", limits_memory: "512m" }), "patch");
    await ok(x.w.api.patch(`/databases/${x.db.uuid}/envs`, { key: "PGTZ", value: "CET" }), "env");
    const token = ((await ok(x.w.api.get(`/databases/${x.db.uuid}/envs`), "envs")).data as { uuid: string; key: string }[]).find((e) => e.key === "API_TOKEN")!;
    await ok(x.w.api.delete(`/databases/${x.db.uuid}/envs/${token.uuid}`), "delete env");
    await ok(x.w.api.post(`/databases/${x.db.uuid}/envs`, { key: "ADDED", value: "later" }), "env");

    const restored = await dbRestore(x, id, executionId, p.configuration!);
    expect(restored).toMatchObject({ restore_status: "success", restore_reason: null });
    expect({ settings: await dbSettings(x), envs: await dbEnvs(x) }).toEqual(before);
    // A stopped database gets the settings on its next start: nothing was queued for it.
    expect(await t.instance.database.prisma.job.count({ where: { type: "db.deploy", server: { uuid: x.w.server.uuid } } })).toBe(0);
  });

  it("full: the data volume and the document in one archive; a running database whose container settings come back is re-deployed", async () => {
    const x = await dbWorld();
    const { id, executionId, job, document } = await dbBackup(x, "full");
    expect(JOBS["resource.backup"].payload.parse(job.payload)).toMatchObject({ backup_type: "full", volumes: [{ name: "data", mount_path: "/var/lib/postgresql/data" }] });
    await ok(x.w.api.patch(`/databases/${x.db.uuid}`, { limits_cpus: "0.5" }), "patch");
    // Running (as an agent's report would say): a change of its container settings re-deploys it.
    await t.instance.database.prisma.standaloneDatabase.update({ where: { id: x.db.id }, data: { status: "running:healthy" } });

    const r = await x.w.api.post(`/resource-backups/${id}/executions/${executionId}/restore`, {});
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    const restoreJob = await x.agent.nextJob(10_000);
    expect(JOBS["resource.restore"].payload.parse(restoreJob.payload)).toMatchObject({ backup_type: "full", resource: { kind: "database", uuid: x.db.uuid } });
    await x.agent.outcome({ id: restoreJob.id, attempt: restoreJob.attempt, ok: true, result: { files: 3, bytes: 100, volumes: ["data"], configuration: document } });
    await until(async () => (await executions({ w: x.w, agent: x.agent, app: x.db }, id))[0]?.restore_status === "success");
    expect((await dbSettings(x)).limits_cpus ?? null).toBeNull();
    const deploy = await x.agent.nextJob(10_000);
    expect(deploy.type).toBe("db.deploy");
    expect(JOBS["db.deploy"].payload.parse(deploy.payload)).toMatchObject({ db: { uuid: x.db.uuid }, cpus: null, credentials: { password: DB_SECRET } });
  });

  it("a document that cannot be applied fails the restore with the reason and changes nothing", async () => {
    const x = await dbWorld({ is_public: true, public_port: 25432 });
    const { id, executionId, document } = await dbBackup(x, "configuration");
    const doc = DatabaseConfiguration.parse(JSON.parse(document));
    // The port it published is taken meanwhile by another database of the server.
    await ok(x.w.api.patch(`/databases/${x.db.uuid}`, { is_public: false }), "unpublish");
    await createDb(x.w, "redis", { is_public: true, public_port: 25432 });
    await ok(x.w.api.patch(`/databases/${x.db.uuid}`, { description: "current" }), "patch");
    const current = { settings: await dbSettings(x), envs: await dbEnvs(x) };

    const taken = await dbRestore(x, id, executionId, document);
    expect(taken).toMatchObject({ restore_status: "failed", restore_reason: expect.stringMatching(/port 25432, which another database of server .* publishes now/) });
    const engine = await dbRestore(x, id, executionId, JSON.stringify({ ...doc, database: { ...doc.database, engine: "mysql" } }));
    expect(engine.restore_reason).toMatch(/engine of a database does not change/);
    const reserved = await dbRestore(x, id, executionId, JSON.stringify({ ...doc, database: { ...doc.database, public_port: 22 } }));
    expect(reserved.restore_reason).toMatch(/values the API does not accept: public_port/);
    const foreign = await dbRestore(x, id, executionId, JSON.stringify({ ...doc, envs: doc.envs.map((e) => ({ ...e, value_sealed: "v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAA==:AAAA" })) }));
    expect(foreign.restore_reason).toMatch(/cannot be opened with this instance's key/);
    const forged = await dbRestore(x, id, executionId, JSON.stringify({ ...doc, database: { ...doc.database, image: "not an image;rm -rf /" }, envs: [{ ...doc.envs[0]!, key: "BAD KEY" }] }));
    expect(forged.restore_reason).toMatch(/values the API does not accept: image, variable "BAD KEY"/);
    // An application's document is not a database's.
    const wrongKind = await dbRestore(x, id, executionId, JSON.stringify({ ...doc, kind: "application" }));
    expect(wrongKind.restore_reason).toMatch(/not one this version reads/);

    expect({ settings: await dbSettings(x), envs: await dbEnvs(x) }).toEqual(current);
  });

  it("a configuration or full backup of a database restores into its own database only (target_uuid: 422)", async () => {
    const x = await dbWorld();
    const { id, executionId } = await dbBackup(x, "configuration");
    const other = await createDb(x.w, "postgresql", { name: "clone" });
    const r = await x.w.api.post(`/resource-backups/${id}/executions/${executionId}/restore`, { target_uuid: other.uuid });
    expect(r.status).toBe(422);
    expect(r.body.errors.target_uuid[0]).toMatch(/restored into its own database/);
  });
});

// ---- services: configuration and full backups ----

const SERVICE_COMPOSE = `services:
  web:
    image: nginx:1.27
    expose: ["80"]
    environment:
      - ADMIN_PASSWORD=\${SERVICE_PASSWORD_ADMIN}
      - GREETING=\${GREETING:-hello}
    volumes:
      - web-data:/usr/share/nginx/html
  cache:
    image: redis:7
    command: ["redis-server", "--requirepass", "\${SERVICE_PASSWORD_REDIS}"]
volumes:
  web-data:
`;

interface SvcWorld {
  w: AppWorld;
  agent: ScriptedAgent;
  svc: { uuid: string; id: number };
}

async function svcWorld(): Promise<SvcWorld> {
  const { w, agent } = await connectedWorld(t, keys, agents);
  await t.instance.admin.setTeamFeatures(w.team.teamId, { enable: ["PROXY_LABEL_OVERRIDES"] });
  const created = await ok(w.api.post("/services", { ...placement(w), docker_compose_raw: SERVICE_COMPOSE, name: "stack", description: "the stack" }), "service");
  const d = await ok(w.api.get(`/services/${created.uuid}`), "detail");
  const web = (d.applications as { uuid: string; name: string }[]).find((a) => a.name === "web")!;
  await ok(w.api.patch(`/service-applications/${web.uuid}`, { fqdn: `https://stack-${randomBytes(3).toString("hex")}.example.com` }), "fqdn");
  await ok(w.api.put(`/service-applications/${web.uuid}/label-overrides`, { yaml: "traefik.http.routers.custom.priority: 10\n" }), "overrides");
  await ok(w.api.patch(`/services/${created.uuid}/envs`, { key: "GREETING", value: SECRET }), "env");
  await ok(w.api.post(`/services/${created.uuid}/storages`, { name: "uploads", mount_path: "/uploads", service_name: "web" }), "storage");
  return { w, agent, svc: { uuid: created.uuid, id: d.id as number } };
}

async function svcBackup(x: SvcWorld, backupType: "configuration" | "full"): Promise<{ id: number; executionId: number; document: string; job: JobEnvelope }> {
  const r = await x.w.api.post("/resource-backups", { resource_type: "service", resource_id: x.svc.id, backup_type: backupType, frequency: "0 3 * * *" });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const id = r.body.data.id as number;
  const { executionId, job } = await run({ w: x.w, agent: x.agent, app: x.svc }, id);
  return { id, executionId, document: JOBS["resource.backup"].payload.parse(job.payload).configuration!, job };
}

/** What the API shows of a service's configuration: its settings, its components' domains and overrides (by name), variables with values, storages. */
async function svcShown(x: SvcWorld) {
  const d = await ok(x.w.api.get(`/services/${x.svc.uuid}`), "detail");
  const components = [...d.applications, ...d.databases] as { uuid: string; name: string; fqdn?: string | null }[];
  const overrides: Record<string, string> = {};
  for (const a of d.applications as { uuid: string; name: string }[]) overrides[a.name] = (await ok(x.w.api.get(`/service-applications/${a.uuid}/label-overrides`), "overrides")).yaml;
  const envs = ((await ok(x.w.api.get(`/services/${x.svc.uuid}/envs`), "envs")).data as Record<string, unknown>[]).map(({ key, value, is_generated }) => ({ key, value, is_generated }));
  const storages = ((await ok(x.w.api.get(`/services/${x.svc.uuid}/storages`), "storages")).data as Record<string, unknown>[]).map(({ uuid, name, service_name, mount_path, host_path }) => ({ uuid, name, service_name, mount_path, host_path }));
  return {
    settings: { name: d.name, description: d.description, type: d.type, docker_compose_raw: d.docker_compose_raw },
    components: components.map((c) => ({ name: c.name, fqdn: c.fqdn ?? null })).sort((a, b) => a.name.localeCompare(b.name)),
    overrides,
    envs: envs.sort((a, b) => String(a.key).localeCompare(String(b.key))),
    storages,
  };
}

describe("services: configuration and full backups", () => {
  it("the document carries the compose file, domains, overrides, variables (generated ones too, sealed) and storages; a restore resets the service to it", async () => {
    const x = await svcWorld();
    const { id, executionId, job, document } = await svcBackup(x, "configuration");
    const p = JOBS["resource.backup"].payload.parse(job.payload);
    expect(p).toMatchObject({ resource: { kind: "service", uuid: x.svc.uuid }, backup_type: "configuration", volumes: [] });
    expect(document).not.toContain(SECRET);
    const doc = ServiceConfiguration.parse(JSON.parse(document));
    expect(doc.service).toMatchObject({ uuid: x.svc.uuid, name: "stack", description: "the stack", type: null, docker_compose_raw: SERVICE_COMPOSE });
    expect(doc.components.map((c) => [c.name, c.kind, c.fqdn !== null, c.label_overrides !== ""])).toEqual([
      ["web", "application", true, true],
      ["cache", "database", false, false],
    ]);
    expect(doc.envs.filter((e) => e.is_generated).map((e) => e.key).sort()).toEqual(["SERVICE_PASSWORD_ADMIN", "SERVICE_PASSWORD_REDIS"]);
    expect(doc.storages).toMatchObject([{ name: "uploads", component: "web", mount_path: "/uploads", host_path: null }]);
    const before = await svcShown(x);

    // Everything changed: settings, compose file (cache gone, worker added), domains, overrides, variables, storages.
    const next = SERVICE_COMPOSE.replace(/  cache:[\s\S]*?(?=volumes:\n  web-data)/, "  worker:\n    image: busybox:1\n    command: [\"sleep\", \"3600\"]\n");
    await ok(x.w.api.patch(`/services/${x.svc.uuid}`, { name: "renamed", description: "changed", docker_compose_raw: next }), "patch");
    const web = ((await ok(x.w.api.get(`/services/${x.svc.uuid}`), "detail")).applications as { uuid: string; name: string }[]).find((a) => a.name === "web")!;
    await ok(x.w.api.patch(`/service-applications/${web.uuid}`, { fqdn: null }), "fqdn");
    await ok(x.w.api.delete(`/service-applications/${web.uuid}/label-overrides`), "overrides");
    await ok(x.w.api.patch(`/services/${x.svc.uuid}/envs`, { key: "GREETING", value: "changed" }), "env");
    await ok(x.w.api.patch(`/services/${x.svc.uuid}/envs`, { key: "ADDED", value: "later" }), "env");
    const uploads = ((await ok(x.w.api.get(`/services/${x.svc.uuid}/storages`), "storages")).data as { uuid: string }[])[0]!;
    await ok(x.w.api.delete(`/services/${x.svc.uuid}/storages/${uploads.uuid}`), "delete storage");
    await ok(x.w.api.post(`/services/${x.svc.uuid}/storages`, { name: "other", mount_path: "/other", service_name: "web" }), "storage");
    expect(await svcShown(x)).not.toEqual(before);

    const restored = await restore({ w: x.w, agent: x.agent, app: x.svc }, id, executionId, document);
    expect(restored).toMatchObject({ restore_status: "success", restore_reason: null });
    expect(await svcShown(x)).toEqual(before);
    // The next start's compose file is the restored one, with the generated values as they were.
    const row = await t.instance.database.prisma.service.findUniqueOrThrow({ where: { id: x.svc.id } });
    const rendered = t.instance.box.open(row.composeRendered);
    const redis = before.envs.find((e) => e.key === "SERVICE_PASSWORD_REDIS")!.value as string;
    expect(rendered).toContain(redis);
    expect(rendered).toContain("traefik.http.routers.custom.priority");
    expect(rendered).not.toContain("worker");
  });

  it("a document that cannot be applied fails the restore with the reason and changes nothing", async () => {
    const x = await svcWorld();
    const { id, executionId, document } = await svcBackup(x, "configuration");
    const doc = ServiceConfiguration.parse(JSON.parse(document));
    // The web domain freed and taken meanwhile by an application of the team.
    const web = ((await ok(x.w.api.get(`/services/${x.svc.uuid}`), "detail")).applications as { uuid: string; name: string }[]).find((a) => a.name === "web")!;
    const fqdn = doc.components.find((c) => c.name === "web")!.fqdn!;
    await ok(x.w.api.patch(`/service-applications/${web.uuid}`, { fqdn: null }), "free");
    await createImageApp(x.w, { name: "squatter", fqdn });
    await ok(x.w.api.patch(`/services/${x.svc.uuid}`, { description: "current" }), "patch");
    const current = await svcShown(x);

    const taken = await restore({ w: x.w, agent: x.agent, app: x.svc }, id, executionId, document);
    expect(taken).toMatchObject({ restore_status: "failed", restore_reason: expect.stringMatching(/domain .* is used by another resource now/) });
    const attempt = async (forged: unknown) => (await restore({ w: x.w, agent: x.agent, app: x.svc }, id, executionId, JSON.stringify(forged))).restore_reason as string;
    expect(await attempt({ ...doc, service: { ...doc.service, type: "uptime-kuma" } })).toMatch(/what a service is made from does not change/);
    expect(await attempt({ ...doc, service: { ...doc.service, docker_compose_raw: "services:\n  web:\n    image: nginx\n    privileged: true\n" } })).toMatch(/compose file/);
    expect(await attempt({ ...doc, components: [...doc.components, { name: "ghost", kind: "application", fqdn: null, label_overrides: "" }] })).toMatch(/names a compose service its compose file does not have \(ghost\)/);
    expect(await attempt({ ...doc, components: doc.components.map((c) => (c.name === "cache" ? { ...c, fqdn: "https://db.example.com" } : c)) })).toMatch(/values the API does not accept: the domains of cache/);
    expect(await attempt({ ...doc, envs: doc.envs.map((e) => ({ ...e, value_sealed: "v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAA==:AAAA" })) })).toMatch(/cannot be opened with this instance's key/);
    expect(await attempt({ ...doc, storages: [{ ...doc.storages[0]!, name: "web-data" }] })).toMatch(/has the name of a volume its compose file declares/);
    expect(await attempt({ ...doc, format: "capstan-database-configuration/1" })).toMatch(/not one this version reads/);

    expect(await svcShown(x)).toEqual(current);

    // Label overrides are a paid feature: a team without it now gets none back from a backup.
    await ok(x.w.api.delete(`/service-applications/${web.uuid}/label-overrides`), "clear overrides");
    await t.instance.admin.setTeamFeatures(x.w.team.teamId, { disable: ["PROXY_LABEL_OVERRIDES"] });
    expect(await attempt({ ...doc, components: doc.components.map((c) => ({ ...c, fqdn: null })) })).toMatch(/label overrides of web: that needs the paid feature PROXY_LABEL_OVERRIDES/);
    const row = await t.instance.database.prisma.serviceComponent.findFirstOrThrow({ where: { uuid: web.uuid } });
    expect(row.labelOverrides).toBe("");
  });

  it("full: the service's volumes and the document in one archive", async () => {
    const x = await svcWorld();
    const { job } = await svcBackup(x, "full");
    const p = JOBS["resource.backup"].payload.parse(job.payload);
    expect(p.backup_type).toBe("full");
    expect(p.volumes.map((v) => v.name).sort()).toEqual(["uploads", "web-data"]);
    expect(ServiceConfiguration.parse(JSON.parse(p.configuration!)).service.uuid).toBe(x.svc.uuid);
  });
});
