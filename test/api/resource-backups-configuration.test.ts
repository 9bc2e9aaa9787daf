import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApplicationConfiguration, JOBS, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { answerNext, connectedWorld, createImageApp, ok, until, type AppWorld } from "./support/applications.js";
import type { ScriptedAgent } from "./support/fake-agent.js";

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
