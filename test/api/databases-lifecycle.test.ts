/**
 * Standalone databases after create: start/stop/restart, logs, PATCH (re-deploys what changes the
 * container), delete with the spec's defaults, variables, status from job results and from the
 * agent's status reports, and removal with their project or environment. The scripted agent
 * (support/fake-agent.ts) sees the jobs the real agent would run.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { EV } from "@capstan/shared";
import type { TestInstance } from "./harness.js";
import { connectFleet, type ScriptedAgent } from "./support/fake-agent.js";
import { lifecycleFile } from "./support/lifecycle.js";
import { appWorld, connectServerAgent, createImageApp, ok, placement, until, type AppWorld } from "./support/applications.js";
import { GENERATED, ISO, UUID, answerJob, createDb, deployed, jobCount } from "./support/standalone-databases.js";

let t: TestInstance;
const { keys, agents, prisma, connectedWorld: newConnectedWorld } = lifecycleFile((started) => (t = started));

const statusOf = async (w: AppWorld, uuid: string) => (await w.api.get(`/databases/${uuid}`)).body.status as string;

/** Starts a database through the API (a db.deploy answered healthy). */
async function started(w: AppWorld, agent: ScriptedAgent, engine: "postgresql" | "redis" = "postgresql", extra: Record<string, unknown> = {}) {
  const db = await createDb(w, engine, extra);
  const res = w.api.post(`/databases/${db.uuid}/start`);
  await answerJob(agent, "db.deploy", deployed(db.uuid));
  expect((await res).status).toBe(200);
  return db;
}

describe("without a connected agent", () => {
  it("start/stop/restart and logs answer 503 with the reason; nothing is queued", async () => {
    const w = await appWorld(t, keys);
    const db = await createDb(w);
    const before = await prisma().job.count();
    for (const action of ["start", "stop", "restart"]) {
      const res = await w.api.post(`/databases/${db.uuid}/${action}`);
      expect(res.status, action).toBe(503);
      expect(res.body).toEqual({ message: "Server web is unreachable: its agent is not connected." });
    }
    expect((await w.api.get(`/databases/${db.uuid}/logs`)).status).toBe(503);
    expect(await prisma().job.count()).toBe(before);
  });

  it("create with instant_deploy queues db.deploy for when the agent connects", async () => {
    const w = await appWorld(t, keys);
    const res = await w.api.post("/databases/redis", {
      project_uuid: w.project.uuid,
      environment_name: "production",
      server_uuid: w.server.uuid,
      destination_uuid: w.server.destinationUuid,
    });
    expect(res.status).toBe(201);
    const agent = await connectServerAgent(t, w);
    agents.push(agent);
    const job = await answerJob(agent, "db.deploy", deployed(res.body.uuid, "running:starting"));
    expect((job.payload as any).db.uuid).toBe(res.body.uuid);
    await until(async () => (await statusOf(w, res.body.uuid)) === "running:starting");
  });
});

describe("start, stop, restart", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("start of a database never started deploys it (db.deploy) and answers with its status", async () => {
    const db = await createDb(w, "postgresql", { name: "orders", limits_memory: "512m", limits_cpus: "1.5", is_public: true, public_port: 35432 });
    expect(await statusOf(w, db.uuid)).toBe("exited");
    const res = w.api.post(`/databases/${db.uuid}/start`);
    const job = await answerJob(agent, "db.deploy", deployed(db.uuid));
    expect(job.payload).toMatchObject({ db: { uuid: db.uuid, name: "orders" }, engine: "postgresql", public_port: 35432, memory: "512m", cpus: "1.5" });
    const r = await res;
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ message: "Database started.", status: "running:healthy" });
    expect(await statusOf(w, db.uuid)).toBe("running:healthy");
    expect((await w.api.get("/databases")).body.data.find((d: any) => d.uuid === db.uuid).status).toBe("running:healthy");
  });

  it("start of a running database is db.action start; stop is db.action stop; restart recreates it (db.deploy)", async () => {
    const db = await started(w, agent, "redis");
    const ref = { uuid: db.uuid, name: db.name };

    const starting = w.api.post(`/databases/${db.uuid}/start`);
    const start = await answerJob(agent, "db.action", { result: { status: "running:healthy" } });
    expect(start.payload).toEqual({ db: ref, action: "start", delete_volumes: false, docker_cleanup: false });
    expect((await starting).body).toEqual({ message: "Database started.", status: "running:healthy" });

    const stopping = w.api.post(`/databases/${db.uuid}/stop`);
    const stop = await answerJob(agent, "db.action", { result: { status: "exited" } });
    expect(stop.payload).toEqual({ db: ref, action: "stop", delete_volumes: false, docker_cleanup: false });
    expect((await stopping).body).toEqual({ message: "Database stopped.", status: "exited" });
    expect(await statusOf(w, db.uuid)).toBe("exited");

    const restarting = w.api.post(`/databases/${db.uuid}/restart`);
    const restart = await answerJob(agent, "db.deploy", deployed(db.uuid, "running:starting"));
    expect(restart.payload).toMatchObject({ db: ref, engine: "redis" });
    expect((await restarting).body).toEqual({ message: "Database restarted.", status: "running:starting" });
    expect(await statusOf(w, db.uuid)).toBe("running:starting");
  });

  it("the agent's failure is a 502 with its reason; the status stays", async () => {
    const db = await started(w, agent);
    const stopping = w.api.post(`/databases/${db.uuid}/stop`);
    await answerJob(agent, "db.action", { error: "stopping container failed: engine timeout" });
    const res = await stopping;
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ message: `Stopping ${db.name} failed: stopping container failed: engine timeout` });
    expect(await statusOf(w, db.uuid)).toBe("running:healthy");
  });

  it("answers 202 when the agent takes longer than the wait; the status follows", async () => {
    const db = await createDb(w, "redis");
    const svc = t.instance.services.databases;
    svc.actionWaitMs = 300;
    try {
      const res = await w.api.post(`/databases/${db.uuid}/start`);
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ message: `Starting ${db.name}: the agent is still at it; the status will follow.`, status: "exited" });
      await answerJob(agent, "db.deploy", deployed(db.uuid));
      await until(async () => (await statusOf(w, db.uuid)) === "running:healthy");
    } finally {
      svc.actionWaitMs = 30_000;
    }
  });

  it("needs the deploy scope and the deploy permission; viewers get 403, strangers 404", async () => {
    const db = await createDb(w);
    const before = await jobCount(prisma());
    const noDeployScope = await t.newMember(w.team.teamId, "admin", ["read", "write"]);
    const res = await t.api(noDeployScope.token).post(`/databases/${db.uuid}/start`);
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: "Invalid ability provided." });
    const viewer = await t.newMember(w.team.teamId, "viewer");
    expect((await t.api(viewer.token).post(`/databases/${db.uuid}/stop`)).status).toBe(403);
    const stranger = await t.newMember(w.team.teamId, "member");
    expect((await t.api(stranger.token).post(`/databases/${db.uuid}/stop`)).status).toBe(404);
    expect(await jobCount(prisma())).toBe(before);

    const deployer = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: deployer.userId, permission_level: "deploy" }), "grant");
    const stopping = t.api(deployer.token).post(`/databases/${db.uuid}/stop`);
    await answerJob(agent, "db.action", { result: { status: "exited" } });
    expect((await stopping).status).toBe(200);
    // Deploy permission does not reach settings or deletion.
    expect((await t.api(deployer.token).patch(`/databases/${db.uuid}`, { name: "x" })).status).toBe(403);
    expect((await t.api(deployer.token).delete(`/databases/${db.uuid}`)).status).toBe(403);
  });

  it("logs: app.logs for the database's container with the spec's defaults", async () => {
    const db = await createDb(w, "postgresql", { name: "logged" });
    const reading = w.api.get(`/databases/${db.uuid}/logs`);
    const job = await answerJob(agent, "app.logs", { result: { container: db.uuid, lines: ["2026-01-01T00:00:00Z ready to accept connections"], truncated: false } });
    // secrets: the generated password, for the agent to mask (issue 15, item 6)
    expect(job.payload).toEqual({ app: { uuid: db.uuid, name: "logged" }, since_s: 600, tail: 100, secrets: [expect.stringMatching(GENERATED)] });
    expect((await reading).body).toEqual({ container: db.uuid, logs: "2026-01-01T00:00:00Z ready to accept connections\n", truncated: false });

    const custom = w.api.get(`/databases/${db.uuid}/logs`, { since: 0, tail: 5 });
    expect((await answerJob(agent, "app.logs", { result: { container: null, lines: [], truncated: false } })).payload).toMatchObject({ since_s: 0, tail: 5 });
    expect((await custom).body).toEqual({ container: null, logs: "", truncated: false });
    expect((await w.api.get(`/databases/${db.uuid}/logs`, { tail: 0 })).status).toBe(422);
  });
});

describe("last error", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  const detail = async (uuid: string) => (await w.api.get(`/databases/${uuid}`)).body;
  const listed = async (uuid: string) => (await w.api.get("/databases")).body.data.find((d: any) => d.uuid === uuid);

  it("a failed start records the agent's reason and when; a later success clears it", async () => {
    const db = await createDb(w);
    expect(await detail(db.uuid)).toMatchObject({ status: "exited", last_error: null, last_error_at: null });
    const before = Date.now();
    const starting = w.api.post(`/databases/${db.uuid}/start`);
    await answerJob(agent, "db.deploy", { error: "database container orders is unhealthy: pg_isready failed 10 time(s) in a row" });
    const res = await starting;
    expect(res.status).toBe(502);
    const failed = await detail(db.uuid);
    expect(failed).toMatchObject({ status: "exited", last_error: "database container orders is unhealthy: pg_isready failed 10 time(s) in a row", last_error_at: expect.stringMatching(ISO) });
    expect(Date.parse(failed.last_error_at)).toBeGreaterThanOrEqual(before - 1000);
    expect(await listed(db.uuid)).toMatchObject({ last_error: failed.last_error, last_error_at: failed.last_error_at });
    // Viewers see it too (it is a reason, with no secret in it).
    const viewer = await t.newMember(w.team.teamId, "viewer");
    expect((await t.api(viewer.token).get(`/databases/${db.uuid}`)).body.last_error).toBe(failed.last_error);

    const retry = w.api.post(`/databases/${db.uuid}/start`);
    await answerJob(agent, "db.deploy", deployed(db.uuid));
    expect((await retry).status).toBe(200);
    expect(await detail(db.uuid)).toMatchObject({ status: "running:healthy", last_error: null, last_error_at: null });
    expect(await listed(db.uuid)).toMatchObject({ last_error: null, last_error_at: null });
  });

  it("failed stop and restart are recorded too; a successful stop clears them", async () => {
    const db = await started(w, agent, "redis");
    const stopping = w.api.post(`/databases/${db.uuid}/stop`);
    await answerJob(agent, "db.action", { error: "stopping container failed: engine timeout" });
    expect((await stopping).status).toBe(502);
    expect(await detail(db.uuid)).toMatchObject({ status: "running:healthy", last_error: "stopping container failed: engine timeout" });

    const restarting = w.api.post(`/databases/${db.uuid}/restart`);
    await answerJob(agent, "db.deploy", { error: "image redis:7-alpine: pull access denied" });
    expect((await restarting).status).toBe(502);
    expect((await detail(db.uuid)).last_error).toBe("image redis:7-alpine: pull access denied");

    const stopped = w.api.post(`/databases/${db.uuid}/stop`);
    await answerJob(agent, "db.action", { result: { status: "exited" } });
    expect((await stopped).status).toBe(200);
    expect(await detail(db.uuid)).toMatchObject({ status: "exited", last_error: null, last_error_at: null });
  });

  it("create with instant_deploy and PATCH re-deploys: their failures show on the database", async () => {
    const created = await ok(w.api.post("/databases/postgresql", { ...placement(w), name: "instant" }), "create");
    await answerJob(agent, "db.deploy", { error: "port 5432 of the network capstan: address already in use" });
    await until(async () => (await detail(created.uuid)).last_error !== null);
    expect(await detail(created.uuid)).toMatchObject({ status: "exited", last_error: "port 5432 of the network capstan: address already in use" });

    const db = await started(w, agent);
    const patched = await w.api.patch(`/databases/${db.uuid}`, { image: "postgres:16-alpine" });
    expect(patched.body.message).toBe("Database updated; its container is being recreated with the new settings.");
    await answerJob(agent, "db.deploy", { error: "image postgres:16-alpine not found" });
    await until(async () => (await detail(db.uuid)).last_error !== null);
    // The old container keeps serving as far as the engine told: the status is the engine's, not the job's.
    expect(await detail(db.uuid)).toMatchObject({ status: "running:healthy", last_error: "image postgres:16-alpine not found", image: "postgres:16-alpine" });
  });

  it("a start answered 202 that fails later: the failure shows on the database", async () => {
    const db = await createDb(w, "redis");
    const svc = t.instance.services.databases;
    svc.actionWaitMs = 200;
    try {
      const res = await w.api.post(`/databases/${db.uuid}/start`);
      expect(res.status).toBe(202);
      expect(await detail(db.uuid)).toMatchObject({ status: "exited", last_error: null });
      await answerJob(agent, "db.deploy", { error: "database container is unhealthy: redis-cli ping failed" });
      await until(async () => (await detail(db.uuid)).last_error === "database container is unhealthy: redis-cli ping failed");
      expect((await detail(db.uuid)).status).toBe("exited");
    } finally {
      svc.actionWaitMs = 30_000;
    }
  });

  it("the reason is bounded and never shows the database's passwords", async () => {
    const db = await createDb(w, "mariadb", { mariadb_password: "user-secret-123", mariadb_root_password: "root-secret-456" });
    const starting = w.api.post(`/databases/${db.uuid}/start`);
    const long = `init failed for root-secret-456 and user-secret-123: ${"x".repeat(5000)}`;
    await answerJob(agent, "db.deploy", { error: long });
    expect((await starting).status).toBe(502);
    const { last_error } = await detail(db.uuid);
    expect(last_error.length).toBe(2000);
    expect(last_error.startsWith("init failed for ******** and ********: xxx")).toBe(true);
    expect(last_error.endsWith("x…")).toBe(true);
    expect(last_error).not.toMatch(/secret/);
  });

  it("a job the agent takes and never finishes fails at its deadline: the database records why", async () => {
    const db = await createDb(w, "redis");
    const svc = t.instance.services.databases;
    svc.actionWaitMs = 200;
    try {
      // The agent takes the job and never answers: the deadline passes (moved, not waited for).
      expect((await w.api.post(`/databases/${db.uuid}/start`)).status).toBe(202);
      const job = await agent.nextJob(10_000);
      expect(job.type).toBe("db.deploy");
      await prisma().job.update({ where: { id: job.id }, data: { deadlineAt: new Date(Date.now() - 1000) } });
      await until(async () => (await detail(db.uuid)).last_error !== null);
      expect(await detail(db.uuid)).toMatchObject({ status: "exited", last_error: "deadline exceeded: the agent did not finish the job in time" });
      // The agent is told to stop it.
      expect(await agent.nextCancel(10_000)).toBe(job.id);
    } finally {
      svc.actionWaitMs = 30_000;
    }
  });
});

describe("last error: agent away", () => {
  it("create with instant_deploy while the agent is away: the job fails at its deadline, on the database", async () => {
    const w = await appWorld(t, keys);
    const created = await ok(w.api.post("/databases/redis", { ...placement(w), name: "waiting" }), "create");
    const job = await prisma().job.findFirstOrThrow({ where: { type: "db.deploy", server: { uuid: w.server.uuid } } });
    expect(job.status).toBe("queued");
    await prisma().job.update({ where: { id: job.id }, data: { deadlineAt: new Date(Date.now() - 1000) } });
    await until(async () => (await w.api.get(`/databases/${created.uuid}`)).body.last_error !== null);
    expect((await w.api.get(`/databases/${created.uuid}`)).body).toMatchObject({
      status: "exited",
      last_error: "deadline exceeded: the server's agent was not connected",
      last_error_at: expect.stringMatching(ISO),
    });
    expect((await prisma().job.findUniqueOrThrow({ where: { id: job.id } })).status).toBe("failed");

    // Once the agent is back, a start that succeeds clears it.
    const agent = await connectServerAgent(t, w);
    agents.push(agent);
    const starting = w.api.post(`/databases/${created.uuid}/start`);
    await answerJob(agent, "db.deploy", deployed(created.uuid));
    expect((await starting).status).toBe(200);
    expect((await w.api.get(`/databases/${created.uuid}`)).body).toMatchObject({ status: "running:healthy", last_error: null, last_error_at: null });
  });
});

describe("PATCH", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("name and description change without touching the container", async () => {
    const db = await started(w, agent);
    const jobs = await jobCount(prisma());
    const res = await w.api.patch(`/databases/${db.uuid}`, { name: "renamed", description: "primary" });
    expect(res.status).toBe(200);
    expect(res.body.message).toBe("Database updated.");
    expect(res.body.data).toMatchObject({ uuid: db.uuid, name: "renamed", description: "primary", status: "running:healthy" });
    expect(await jobCount(prisma())).toBe(jobs);
  });

  it("limits, image and the published port of a running database recreate it (db.deploy with the new settings)", async () => {
    const db = await started(w, agent);
    const res = await w.api.patch(`/databases/${db.uuid}`, { limits_memory: "1g", limits_cpus: "2", image: "postgres:16-alpine" });
    expect(res.status).toBe(200);
    expect(res.body.message).toBe("Database updated; its container is being recreated with the new settings.");
    expect(res.body.data).toMatchObject({ limits_memory: "1g", limits_cpus: "2", image: "postgres:16-alpine" });
    const job = await answerJob(agent, "db.deploy", deployed(db.uuid));
    expect(job.payload).toMatchObject({ image: "postgres:16-alpine", memory: "1g", cpus: "2", public_port: null });

    const open = await w.api.patch(`/databases/${db.uuid}`, { is_public: true, public_port: 45432 });
    expect(open.body.data).toMatchObject({ is_public: true, public_port: 45432, external_db_url: expect.stringContaining("@10.0.0.5:45432/") });
    expect((await answerJob(agent, "db.deploy", deployed(db.uuid))).payload).toMatchObject({ public_port: 45432 });

    // Closing it really unpublishes: the next container has no public port; the port is remembered.
    const close = await w.api.patch(`/databases/${db.uuid}`, { is_public: false });
    expect(close.body.data).toMatchObject({ is_public: false, public_port: 45432, external_db_url: null });
    expect((await answerJob(agent, "db.deploy", deployed(db.uuid))).payload).toMatchObject({ public_port: null });

    // Values that do not change do not recreate it.
    const jobs = await jobCount(prisma());
    expect((await w.api.patch(`/databases/${db.uuid}`, { limits_memory: "1g", is_public: false })).body.message).toBe("Database updated.");
    expect(await jobCount(prisma())).toBe(jobs);
  });

  it("a stopped database keeps its changes for its next start", async () => {
    const db = await createDb(w);
    const jobs = await jobCount(prisma());
    const res = await w.api.patch(`/databases/${db.uuid}`, { limits_memory: "256m" });
    expect(res.body.message).toBe("Database updated.");
    expect(await jobCount(prisma())).toBe(jobs);
    const starting = w.api.post(`/databases/${db.uuid}/start`);
    expect((await answerJob(agent, "db.deploy", deployed(db.uuid))).payload).toMatchObject({ memory: "256m" });
    expect((await starting).status).toBe(200);
  });

  it("refuses bad input with 422 and changes nothing", async () => {
    const db = await createDb(w, "postgresql", { name: "stable" });
    const before = await prisma().standaloneDatabase.findUniqueOrThrow({ where: { uuid: db.uuid } });
    for (const [body, field] of [
      [{}, "body"],
      [{ postgres_password: "new-password-1" }, "body"],
      [{ is_public: true }, "public_port"],
      [{ public_port: 80 }, "public_port"],
      [{ image: "not an image" }, "image"],
      [{ limits_cpus: "-1" }, "limits_cpus"],
      [{ name: "" }, "name"],
    ] as const) {
      const res = await w.api.patch(`/databases/${db.uuid}`, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(Object.keys(res.body.errors), JSON.stringify(res.body)).toContain(field);
    }
    const open = await w.api.patch(`/databases/${db.uuid}`, { is_public: true, public_port: 45999 });
    expect(open.status).toBe(200);
    const nullPort = await w.api.patch(`/databases/${db.uuid}`, { public_port: null });
    expect(nullPort.status).toBe(422);
    expect(nullPort.body.errors.public_port).toEqual(["Cannot be null while the database is public."]);
    const after = await prisma().standaloneDatabase.findUniqueOrThrow({ where: { uuid: db.uuid } });
    expect({ ...after, isPublic: before.isPublic, publicPort: before.publicPort, updatedAt: before.updatedAt }).toEqual(before);
  });
});

describe("DELETE", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("defaults: the container and the image go, the volume stays; the record and its variables are gone", async () => {
    const db = await started(w, agent, "redis", { name: "doomed" });
    await ok(w.api.post(`/databases/${db.uuid}/envs`, { key: "A", value: "1" }), "env");
    const res = await w.api.delete(`/databases/${db.uuid}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Database deleted; its container is being removed from the server (its data volume is kept)." });
    const job = await answerJob(agent, "db.action", { result: { status: "removed" } });
    expect(job.payload).toEqual({ db: { uuid: db.uuid, name: "doomed" }, action: "remove", delete_volumes: false, docker_cleanup: true });
    expect((await w.api.get(`/databases/${db.uuid}`)).status).toBe(404);
    expect(await prisma().envVar.count({ where: { key: "A", database: { uuid: db.uuid } } })).toBe(0);
    expect(await prisma().standaloneDatabase.count({ where: { uuid: db.uuid } })).toBe(0);
  });

  it("flags in the query string or the body", async () => {
    const a = await createDb(w);
    expect((await w.api.delete(`/databases/${a.uuid}?delete_volumes=true&docker_cleanup=false`)).body.message).toMatch(/with its data volume/);
    expect((await answerJob(agent, "db.action", { result: { status: "removed" } })).payload).toMatchObject({ delete_volumes: true, docker_cleanup: false });
    const b = await createDb(w);
    expect((await w.api.delete(`/databases/${b.uuid}`, { delete_volumes: true })).status).toBe(200);
    expect((await answerJob(agent, "db.action", { result: { status: "removed" } })).payload).toMatchObject({ db: { uuid: b.uuid }, delete_volumes: true, docker_cleanup: true });
  });

  it("delete_configurations=false still removes the container (a database keeps no configuration files); volume and image as asked; bad bodies are 422", async () => {
    const db = await createDb(w);
    expect((await w.api.delete(`/databases/${db.uuid}?delete_volumes=true`, { delete_volumes: false })).status).toBe(422);
    expect((await w.api.delete(`/databases/${db.uuid}`, { purge: true })).status).toBe(422);
    expect((await w.api.get(`/databases/${db.uuid}`)).status).toBe(200);
    const res = await w.api.delete(`/databases/${db.uuid}?delete_configurations=false`);
    expect(res.body).toEqual({ message: "Database deleted; its container is being removed from the server (its data volume is kept)." });
    const job = await answerJob(agent, "db.action", { result: { status: "removed" } });
    expect(job.payload).toEqual({ db: { uuid: db.uuid, name: db.name }, action: "remove", delete_volumes: false, docker_cleanup: true });
    expect((await w.api.get(`/databases/${db.uuid}`)).status).toBe(404);
    // Volumes with it, which used to be refused: the container goes either way.
    const other = await createDb(w);
    expect((await w.api.delete(`/databases/${other.uuid}`, { delete_configurations: false, delete_volumes: true, docker_cleanup: false })).status).toBe(200);
    expect((await answerJob(agent, "db.action", { result: { status: "removed" } })).payload).toMatchObject({ db: { uuid: other.uuid }, delete_volumes: true, docker_cleanup: false });
  });

  it("a server with databases cannot be removed (409)", async () => {
    const other = await appWorld(t, keys);
    const db = await createDb(other);
    const res = await other.api.delete(`/servers/${other.server.uuid}`);
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ message: "Server web has 1 database(s); delete them or their environments first." });
    await ok(other.api.delete(`/databases/${db.uuid}?delete_configurations=false`), "delete db");
    expect((await other.api.delete(`/servers/${other.server.uuid}`)).status).toBe(200);
  });

  it("deleting an environment or a project removes its databases' containers (volumes kept)", async () => {
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "qa" }), "env");
    const inQa = await createDb(w, "redis", { environment_name: "qa", name: "qa-cache" });
    const inProd = await createDb(w, "redis", { name: "prod-cache" });
    await ok(w.api.delete(`/projects/${w.project.uuid}/environments/qa`), "delete env");
    const job = await answerJob(agent, "db.action", { result: { status: "removed" } });
    expect(job.payload).toEqual({ db: { uuid: inQa.uuid, name: "qa-cache" }, action: "remove", delete_volumes: false, docker_cleanup: true });
    expect((await w.api.get(`/databases/${inQa.uuid}`)).status).toBe(404);
    expect((await w.api.get(`/databases/${inProd.uuid}`)).status).toBe(200);

    const project = await ok(w.api.post("/projects", { name: "temp" }), "project");
    const place = { project_uuid: project.uuid, environment_name: "production", server_uuid: w.server.uuid, destination_uuid: w.server.destinationUuid, instant_deploy: false };
    const p1 = await ok(w.api.post("/databases/postgresql", { ...place, name: "p1" }), "db");
    const p2 = await ok(w.api.post("/databases/mongodb", { ...place, name: "p2" }), "db");
    await ok(w.api.delete(`/projects/${project.uuid}`), "delete project");
    const removed = [await answerJob(agent, "db.action", { result: { status: "removed" } }), await answerJob(agent, "db.action", { result: { status: "removed" } })];
    expect(removed.map((j) => (j.payload as any).db.uuid).sort()).toEqual([p1.uuid, p2.uuid].sort());
    expect(removed.every((j) => (j.payload as any).action === "remove" && (j.payload as any).delete_volumes === false)).toBe(true);
    expect(await prisma().standaloneDatabase.count({ where: { uuid: { in: [p1.uuid, p2.uuid] } } })).toBe(0);
  });
});

describe("environment variables", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("create, list (values to managers only), bulk, delete; values reach the container on restart", async () => {
    const db = await started(w, agent);
    const created = await w.api.post(`/databases/${db.uuid}/envs`, { key: "PGTZ", value: "UTC" });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toEqual({
      message: "Environment variable created.",
      // The new variable's uuid also at the top, where Coolify's clients read it (docs/compatibility.md).
      uuid: created.body.data.uuid,
      // The .../envs answers follow GET's rule (issue 15): the owner reads the value.
      data: { uuid: expect.stringMatching(UUID), key: "PGTZ", value: "UTC", created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO) },
    });
    const dup = await w.api.post(`/databases/${db.uuid}/envs`, { key: "PGTZ", value: "CET" });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toMatch(/PATCH \.\.\.\/envs\/bulk/);

    const bulk = await w.api.patch(`/databases/${db.uuid}/envs/bulk`, { variables: [{ key: "PGTZ", value: "Europe/Paris" }, { key: "SECRET_TOKEN", value: "s3cr3t" }] });
    expect(bulk.status).toBe(200);
    expect(bulk.body.data.map((e: any) => [e.key, e.value])).toEqual([["PGTZ", "Europe/Paris"], ["SECRET_TOKEN", "s3cr3t"]]);
    // A write-only token cannot read them: its mutation's answer masks them as GET would refuse them.
    const writeOnly = t.api((await t.newMember(w.team.teamId, "owner", ["write"])).token);
    const masked0 = await writeOnly.patch(`/databases/${db.uuid}/envs/bulk`, { variables: [{ key: "SECRET_TOKEN", value: "s3cr3t" }] });
    expect(masked0.status).toBe(200);
    expect(masked0.body.data.map((e: any) => [e.key, e.value])).toEqual([["SECRET_TOKEN", null]]);
    const created0 = await writeOnly.post(`/databases/${db.uuid}/envs`, { key: "WRITE_ONLY", value: "w" });
    expect(created0.body.data).toMatchObject({ key: "WRITE_ONLY", value: null });
    expect((await w.api.delete(`/databases/${db.uuid}/envs/${created0.body.data.uuid}`)).status).toBe(200);
    const list = await w.api.get(`/databases/${db.uuid}/envs`);
    expect(list.body.data.map((e: any) => [e.key, e.value])).toEqual([["PGTZ", "Europe/Paris"], ["SECRET_TOKEN", "s3cr3t"]]);
    expect(list.body.data[0].uuid).toBe(created.body.data.uuid);

    const viewer = await t.newMember(w.team.teamId, "viewer");
    const masked = await t.api(viewer.token).get(`/databases/${db.uuid}/envs`);
    expect(masked.body.data.map((e: any) => e.value)).toEqual([null, null]);
    expect(JSON.stringify((await w.api.get(`/databases/${db.uuid}`)).body)).not.toContain("s3cr3t");
    expect((await t.api(viewer.token).post(`/databases/${db.uuid}/envs`, { key: "X", value: "y" })).status).toBe(403);

    const restarting = w.api.post(`/databases/${db.uuid}/restart`);
    const job = await answerJob(agent, "db.deploy", deployed(db.uuid));
    expect((job.payload as any).env).toEqual({ PGTZ: "Europe/Paris", SECRET_TOKEN: "s3cr3t" });
    expect((await restarting).status).toBe(200);

    const del = await w.api.delete(`/databases/${db.uuid}/envs/${created.body.data.uuid}`);
    expect(del.body).toEqual({ message: "Environment variable deleted." });
    expect((await w.api.get(`/databases/${db.uuid}/envs`)).body.data.map((e: any) => e.key)).toEqual(["SECRET_TOKEN"]);
    expect((await w.api.delete(`/databases/${db.uuid}/envs/${created.body.data.uuid}`)).status).toBe(404);
  });

  it("refuses bad variables, application-only fields and duplicates in a bulk, all or nothing", async () => {
    const db = await createDb(w);
    for (const body of [{ key: "1BAD", value: "x" }, { key: "OK", value: "x", is_build_time: true }, { key: "OK", value: "nul\u0000" }, { key: "OK" }]) {
      expect((await w.api.post(`/databases/${db.uuid}/envs`, body)).status, JSON.stringify(body)).toBe(422);
    }
    const bulk = await w.api.patch(`/databases/${db.uuid}/envs/bulk`, { variables: [{ key: "A", value: "1" }, { key: "A", value: "2" }] });
    expect(bulk.status).toBe(422);
    expect(bulk.body.errors).toEqual({ "variables.1.key": ["A is listed twice."] });
    expect((await w.api.patch(`/databases/${db.uuid}/envs/bulk`, { variables: [{ key: "B", value: "1", is_preview: true }] })).status).toBe(422);
    expect((await w.api.get(`/databases/${db.uuid}/envs`)).body.data).toEqual([]);
  });

  it("a variable of another database, or of an application, is not found through this one", async () => {
    const a = await createDb(w);
    const b = await createDb(w);
    const envOfB = (await ok(w.api.post(`/databases/${b.uuid}/envs`, { key: "B", value: "1" }), "env")).data.uuid;
    const app = await createImageApp(w);
    const envOfApp = (await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "APP", value: "1" }), "env")).data.uuid;
    for (const env of [envOfB, envOfApp]) {
      const res = await w.api.delete(`/databases/${a.uuid}/envs/${env}`);
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: "Environment variable not found." });
    }
    expect((await w.api.get(`/databases/${b.uuid}/envs`)).body.data.length).toBe(1);
    expect((await w.api.get(`/applications/${app.uuid}/envs`)).body.data.length).toBe(1);
  });
});

describe("the server's resources", () => {
  it("databases have the spec's type standalone-<engine> (from their records); applications stay application; containers without a record are not resources", async () => {
    const { w, agent } = await newConnectedWorld();
    const pg = await createDb(w, "postgresql", { name: "pg" });
    const kv = await createDb(w, "redis", { name: "kv" });
    const web = await createImageApp(w, { name: "web", fqdn: "https://web.example.test" });
    // What the agent labels (agent/src/databases/spec.ts dbLabels; applications: deploy/labels).
    const labelled = (uuid: string, name: string, type: string, extra: Record<string, string> = {}) => ({
      "capstan.managed": "true",
      "capstan.resource.uuid": uuid,
      "capstan.resource.name": name,
      "capstan.resource.type": type,
      "capstan.domains": "",
      ...extra,
    });
    const containers = [
      { id: "c1", name: pg.uuid, image: "postgres:17-alpine", status: "running:healthy", labels: labelled(pg.uuid, "pg", "database", { "capstan.database.engine": "postgresql" }) },
      { id: "c2", name: kv.uuid, image: "redis:7-alpine", status: "exited", labels: labelled(kv.uuid, "kv", "database", { "capstan.database.engine": "redis" }) },
      { id: "c3", name: "web-1", image: "nginx", status: "running:unknown", labels: labelled(web.uuid, "web", "application", { "capstan.domains": "web.example.test", "capstan.database.engine": "mysql" }) },
      // Not made by the platform's agent, or left behind: no record, so no resource of the server.
      { id: "c4", name: "odd", image: "x", status: "running:unknown", labels: labelled("odd-uuid", "odd", "database", { "capstan.database.engine": "oracle" }) },
    ];
    await prisma().standaloneDatabase.update({ where: { uuid: pg.uuid }, data: { status: "running:healthy" } });
    await prisma().application.update({ where: { uuid: web.uuid }, data: { status: "running:unknown" } });
    agent.serve("containers.list", () => ({ ok: true, result: { containers } }));
    const res = await w.api.get(`/servers/${w.server.uuid}/resources`);
    expect(res.status).toBe(200);
    const fresh = { stale: false, last_seen_at: expect.stringMatching(ISO), project_uuid: w.project.uuid, environment_name: "production" };
    expect(res.body.data).toEqual([
      { uuid: web.uuid, name: "web", type: "application", status: "running:unknown", ...fresh },
      { uuid: pg.uuid, name: "pg", type: "standalone-postgresql", status: "running:healthy", ...fresh },
      { uuid: kv.uuid, name: "kv", type: "standalone-redis", status: "exited", ...fresh },
    ]);
    expect((await w.api.get(`/servers/${w.server.uuid}/domains`)).body.data).toEqual([
      { domain: "web.example.test", resource_uuid: web.uuid, resource_name: "web", resource_type: "application", routed: true, stale: false, last_seen_at: expect.stringMatching(ISO) },
    ]);
  });
});

describe("status from the agent's reports", () => {
  it("updates databases reported by type, marks missing ones exited on a full report, and tells the fleet", async () => {
    const { w, agent } = await newConnectedWorld();
    const a = await started(w, agent, "redis");
    const b = await started(w, agent);
    const app = await createImageApp(w);
    const other = await appWorld(t, keys);
    const foreign = await createDb(other);
    const fleet = await connectFleet(t.url, w.team.token);
    const events: any[] = [];
    fleet.on(EV.resourceStatus, (e: unknown) => events.push(e));
    try {
      // A partial report: only what changed. A uuid of another server is ignored.
      agent.socket.emit(EV.resourceStatus, {
        full: false,
        resources: [
          { uuid: a.uuid, type: "database", status: "running:unhealthy" },
          { uuid: foreign.uuid, type: "database", status: "running:healthy" },
          { uuid: app.uuid, type: "application", status: "running:healthy" },
        ],
      });
      await until(async () => (await statusOf(w, a.uuid)) === "running:unhealthy");
      expect(await statusOf(w, b.uuid)).toBe("running:healthy");
      expect((await w.api.get(`/applications/${app.uuid}`)).body.status).toBe("running:healthy");
      expect((await other.api.get(`/databases/${foreign.uuid}`)).body.status).toBe("exited");
      await until(async () => events.some((e) => e.uuid === a.uuid));
      expect(events.find((e) => e.uuid === a.uuid)).toEqual({ uuid: a.uuid, type: "database", status: "running:unhealthy", server_uuid: w.server.uuid, at: expect.stringMatching(ISO) });

      // A full report without b: b has no container left.
      agent.socket.emit(EV.resourceStatus, { full: true, resources: [{ uuid: a.uuid, type: "database", status: "running:healthy" }] });
      await until(async () => (await statusOf(w, b.uuid)) === "exited");
      expect(await statusOf(w, a.uuid)).toBe("running:healthy");
      expect((await w.api.get(`/applications/${app.uuid}`)).body.status).toBe("exited");
      // A database reported with the application type is not touched (types are kept apart).
      agent.socket.emit(EV.resourceStatus, { full: false, resources: [{ uuid: a.uuid, type: "application", status: "paused" }] });
      agent.socket.emit(EV.resourceStatus, { full: false, resources: [{ uuid: b.uuid, type: "database", status: "running:starting" }] });
      await until(async () => (await statusOf(w, b.uuid)) === "running:starting");
      expect(await statusOf(w, a.uuid)).toBe("running:healthy");
    } finally {
      fleet.close();
    }
  });

  it("a full report of a quiet server with many databases is a constant number of queries", async () => {
    const { w, agent } = await newConnectedWorld();
    const uuids: string[] = [];
    for (let i = 0; i < 30; i++) uuids.push((await createDb(w, "redis")).uuid);
    const { applyStatusReport } = await import("../../control-plane/src/agents/resource-status.js");
    const server = await prisma().server.findUniqueOrThrow({ where: { uuid: w.server.uuid } });
    const report = { full: true, resources: uuids.map((uuid) => ({ uuid, type: "database", status: "running:healthy" })) };
    const queries: string[] = [];
    const spy = new Proxy(prisma(), {
      get(target, prop, recv) {
        const model = Reflect.get(target, prop, recv);
        if (typeof prop !== "string" || typeof model !== "object" || model === null || prop.startsWith("$")) return model;
        return new Proxy(model, {
          get(m, op) {
            const fn = Reflect.get(m, op);
            return typeof fn === "function" ? (...args: unknown[]) => (queries.push(`${prop}.${String(op)}`), fn.apply(m, args)) : fn;
          },
        });
      },
    });
    const first = await applyStatusReport(spy as never, { id: server.id, uuid: server.uuid }, report);
    expect(first.length).toBe(30);
    expect(queries.filter((q) => q.startsWith("standaloneDatabase.")).sort()).toEqual(["standaloneDatabase.findMany", "standaloneDatabase.updateMany"]);
    queries.length = 0;
    const second = await applyStatusReport(spy as never, { id: server.id, uuid: server.uuid }, report);
    expect(second).toEqual([]);
    // services lifecycle (issue 17): services (with their components) are one more read.
    expect(queries.sort()).toEqual(["application.findMany", "service.findMany", "standaloneDatabase.findMany"]);
    agent.close();
  });
});
