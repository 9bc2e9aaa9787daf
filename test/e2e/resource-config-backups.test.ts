/**
 * Configuration and full resource backups of applications (issue 19, w8/rbconfig) the way a user
 * drives them: a real control plane, a real agent on this machine's Docker Engine and a real
 * S3-compatible server (s3rver). A configuration backup (encrypted, in S3 only) is taken, the
 * application's settings, variables and storages are changed, and the restore through the API
 * brings every one back as the API GETs showed them. A full backup (one archive: the volume and
 * the configuration document) is taken of a deployed application; its volume is wiped and its
 * variables changed; the restore brings both back. The archive's checks (tampered, truncated)
 * are the agent's: resource-config-archive.test.ts.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startS3Server, type S3Server } from "../support/s3-server.js";
import { sh, until } from "./support/kit.js";
import { applicationCreator, buildHelloImage, deployFinished, startLocalStack, type LocalStack } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const DEPLOY_TIMEOUT_S = 240;
const HELLO_IMAGE = "capstan-test/e2e-hello:latest";
const PASSPHRASE = `passphrase-${RUN}-e2e`;

let stack: LocalStack;
let s3: S3Server;
let sealedStorage: number;

const api = () => stack.team.api;
const { common, create } = applicationCreator(api, () => ({ project: stack.project, server: stack.server }));

beforeAll(async () => {
  await buildHelloImage(HELLO_IMAGE);
  s3 = await startS3Server({ buckets: [`capstan-e2e-${RUN}`] });
  // The helper container of a volume restore: the agent's own image in production, busybox here.
  stack = await startLocalStack({ name: `rbconfig-${RUN}`, deployTimeoutS: DEPLOY_TIMEOUT_S, agentEnv: { CAPSTAN_AGENT_HELPER_IMAGE: "capstan-test/busybox:latest" } });
  const res = await api().post("/s3-storages", {
    name: "sealed",
    endpoint: s3.endpoint,
    region: "us-east-1",
    bucket: s3.bucket,
    path_prefix: "sealed/",
    path_style: true,
    access_key: s3.accessKey,
    secret_key: s3.secretKey,
    encryption_passphrase: PASSPHRASE,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  sealedStorage = res.body.data.id as number;
}, 600_000);

afterAll(async () => {
  await stack?.close();
  await s3?.stop();
}, 120_000);

/** Runs the backup now and waits for its execution to succeed; answers the execution. */
async function backedUp(backupId: number): Promise<Record<string, any>> {
  const run = await api().post(`/resource-backups/${backupId}/execute`);
  expect(run.status, JSON.stringify(run.body)).toBe(200);
  const id = run.body.execution_id as number;
  const e = await until(
    `backup execution ${id} to end`,
    async () => {
      const d = (await api().get(`/resource-backups/${backupId}`)).body;
      const x = d.executions.find((x: { id: number }) => x.id === id);
      return x && (x.status === "success" || x.status === "failed") ? x : false;
    },
    120_000,
    300,
  );
  expect(e.status, e.reason ?? "").toBe("success");
  return e;
}

/** Restores the execution and waits for the restore to end; answers the execution. */
async function restored(backupId: number, executionId: number): Promise<Record<string, any>> {
  const r = await api().post(`/resource-backups/${backupId}/executions/${executionId}/restore`, {});
  expect(r.status, JSON.stringify(r.body)).toBe(202);
  return until(
    `restore of execution ${executionId} to end`,
    async () => {
      const d = (await api().get(`/resource-backups/${backupId}`)).body;
      const x = d.executions.find((x: { id: number }) => x.id === executionId);
      return x && (x.restore_status === "success" || x.restore_status === "failed") ? x : false;
    },
    180_000,
    300,
  );
}

/** What the API shows of an application's configuration: its detail's settings, its variables with values, its storages. */
async function shown(app: string): Promise<Record<string, unknown>> {
  const detail = (await api().get(`/applications/${app}`)).body;
  const { status: _s, deployments: _d, updated_at: _u, envs: _e, storages: _st, ...settings } = detail;
  const envs = (await api().get(`/applications/${app}/envs`)).body.data as Record<string, unknown>[];
  const storages = (await api().get(`/applications/${app}/storages`)).body.data as Record<string, unknown>[];
  const byKey = (a: Record<string, unknown>, b: Record<string, unknown>) => `${a.key}${a.is_preview}`.localeCompare(`${b.key}${b.is_preview}`);
  return {
    settings,
    envs: envs.map(({ key, value, is_build_time, is_preview }) => ({ key, value, is_build_time, is_preview })).sort(byKey),
    storages: storages.map(({ name, mount_path, host_path, type, volume_name }) => ({ name, mount_path, host_path, type, volume_name })),
  };
}

async function setEnvs(app: string, variables: Record<string, unknown>[]): Promise<void> {
  const r = await api().patch(`/applications/${app}/envs/bulk`, { variables });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
}

describe("configuration and full backups of an application", () => {
  it("configuration backup (encrypted, S3 only) -> change settings, variables and storages -> restore: the API shows them as they were", async () => {
    const host = `config-${RUN}.e2e.test`;
    const app = await create(
      "dockerimage",
      common("config-app", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}`, description: "before", health_check_path: "/health", limits_memory: "256m" }),
    );
    await setEnvs(app, [
      { key: "GREETING", value: "original greeting" },
      { key: "SECRET_TOKEN", value: `s3cr3t-${RUN}`, is_build_time: true },
      { key: "GREETING", value: "preview greeting", is_preview: true },
      { key: "REMOVED_LATER", value: "still here" },
    ]);
    expect((await api().post(`/applications/${app}/storages`, { name: "data", mount_path: "/data" })).status).toBe(201);
    const before = await shown(app);
    const appId = (await api().get(`/applications/${app}`)).body.id as number;

    const created = await api().post("/resource-backups", {
      resource_type: "application",
      resource_id: appId,
      backup_type: "configuration",
      frequency: "0 3 * * *",
      s3_storage_id: sealedStorage,
      keep_locally: false,
      number_of_backups_locally: 0,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const backupId = created.body.data.id as number;
    const execution = await backedUp(backupId);
    expect(execution).toMatchObject({ is_encrypted: true, stored_locally: false });
    expect(execution.filename).toMatch(/^configuration-\d{8}T\d{6}Z-[a-z0-9]{8}\.tar\.gz\.gpg$/);
    // The secret never travels in the clear: the archive is encrypted, and inside it the values are sealed with the instance key.
    const object = Buffer.from(await s3.read(execution.s3_key));
    expect(object.includes(Buffer.from(`s3cr3t-${RUN}`))).toBe(false);

    // Change everything the document holds.
    const patched = await api().patch(`/applications/${app}`, {
      name: "renamed",
      description: "after",
      ports_exposes: "9090",
      fqdn: `http://other-${RUN}.e2e.test`,
      health_check_path: "/changed",
      limits_memory: null,
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    await setEnvs(app, [
      { key: "GREETING", value: "changed greeting", is_build_time: true },
      { key: "ADDED_LATER", value: "should go" },
    ]);
    const removed = ((await api().get(`/applications/${app}/envs`)).body.data as { uuid: string; key: string }[]).find((e) => e.key === "REMOVED_LATER")!;
    expect((await api().delete(`/applications/${app}/envs/${removed.uuid}`)).status).toBe(200);
    const storages = (await api().get(`/applications/${app}/storages`)).body.data as { uuid: string }[];
    expect((await api().delete(`/applications/${app}/storages/${storages[0]!.uuid}`)).status).toBe(200);
    expect((await api().post(`/applications/${app}/storages`, { name: "added", mount_path: "/added" })).status).toBe(201);
    expect(await shown(app)).not.toEqual(before);

    const r = await restored(backupId, execution.id);
    expect(r.restore_status, r.restore_reason ?? "").toBe("success");
    expect(await shown(app)).toEqual(before);
    // The domain is claimed again: its host row is back (a second app cannot take it).
    const clash = await api().post("/applications/dockerimage", common("clash", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}` }));
    expect(clash.status).toBe(409);
  });

  it("full backup -> wipe the volume and change the variables -> restore: the data and the variables are back", async () => {
    const host = `full-${RUN}.e2e.test`;
    const app = await create("dockerimage", common("full-app", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}` }));
    expect((await api().post(`/applications/${app}/storages`, { name: "data", mount_path: "/data" })).status).toBe(201);
    await setEnvs(app, [{ key: "GREETING", value: "full original" }]);
    await deployFinished(api(), app, DEPLOY_TIMEOUT_S * 1000);
    const container = async () => (await sh("docker", ["ps", "-q", "--filter", `label=capstan.resource.uuid=${app}`, "--filter", "status=running"])).trim().split("\n")[0]!;
    const exec = async (script: string) => sh("docker", ["exec", await container(), "sh", "-c", script]);
    await exec("mkdir -p /data/notes && echo 'kept note' > /data/notes/a.txt && head -c 200000 /dev/urandom > /data/blob.bin");
    const sums = await exec("cd /data && find . -type f | sort | xargs sha256sum");
    const before = await shown(app);
    const appId = (await api().get(`/applications/${app}`)).body.id as number;

    const created = await api().post("/resource-backups", { resource_type: "application", resource_id: appId, backup_type: "full", frequency: "0 3 * * *" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const backupId = created.body.data.id as number;
    const execution = await backedUp(backupId);
    expect(execution.filename).toMatch(/^full-\d{8}T\d{6}Z-[a-z0-9]{8}\.tar\.gz$/);
    expect(execution.stored_locally).toBe(true);

    await exec("rm -rf /data/* && echo intruder > /data/new.txt");
    await setEnvs(app, [
      { key: "GREETING", value: "full changed" },
      { key: "EXTRA", value: "x" },
    ]);
    expect(await shown(app)).not.toEqual(before);

    const r = await restored(backupId, execution.id);
    expect(r.restore_status, r.restore_reason ?? "").toBe("success");
    expect(await shown(app)).toEqual(before);
    const after = await until("the application to run again", async () => (await container()) || false, 60_000, 250);
    expect(after).toBeTruthy();
    expect(await exec("cd /data && find . -type f | sort | xargs sha256sum")).toBe(sums);
    expect(await exec("cat /data/notes/a.txt")).toBe("kept note");
  });
});

describe("configuration and full backups of a standalone database", () => {
  it("full backup -> change the data, the settings and the variables -> restore: the data, the settings and the variables are back, the database runs", async () => {
    const createdDb = await api().post("/databases/redis", {
      project_uuid: stack.project,
      environment_name: "production",
      server_uuid: stack.server.uuid,
      destination_uuid: stack.server.destination,
      name: "cache",
      description: "the cache",
      image: "capstan-test/redis:latest",
      instant_deploy: true,
    });
    expect(createdDb.status, JSON.stringify(createdDb.body)).toBe(201);
    const db = createdDb.body.uuid as string;
    const password = decodeURIComponent(new URL(createdDb.body.internal_db_url as string).password);
    const detail = async () => (await api().get(`/databases/${db}`)).body as Record<string, any>;
    const healthy = () => until(`database ${db} to be running:healthy`, async () => (await detail()).status === "running:healthy", 180_000, 300);
    await healthy();
    // The password goes in the environment of redis-cli, never in its argv.
    const redis = (...argv: string[]) => sh("docker", ["exec", "-e", `REDISCLI_AUTH=${password}`, db, "redis-cli", ...argv]);
    expect((await redis("SET", "marker", "before")).trim()).toBe("OK");
    expect((await redis("SAVE")).trim()).toBe("OK");
    expect((await api().post(`/databases/${db}/envs`, { key: "TZ", value: "UTC" })).status).toBe(201);
    const shownDb = async () => {
      const { status: _s, updated_at: _u, envs: _e, ...settings } = await detail();
      const envs = ((await api().get(`/databases/${db}/envs`)).body.data as Record<string, unknown>[]).map(({ key, value }) => ({ key, value }));
      return { settings, envs };
    };
    const before = await shownDb();

    const created = await api().post("/resource-backups", { resource_type: "database", resource_id: before.settings.id, backup_type: "full", frequency: "0 3 * * *", stop_during_backup: true });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const backupId = created.body.data.id as number;
    const execution = await backedUp(backupId);
    expect(execution.filename).toMatch(/^full-\d{8}T\d{6}Z-[a-z0-9]{8}\.tar\.gz$/);
    await healthy();

    expect((await redis("SET", "marker", "after")).trim()).toBe("OK");
    expect((await redis("SAVE")).trim()).toBe("OK");
    expect((await api().patch(`/databases/${db}`, { name: "renamed", description: "changed" })).status).toBe(200);
    expect((await api().patch(`/databases/${db}/envs`, { key: "TZ", value: "CET" })).status).toBe(200);
    expect((await api().post(`/databases/${db}/envs`, { key: "EXTRA", value: "x" })).status).toBe(201);
    expect(await shownDb()).not.toEqual(before);

    const r = await restored(backupId, execution.id);
    expect(r.restore_status, r.restore_reason ?? "").toBe("success");
    expect(await shownDb()).toEqual(before);
    await healthy();
    expect((await redis("GET", "marker")).trim()).toBe("before");
  });
});
