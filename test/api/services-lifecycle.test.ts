/**
 * Services lifecycle (spec 4.6, issue 17): start (pull when asked), stop, restart and
 * instant_deploy through the agent's service.deploy / service.action jobs; the compose file the
 * agent gets (the compose applications' rewrite, for resource type "service", with the service's
 * current variables and storages; generated values byte-identical across starts); statuses from
 * the jobs' answers and the agent's reports (per component, aggregated by the one rule); DELETE
 * and environment/project removal send removal jobs; services count in the project detail.
 * The real agent runs these jobs against a real engine in test/e2e/services.test.ts.
 */
import { ServiceDetail, LABEL_SERVICE_COMPONENT, LABEL_RESOURCE_TYPE, LABEL_RESOURCE_UUID, EV } from "@capstan/shared";
import { beforeAll, describe, expect, it } from "vitest";
import type { TestInstance } from "./harness.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { lifecycleFile } from "./support/lifecycle.js";
import { answerNext, appWorld, ok, placement, until, type AppWorld } from "./support/applications.js";

let t: TestInstance;
const { keys, connectedWorld, prisma } = lifecycleFile((started) => (t = started));

const CUSTOM = `services:
  web:
    image: nginx:1.27
    expose: ["80"]
    environment:
      - ADMIN_PASSWORD=\${SERVICE_PASSWORD_ADMIN}
      - GREETING=\${GREETING:-hello}
  cache:
    image: redis:7
    command: ["redis-server", "--requirepass", "\${SERVICE_PASSWORD_REDIS}"]
`;

const createService = async (w: AppWorld, extra: Record<string, unknown> = {}) =>
  (await ok(w.api.post("/services", { ...placement(w), docker_compose_raw: CUSTOM, name: "stack", ...extra }), "service")) as { uuid: string; name: string };
const detail = async (w: AppWorld, uuid: string) => ServiceDetail.parse((await ok(w.api.get(`/services/${uuid}`), "detail")) as unknown);

type Rendered = { "x-capstan": { project: string; containers: string[] }; services: Record<string, { environment?: Record<string, string>; labels: Record<string, string>; volumes?: unknown[]; command?: string[] }>; volumes?: Record<string, { name: string }> };
const composeOf = (job: { payload: unknown }) => JSON.parse((job.payload as { compose: string }).compose) as Rendered;

describe("without a connected agent", () => {
  it("start/stop/restart answer 503 and queue nothing; instant_deploy queues the first start (a durable job)", async () => {
    const w = await appWorld(t, keys);
    const svc = await createService(w);
    const before = await prisma().job.count({ where: { type: { in: ["service.deploy", "service.action"] } } });
    for (const action of ["start", "stop", "restart"]) {
      const res = await w.api.post(`/services/${svc.uuid}/${action}`);
      expect(res.status, action).toBe(503);
      expect(res.body).toEqual({ message: "Server web is unreachable: its agent is not connected." });
    }
    expect(await prisma().job.count({ where: { type: { in: ["service.deploy", "service.action"] } } })).toBe(before);

    const instant = await w.api.post("/services", { ...placement(w), docker_compose_raw: CUSTOM, name: "instant", instant_deploy: true });
    expect(instant.status, JSON.stringify(instant.body)).toBe(201);
    const server = await prisma().server.findUniqueOrThrow({ where: { uuid: w.server.uuid } });
    const jobs = await prisma().job.findMany({ where: { type: "service.deploy", serverId: server.id } });
    expect(jobs).toHaveLength(1);
    expect(jobs[0]!.status).toBe("queued");
  });
});

describe("start, stop, restart through the agent", () => {
  let w: AppWorld;
  let agent: ScriptedAgent;
  beforeAll(async () => {
    ({ w, agent } = await connectedWorld());
  });

  it("start sends the service's rewritten compose file; the answer's component statuses are stored and aggregated", async () => {
    const svc = await createService(w);
    const d = await detail(w, svc.uuid);
    const web = d.applications.find((a) => a.name === "web")!;
    const cache = d.databases.find((a) => a.name === "cache")!;
    const starting = w.api.post(`/services/${svc.uuid}/start`);
    const job = await answerNext(agent, "service.deploy", {
      result: { status: "running:healthy", components: [{ name: "web", status: "running:healthy" }, { name: "cache", status: "running:healthy" }] },
    });
    const res = await starting;
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ message: "Service started.", status: "running:healthy" });

    const payload = job.payload as { service: unknown; pull: boolean; recreate: boolean; run: { network: string; env: Record<string, string> } };
    expect(payload.service).toEqual({ uuid: svc.uuid, name: "stack" });
    expect(payload.pull).toBe(false);
    expect(payload.recreate).toBe(false);
    const rendered = composeOf(job);
    expect(rendered["x-capstan"].project).toBe(`capstan-${svc.uuid}`);
    expect(rendered["x-capstan"].containers).toEqual([`${svc.uuid}-web`, `${svc.uuid}-cache`]);
    const webSvc = rendered.services[`${svc.uuid}-web`]!;
    expect(webSvc.labels).toMatchObject({ [LABEL_RESOURCE_TYPE]: "service", [LABEL_RESOURCE_UUID]: svc.uuid, [LABEL_SERVICE_COMPONENT]: web.uuid });
    expect(rendered.services[`${svc.uuid}-cache`]!.labels[LABEL_SERVICE_COMPONENT]).toBe(cache.uuid);
    // The generated secret reaches the container as stored; the variables travel for masking.
    const password = d.envs.find((e) => e.key === "SERVICE_PASSWORD_ADMIN")!.value!;
    expect(webSvc.environment!.ADMIN_PASSWORD).toBe(password);
    expect(payload.run.env.SERVICE_PASSWORD_ADMIN).toBe(password);

    const after = await detail(w, svc.uuid);
    expect(after.status).toBe("running:healthy");
    expect([...after.applications, ...after.databases].map((c) => c.status)).toEqual(["running:healthy", "running:healthy"]);
  });

  it("generated values stay byte-identical across starts; changed variables and storages take effect on the next start; restart recreates, pull pulls", async () => {
    const svc = await createService(w, { name: "again" });
    const first = w.api.post(`/services/${svc.uuid}/start`);
    const job1 = await answerNext(agent, "service.deploy", { result: { status: "running:unknown", components: [] } });
    expect((await first).status).toBe(200);

    const set = await w.api.patch(`/services/${svc.uuid}/envs`, { key: "GREETING", value: "hi $USER" });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const storage = await w.api.post(`/services/${svc.uuid}/storages`, { name: "uploads", mount_path: "/srv/uploads", service_name: "web" });
    expect(storage.status, JSON.stringify(storage.body)).toBe(201);

    const second = w.api.post(`/services/${svc.uuid}/restart?pull=true`);
    const job2 = await answerNext(agent, "service.deploy", { result: { status: "running:unknown", components: [] } });
    expect((await second).body.message).toBe("Service restarted.");
    expect(job2.payload).toMatchObject({ pull: true, recreate: true });

    const [a, b] = [composeOf(job1), composeOf(job2)];
    const webA = a.services[`${svc.uuid}-web`]!;
    const webB = b.services[`${svc.uuid}-web`]!;
    expect(webB.environment!.ADMIN_PASSWORD).toBe(webA.environment!.ADMIN_PASSWORD);
    expect(b.services[`${svc.uuid}-cache`]!.command).toEqual(a.services[`${svc.uuid}-cache`]!.command);
    expect(webA.environment!.GREETING).toBe("hello");
    // `$` in a user's value never breaks the file: it is escaped for compose.
    expect(webB.environment!.GREETING).toBe("hi $$USER");
    expect(webB.volumes).toContainEqual({ type: "volume", source: "uploads", target: "/srv/uploads" });
    expect(b.volumes!.uploads!.name).toBe(`${svc.uuid}-uploads`);
    expect(a.volumes?.uploads).toBeUndefined();
  });

  it("stop sends service.action stop; a failed job is a 502 with the agent's reason; a slow one a 202", async () => {
    const svc = await createService(w, { name: "stopper" });
    const stopping = w.api.post(`/services/${svc.uuid}/stop`);
    const job = await answerNext(agent, "service.action", { result: { status: "exited", components: [{ name: "web", status: "exited" }, { name: "cache", status: "exited" }] } });
    expect(job.payload).toMatchObject({ service: { uuid: svc.uuid, name: "stopper" }, action: "stop" });
    expect((await stopping).body).toEqual({ message: "Service stopped.", status: "exited" });

    const failing = w.api.post(`/services/${svc.uuid}/start`);
    await answerNext(agent, "service.deploy", { error: "service stopper-web is unhealthy" });
    const failed = await failing;
    expect(failed.status).toBe(502);
    expect(failed.body.message).toMatch(/Starting stopper failed: service stopper-web is unhealthy/);

    const services = t.instance.services.services;
    services.actionWaitMs = 300;
    try {
      const res = await w.api.post(`/services/${svc.uuid}/start`);
      expect(res.status).toBe(202);
      expect(res.body).toEqual({ message: expect.stringMatching(/still at it/), status: "exited" });
      await answerNext(agent, "service.deploy", { result: { status: "running:healthy", components: [{ name: "web", status: "running:healthy" }, { name: "cache", status: "running:healthy" }] } });
      await until(async () => (await detail(w, svc.uuid)).status === "running:healthy");
    } finally {
      services.actionWaitMs = 30_000;
    }
  });

  it("a service that needs a value it lacks cannot start (409 naming it); another team's service is a 404", async () => {
    const needs = `services:\n  web:\n    image: nginx:1.27\n    environment:\n      - TOKEN=\${TOKEN:?set a token}\n`;
    const svc = await createService(w, { name: "needy", docker_compose_raw: needs });
    const res = await w.api.post(`/services/${svc.uuid}/start`);
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/TOKEN/);
    const other = await appWorld(t, keys);
    expect((await other.api.post(`/services/${svc.uuid}/start`)).status).toBe(404);
  });

  it("statuses follow the agent's reports per component, aggregated by the one rule; a full report without the service marks it exited", async () => {
    const svc = await createService(w, { name: "reported" });
    const d = await detail(w, svc.uuid);
    const [web, cache] = [d.applications[0]!, d.databases[0]!];
    agent.socket.emit(EV.resourceStatus, {
      full: false,
      resources: [
        { uuid: svc.uuid, type: "service", status: "degraded:unknown" },
        { uuid: web.uuid, type: "service-component", status: "running:healthy" },
        { uuid: cache.uuid, type: "service-component", status: "running:unhealthy" },
      ],
    });
    await until(async () => (await detail(w, svc.uuid)).status === "degraded");
    expect((await detail(w, svc.uuid)).databases[0]!.status).toBe("running:unhealthy");
    agent.socket.emit(EV.resourceStatus, {
      full: false,
      resources: [
        { uuid: svc.uuid, type: "service", status: "running:healthy" },
        { uuid: web.uuid, type: "service-component", status: "running:healthy" },
        { uuid: cache.uuid, type: "service-component", status: "running:healthy" },
      ],
    });
    await until(async () => (await detail(w, svc.uuid)).status === "running:healthy");
    // A reported service lists all its containers: a component missing from it has none left.
    agent.socket.emit(EV.resourceStatus, { full: false, resources: [{ uuid: svc.uuid, type: "service", status: "running:healthy" }, { uuid: web.uuid, type: "service-component", status: "running:healthy" }] });
    await until(async () => (await detail(w, svc.uuid)).status === "degraded");
    expect((await detail(w, svc.uuid)).databases[0]!.status).toBe("exited");
    agent.socket.emit(EV.resourceStatus, { full: true, resources: [] });
    await until(async () => (await detail(w, svc.uuid)).status === "exited");
  });

  it("DELETE cancels a queued start and sends the removal with the flags; the record goes at once", async () => {
    const svc = await createService(w, { name: "doomed" });
    const services = t.instance.services.services;
    services.actionWaitMs = 200;
    try {
      expect((await w.api.post(`/services/${svc.uuid}/start`)).status).toBe(202);
    } finally {
      services.actionWaitMs = 30_000;
    }
    const startJob = await agent.nextJob(10_000);
    expect(startJob.type).toBe("service.deploy");
    const res = await w.api.delete(`/services/${svc.uuid}?delete_volumes=true&delete_configurations=false`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(await agent.nextCancel(10_000)).toBe(startJob.id);
    const removal = await answerNext(agent, "service.action", { result: { status: "removed", components: [] } });
    expect(removal.payload).toMatchObject({ service: { uuid: svc.uuid, name: "doomed" }, action: "remove", delete_volumes: true, delete_configurations: false, docker_cleanup: true });
    expect(await prisma().service.count({ where: { uuid: svc.uuid } })).toBe(0);
  });

  it("instant_deploy of a service that lacks a required value is a 422 naming instant_deploy; nothing is created", async () => {
    const needs = `services:\n  web:\n    image: nginx:1.27\n    environment:\n      - TOKEN=\${TOKEN:?set a token}\n`;
    const before = await prisma().service.count();
    const res = await w.api.post("/services", { ...placement(w), docker_compose_raw: needs, instant_deploy: true });
    expect(res.status).toBe(422);
    expect(res.body.errors.instant_deploy[0]).toMatch(/TOKEN/);
    expect(await prisma().service.count()).toBe(before);
  });

  it("services count in the project's resource counts; deleting the environment sends their removal", async () => {
    const { w: w2, agent: agent2 } = await connectedWorld();
    const counts = async () => {
      const p = (await ok(w2.api.get(`/projects/${w2.project.uuid}`), "project")) as { resource_counts: { services: number; total: number }; environments: { name: string; resource_counts: { services: number } }[] };
      return { project: p.resource_counts, production: p.environments.find((e) => e.name === "production")!.resource_counts.services };
    };
    const before = await counts();
    const svc = await createService(w2, { name: "counted" });
    // The detail is served from the response cache: creating a service must invalidate it.
    const after = await counts();
    expect(after.project.services).toBe(before.project.services + 1);
    expect(after.project.total).toBe(before.project.total + 1);
    expect(after.production).toBe(1);
    const created = await w2.api.post(`/projects/${w2.project.uuid}/environments`, { name: "staging" });
    expect(created.status).toBe(201);
    const staged = await createService(w2, { name: "staged", ...placement(w2, "staging") });
    const res = await w2.api.delete(`/projects/${w2.project.uuid}/environments/staging`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const removal = await answerNext(agent2, "service.action", { result: { status: "removed", components: [] } });
    expect(removal.payload).toMatchObject({ service: { uuid: staged.uuid }, action: "remove", delete_volumes: false });
    expect(await prisma().service.count({ where: { uuid: { in: [svc.uuid, staged.uuid] } } })).toBe(1);
    expect((await counts()).project.services).toBe(1);
  });
});
