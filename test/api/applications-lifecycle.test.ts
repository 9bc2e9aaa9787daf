import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import type { TestInstance } from "./harness.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { lifecycleFile } from "./support/lifecycle.js";
import { answerNext, appWorld, createImageApp, markDeployed, ok, placement, until, type AppWorld } from "./support/applications.js";

let t: TestInstance;
const { keys, connectedWorld: newConnectedWorld } = lifecycleFile((started) => (t = started));

const PROXY = { name: "capstan-proxy", image: "capstan/proxy:latest", networks: ["capstan"], ensure_networks: [], http_port: 80, https_port: 443, ownership: { generation: expect.any(Number), projects: [] } };

async function openDeployment(appUuid: string, status: "queued" | "in_progress" = "in_progress") {
  const db = t.instance.database.prisma;
  const app = await db.application.findUniqueOrThrow({ where: { uuid: appUuid } });
  return db.deployment.create({
    data: { uuid: randomUUID(), teamId: app.teamId, applicationId: app.id, serverId: app.serverId, status, trigger: "api" },
  });
}

describe("without a connected agent", () => {
  it("start/stop/restart and logs answer 503 with the reason; nothing is queued", async () => {
    const w = await appWorld(t, keys);
    const app = await createImageApp(w);
    await markDeployed(t, app.uuid);
    const db = t.instance.database.prisma;
    const before = await db.job.count({ where: { type: { in: ["app.action", "app.logs"] } } });
    for (const action of ["start", "stop", "restart"]) {
      const res = await w.api.post(`/applications/${app.uuid}/${action}`);
      expect(res.status, action).toBe(503);
      expect(res.body).toEqual({ message: "Server web is unreachable: its agent is not connected." });
    }
    const logs = await w.api.get(`/applications/${app.uuid}/logs`);
    expect(logs.status).toBe(503);
    expect(await db.job.count({ where: { type: { in: ["app.action", "app.logs"] } } })).toBe(before);
  });
});

describe("start, stop, restart through the agent", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("refuses to restart an application that was never deployed (stop is allowed; start deploys it: compatibility.test.ts)", async () => {
    const app = await createImageApp(w);
    const res = await w.api.post(`/applications/${app.uuid}/restart`);
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/not been deployed yet/);
    const stopping = w.api.post(`/applications/${app.uuid}/stop`);
    await answerNext(agent, "app.action", { result: { status: "exited" } });
    expect((await stopping).status).toBe(200);
  });

  it("sends the action with the proxy settings, answers with the new status and stores it", async () => {
    const app = await createImageApp(w, { name: "api" });
    await markDeployed(t, app.uuid);
    const starting = w.api.post(`/applications/${app.uuid}/start`);
    const job = await answerNext(agent, "app.action", { result: { status: "running:healthy" } });
    expect(job.payload).toEqual({ app: { uuid: app.uuid, name: "api" }, action: "start", delete_volumes: false, docker_cleanup: false, proxy: PROXY });
    const res = await starting;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ message: "Application started.", status: "running:healthy" });
    expect((await w.api.get(`/applications/${app.uuid}`)).body.status).toBe("running:healthy");
    expect((await w.api.get("/applications")).body.data.find((a: any) => a.uuid === app.uuid).status).toBe("running:healthy");

    const restarting = w.api.post(`/applications/${app.uuid}/restart`);
    expect((await answerNext(agent, "app.action", { result: { status: "running:starting" } })).payload).toMatchObject({ action: "restart" });
    expect((await restarting).body).toEqual({ message: "Application restarted.", status: "running:starting" });

    const stopping = w.api.post(`/applications/${app.uuid}/stop`);
    expect((await answerNext(agent, "app.action", { result: { status: "exited" } })).payload).toMatchObject({ action: "stop" });
    expect((await stopping).body).toEqual({ message: "Application stopped.", status: "exited" });
    expect((await w.api.get(`/applications/${app.uuid}`)).body.status).toBe("exited");
  });

  it("reports the agent's failure reason as 502 and keeps the status", async () => {
    const app = await createImageApp(w, { name: "fails" });
    await markDeployed(t, app.uuid);
    const starting = w.api.post(`/applications/${app.uuid}/start`);
    await answerNext(agent, "app.action", { error: "no container of the application exists on this server" });
    const res = await starting;
    expect(res.status).toBe(502);
    expect(res.body).toEqual({ message: "Starting fails failed: no container of the application exists on this server" });
    expect((await w.api.get(`/applications/${app.uuid}`)).body.status).toBe("exited");
  });

  it("answers 202 when the agent takes longer than the wait, and stores the status when it answers", async () => {
    const app = await createImageApp(w, { name: "slow" });
    await markDeployed(t, app.uuid);
    const svc = t.instance.services.applications;
    svc.actionWaitMs = 300;
    try {
      const res = await w.api.post(`/applications/${app.uuid}/restart`);
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ message: expect.stringMatching(/still at it/), status: "exited" });
      await answerNext(agent, "app.action", { result: { status: "running:healthy" } });
      await until(async () => (await w.api.get(`/applications/${app.uuid}`)).body.status === "running:healthy");
    } finally {
      svc.actionWaitMs = 30_000;
    }
  });

  it("409 while a deployment is queued or in progress", async () => {
    const app = await createImageApp(w);
    await markDeployed(t, app.uuid);
    await openDeployment(app.uuid, "queued");
    for (const action of ["start", "stop", "restart"]) {
      const res = await w.api.post(`/applications/${app.uuid}/${action}`);
      expect(res.status).toBe(409);
      expect(res.body.message).toMatch(/deployment queued or in progress/);
    }
    expect((await w.api.delete(`/applications/${app.uuid}`)).status).toBe(409);
    expect((await w.api.get(`/applications/${app.uuid}`)).status).toBe(200);
  });

  it("lists the recent deployments, newest first, at most 10", async () => {
    const app = await createImageApp(w);
    for (let i = 0; i < 12; i++) await markDeployed(t, app.uuid);
    const detail = (await w.api.get(`/applications/${app.uuid}`)).body;
    expect(detail.deployments).toHaveLength(10);
    const newest = await t.instance.database.prisma.deployment.findMany({ where: { application: { uuid: app.uuid } }, orderBy: { id: "desc" }, take: 10 });
    expect(detail.deployments.map((d: { uuid: string }) => d.uuid)).toEqual(newest.map((d) => d.uuid));
    expect(detail.deployments[0]).toEqual({
      uuid: expect.any(String),
      status: "finished",
      trigger: "api",
      commit: null,
      commit_message: null,
      branch: null,
      created_at: expect.any(String),
      started_at: expect.any(String),
      finished_at: expect.any(String),
    });
  });
});

describe("logs", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("asks the agent for since/tail (defaults 600 s, 100 lines) and returns the lines", async () => {
    const app = await createImageApp(w, { name: "web" });
    const lines = ["2026-11-22T10:00:00.000000000Z listening on :80", "2026-11-22T10:00:01.000000000Z GET / 200"];
    const reading = w.api.get(`/applications/${app.uuid}/logs`);
    const job = await answerNext(agent, "app.logs", { result: { container: `${app.uuid}-abc`, lines, truncated: false } });
    // secrets: its variables' values (none here), for the agent to mask (issue 15, item 6)
    expect(job.payload).toEqual({ app: { uuid: app.uuid, name: "web" }, since_s: 600, tail: 100, secrets: [] });
    const res = await reading;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ container: `${app.uuid}-abc`, logs: lines.join("\n") + "\n", truncated: false });

    const custom = w.api.get(`/applications/${app.uuid}/logs`, { since: 60, tail: 5 });
    expect((await answerNext(agent, "app.logs", { result: { container: null, lines: [], truncated: false } })).payload).toMatchObject({ since_s: 60, tail: 5 });
    expect((await custom).body).toEqual({ container: null, logs: "", truncated: false });
  });

  it("422 for bad since/tail, 502 with the agent's reason", async () => {
    const app = await createImageApp(w);
    const bad: Record<string, string | number>[] = [{ since: -1 }, { since: "1e3" }, { tail: 0 }, { tail: 10_001 }, { tail: "abc" }, { since: 30 * 24 * 3600 + 1 }];
    for (const q of bad) {
      const res = await w.api.get(`/applications/${app.uuid}/logs`, q);
      expect(res.status, JSON.stringify(q)).toBe(422);
      expect(Object.keys(res.body.errors)).toEqual(Object.keys(q));
    }
    const reading = w.api.get(`/applications/${app.uuid}/logs`);
    await answerNext(agent, "app.logs", { error: "engine: connection refused" });
    const res = await reading;
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(/engine: connection refused/);
  });
});

describe("deleting applications, environments, projects, servers and keys", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await newConnectedWorld());
  });

  it("DELETE sends a remove job with the flags; the agent gets it", async () => {
    const app = await createImageApp(w, { name: "bye" });
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "A", value: "1" }), "env");
    await ok(w.api.post(`/applications/${app.uuid}/storages`, { name: "data", mount_path: "/data" }), "storage");
    const res = await w.api.delete(`/applications/${app.uuid}?delete_volumes=true`);
    expect(res.status).toBe(200);
    const job = await answerNext(agent, "app.action", { result: { status: "removed" } });
    expect(job.payload).toEqual({ app: { uuid: app.uuid, name: "bye" }, action: "remove", delete_volumes: true, docker_cleanup: true, delete_configurations: true, proxy: PROXY });
    const db = t.instance.database.prisma;
    expect(await db.application.count({ where: { uuid: app.uuid } })).toBe(0);
    // variables and storages went with it
    expect(await db.envVar.count({ where: { application: { uuid: app.uuid } } })).toBe(0);
  });

  it("delete_configurations=false still removes the containers and routes: the job says to keep only the configuration files; every flag reaches the agent as given (issue 15)", async () => {
    const cases = [
      { query: "delete_configurations=false", flags: { delete_configurations: false, delete_volumes: false, docker_cleanup: true } },
      { query: "delete_configurations=false&delete_volumes=true&docker_cleanup=false", flags: { delete_configurations: false, delete_volumes: true, docker_cleanup: false } },
      { query: "docker_cleanup=false", flags: { delete_configurations: true, delete_volumes: false, docker_cleanup: false } },
    ];
    for (const c of cases) {
      const app = await createImageApp(w, { name: "gone", fqdn: "https://gone.example.test" });
      const res = await w.api.delete(`/applications/${app.uuid}?${c.query}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.message).toMatch(/containers are being removed/);
      const job = await answerNext(agent, "app.action", { result: { status: "removed" } });
      expect(job.payload).toEqual({ app: { uuid: app.uuid, name: "gone" }, action: "remove", ...c.flags, proxy: PROXY });
      expect((await w.api.get(`/applications/${app.uuid}`)).status).toBe(404);
    }
  });

  it("deleting an environment removes its applications' containers, and only those", async () => {
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "preview" }), "env");
    const inPreview = await createImageApp(w, { environment_name: "preview", name: "pr-1" });
    const inProduction = await createImageApp(w, { name: "prod-1" });
    const res = await w.api.delete(`/projects/${w.project.uuid}/environments/preview`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const job = await answerNext(agent, "app.action", { result: { status: "removed" } });
    expect(job.payload).toMatchObject({ app: { uuid: inPreview.uuid }, action: "remove", delete_volumes: false, docker_cleanup: true });
    expect((await w.api.get(`/applications/${inPreview.uuid}`)).status).toBe(404);
    expect((await w.api.get(`/applications/${inProduction.uuid}`)).status).toBe(200);
  });

  it("deleting a project removes every application of it; refused while one is deploying", async () => {
    const project = await ok(w.api.post("/projects", { name: "temp" }), "project");
    await ok(w.api.post(`/projects/${project.uuid}/environments`, { name: "qa" }), "env");
    const where = { ...placement(w), project_uuid: project.uuid };
    const a = await ok(w.api.post("/applications/dockerimage", { ...where, docker_registry_image_name: "nginx", name: "a" }), "app a");
    const b = await ok(w.api.post("/applications/dockerimage", { ...where, environment_name: "qa", docker_registry_image_name: "nginx", name: "b" }), "app b");

    const deployment = await openDeployment(b.uuid);
    const refused = await w.api.delete(`/projects/${project.uuid}`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/Application b has a deployment/);
    expect((await w.api.get(`/applications/${a.uuid}`)).status).toBe(200);
    await t.instance.database.prisma.deployment.update({ where: { id: deployment.id }, data: { status: "cancelled" } });

    expect((await w.api.delete(`/projects/${project.uuid}`)).status).toBe(200);
    const removed = [
      (await answerNext(agent, "app.action", { result: { status: "removed" } })).payload,
      (await answerNext(agent, "app.action", { result: { status: "removed" } })).payload,
    ] as { app: { uuid: string }; action: string }[];
    expect(removed.map((p) => p.app.uuid).sort()).toEqual([a.uuid, b.uuid].sort());
    expect(removed.every((p) => p.action === "remove")).toBe(true);
    expect((await w.api.get("/applications")).body.data.some((x: any) => x.uuid === a.uuid || x.uuid === b.uuid)).toBe(false);
  });

  it("a server with applications cannot be removed (409); a deploy key in use cannot be deleted (409)", async () => {
    const world = await appWorld(t, keys);
    const app = await ok(
      world.api.post("/applications/private-deploy-key", {
        ...placement(world),
        private_key_uuid: world.keyUuid,
        git_repository: "git@github.com:acme/api.git",
        git_branch: "main",
        build_pack: "builder_a",
      }),
      "app",
    );
    const server = await world.api.delete(`/servers/${world.server.uuid}`);
    expect(server.status).toBe(409);
    expect(server.body.message).toBe("Server web has 1 application(s); delete them or their environments first.");

    // The server uses the key too: move it to another key first.
    const spare = await keys.generate("ed25519");
    const other = await ok(world.api.post("/security/keys", { name: "spare", private_key: spare.privateKey }), "spare key");
    await ok(world.api.patch(`/servers/${world.server.uuid}`, { private_key_uuid: other.uuid }), "move server");
    const key = await world.api.delete(`/security/keys/${world.keyUuid}`);
    expect(key.status).toBe(409);
    expect(key.body.message).toBe("This key is the deploy key of 1 application(s); delete them first.");

    expect((await world.api.delete(`/applications/${app.uuid}`)).status).toBe(200);
    expect((await world.api.delete(`/security/keys/${world.keyUuid}`)).status).toBe(200);
    expect((await world.api.delete(`/servers/${world.server.uuid}`)).status).toBe(200);
  });
});
