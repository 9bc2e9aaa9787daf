import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeployPayload, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { DeployWorld, deployResult, until, type ServerFixture } from "./support/deployments.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";

let t: TestInstance;
let team: TeamFixture;
let world: DeployWorld;

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  world = await new DeployWorld(t, team).init();
});
afterAll(async () => {
  world?.close();
  await t?.close();
});

const db = () => t.instance.database.prisma;

/** Collects the app.deploy jobs an agent holds (they run until answered or cancelled). */
function holder() {
  const held: JobEnvelope[] = [];
  const waiters: (() => void)[] = [];
  return {
    held,
    script: (job: JobEnvelope) => {
      held.push(job);
      waiters.splice(0).forEach((w) => w());
      return { hold: true as const };
    },
    async count(n: number, ms = 5000) {
      await until(async () => held.length >= n, ms, `${n} held deploy jobs`);
    },
  };
}

describe("deployment lifecycle", () => {
  let server: ServerFixture;
  let agent: ScriptedAgent;
  const jobs = holder();

  beforeAll(async () => {
    server = await world.server("life");
    agent = await world.agent(server, jobs.script);
  });

  it("queued -> in_progress -> finished, with logs, the commit and the application status from the result", async () => {
    const app = await world.imageApp(server, "life-app", { fqdn: "https://life.example.test,http://plain.example.test/api" });
    const env = await team.api.post(`/applications/${app}/envs`, { key: "GREETING", value: "hello-runtime" });
    expect(env.status, JSON.stringify(env.body)).toBeLessThan(300);
    const dep = await world.deploy(app);
    await jobs.count(1);
    const job = jobs.held[0]!;
    expect(job.type).toBe("app.deploy");

    // The payload the agent gets: this deployment of this application, checked by the protocol schema.
    const payload = DeployPayload.parse(job.payload);
    expect(payload).toMatchObject({
      deployment_uuid: dep,
      app: { uuid: app, name: "life-app" },
      source: { kind: "image", image: "registry.example.test/app:1" },
      build: { no_cache: false },
      run: {
        env: { GREETING: "hello-runtime" },
        ports: [8080],
        network: "capstan",
        health: null,
        routes: [
          { host: "life.example.test", https: true, path: "/" },
          { host: "plain.example.test", https: false, path: "/api" },
        ],
      },
      proxy: { image: "capstan/proxy:latest", http_port: 80, https_port: 443, networks: ["capstan"] },
    });

    const running = await world.waitFor(dep, "in_progress");
    expect(running).toMatchObject({ uuid: dep, application_uuid: app, application_name: "life-app", trigger: "api", force: false, server_uuid: server.uuid });
    expect(running.started_at).toEqual(expect.any(String));
    expect(running.finished_at).toBeNull();

    agent.progress(job.id, ["pulling registry.example.test/app:1", "starting container"]);
    await until(async () => (await team.api.get(`/deployments/${dep}`)).body.logs.includes("starting container"));
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: deployResult("a".repeat(40), "running:healthy") });

    const done = await world.waitFor(dep, "finished");
    expect(done).toMatchObject({ commit: "a".repeat(40), reason: null, logs: "pulling registry.example.test/app:1\nstarting container\n" });
    expect(done.finished_at).toEqual(expect.any(String));
    expect((await team.api.get(`/applications/${app}`)).body.status).toBe("running:healthy");
  });

  it("a failed job fails the deployment with the agent's reason", async () => {
    const app = await world.imageApp(server, "fail-app");
    const dep = await world.deploy(app);
    await jobs.count(2);
    const job = jobs.held[1]!;
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: "pull failed: manifest unknown" });
    const failed = await world.waitFor(dep, "failed");
    expect(failed.reason).toBe("pull failed: manifest unknown");
    expect(failed.finished_at).toEqual(expect.any(String));
  });

  it("force and commit_sha come from the query string or the body; both places must agree", async () => {
    const app = await world.imageApp(server, "force-app");
    const viaQuery = await team.api.post(`/applications/${app}/deploy?force=true`);
    expect(viaQuery.status).toBe(200);
    await jobs.count(3);
    expect(DeployPayload.parse(jobs.held[2]!.payload).build.no_cache).toBe(true);
    await agent.outcome({ id: jobs.held[2]!.id, attempt: 1, ok: true, result: deployResult() });
    await world.waitFor(viaQuery.body.deployment_uuid, "finished");

    const clash = await team.api.post(`/applications/${app}/deploy?force=true`, { force: false });
    expect(clash.status).toBe(422);
    expect(clash.body.errors.force).toBeDefined();
    const badSha = await team.api.post(`/applications/${app}/deploy`, { commit_sha: "not-a-sha;rm -rf /" });
    expect(badSha.status).toBe(422);
    expect(badSha.body.errors.commit_sha).toBeDefined();
    // An image has no commits to pick from.
    const noGit = await team.api.post(`/applications/${app}/deploy`, { commit_sha: "abcdef1" });
    expect(noGit.status).toBe(422);
    expect(await db().deployment.count({ where: { application: { uuid: app } } })).toBe(1);
  });
});

describe("cancel", () => {
  let server: ServerFixture;
  let agent: ScriptedAgent;
  const jobs = holder();

  beforeAll(async () => {
    server = await world.server("cancel");
    agent = await world.agent(server, jobs.script);
  });

  it("a queued deployment is cancelled at once and never starts; one deployment per application runs at a time", async () => {
    const app = await world.imageApp(server, "cq-app");
    const first = await world.deploy(app);
    await jobs.count(1);
    await world.waitFor(first, "in_progress");
    const second = await world.deploy(app);
    const third = await world.deploy(app);
    // The same application: both wait behind the running one, though the server has a free slot.
    await new Promise((r) => setTimeout(r, 300));
    expect(await world.status(second)).toBe("queued");
    expect(await world.status(third)).toBe("queued");
    expect(jobs.held.length).toBe(1);

    const c = await team.api.post(`/deployments/${second}/cancel`);
    expect(c.status).toBe(200);
    expect(c.body).toEqual({ message: "Deployment cancelled." });
    const cancelled = await world.waitFor(second, "cancelled");
    expect(cancelled.reason).toMatch(/cancelled/);
    expect(cancelled.finished_at).toEqual(expect.any(String));
    expect(cancelled.started_at).toBeNull();

    // The running one ends; the next queued one (third, not the cancelled second) starts.
    await agent.outcome({ id: jobs.held[0]!.id, attempt: 1, ok: true, result: deployResult() });
    await world.waitFor(first, "finished");
    await jobs.count(2);
    expect(DeployPayload.parse(jobs.held[1]!.payload).deployment_uuid).toBe(third);
    await agent.outcome({ id: jobs.held[1]!.id, attempt: 1, ok: true, result: deployResult() });
    await world.waitFor(third, "finished");
    expect(await db().job.count({ where: { id: { in: jobs.held.map((j) => j.id) } } })).toBe(2);
    expect((await db().deployment.findUniqueOrThrow({ where: { uuid: second } })).jobId).toBeNull();
  });

  it("a running deployment is cancelled: the agent is told to stop, the slot goes to the next; finished ones answer 400", async () => {
    const app = await world.imageApp(server, "cr-app");
    const dep = await world.deploy(app);
    await jobs.count(3);
    const job = jobs.held[2]!;
    await world.waitFor(dep, "in_progress");
    const next = await world.deploy(app);

    const c = await team.api.post(`/deployments/${dep}/cancel`);
    expect(c.status).toBe(200);
    expect(await agent.nextCancel()).toBe(job.id);
    const cancelled = await world.waitFor(dep, "cancelled");
    expect(cancelled.reason).toMatch(/cancelled by a user/);
    expect((await db().job.findUniqueOrThrow({ where: { id: job.id } })).status).toBe("cancelled");

    // The freed slot: the next deployment of the application starts.
    await jobs.count(4);
    await world.waitFor(next, "in_progress");
    await agent.outcome({ id: jobs.held[3]!.id, attempt: 1, ok: true, result: deployResult() });
    await world.waitFor(next, "finished");

    for (const uuid of [dep, next]) {
      const again = await team.api.post(`/deployments/${uuid}/cancel`);
      expect(again.status).toBe(400);
      expect(again.body.message).toMatch(/only queued or in_progress deployments can be cancelled/);
    }
    expect(await world.status(next)).toBe("finished");
    expect((await team.api.post(`/deployments/00000000-0000-4000-8000-000000000000/cancel`)).status).toBe(404);
  });
});

describe("scheduler", () => {
  it("runs at most PLATFORM_BUILD_CONCURRENCY (2) deployments per server: the third waits for a free slot", async () => {
    const server = await world.server("conc");
    const jobs = holder();
    const agent = await world.agent(server, jobs.script);
    const apps = [await world.imageApp(server, "c1"), await world.imageApp(server, "c2"), await world.imageApp(server, "c3")];
    const deps: string[] = [];
    for (const a of apps) deps.push(await world.deploy(a));
    await jobs.count(2);
    await new Promise((r) => setTimeout(r, 300));
    expect(jobs.held.length).toBe(2);
    expect(await world.status(deps[0]!)).toBe("in_progress");
    expect(await world.status(deps[1]!)).toBe("in_progress");
    expect(await world.status(deps[2]!)).toBe("queued");

    // Another server has its own slots.
    const other = await world.server("conc-other");
    const otherJobs = holder();
    await world.agent(other, otherJobs.script);
    const elsewhere = await world.deploy(await world.imageApp(other, "c4"));
    await world.waitFor(elsewhere, "in_progress");

    await agent.outcome({ id: jobs.held[0]!.id, attempt: 1, ok: false, error: "build failed" });
    await jobs.count(3);
    await world.waitFor(deps[2]!, "in_progress");
    expect(await world.status(deps[0]!)).toBe("failed");
  });

  it("an agent killed mid-deploy gets the job again when it reconnects; the deployment completes once", async () => {
    const server = await world.server("redeliver");
    const first = holder();
    const agent1 = await world.agent(server, first.script);
    const app = await world.imageApp(server, "re-app");
    const dep = await world.deploy(app);
    await first.count(1);
    await world.waitFor(dep, "in_progress");
    agent1.close();
    await until(async () => (await team.api.get(`/servers/${server.uuid}`)).body.status === "unreachable", 10_000, "agent gone");
    expect(await world.status(dep)).toBe("in_progress");

    const seen: JobEnvelope[] = [];
    await world.agent(server, (job) => {
      seen.push(job);
      return { ok: true, result: deployResult(null, "running:healthy"), lines: ["resumed"] };
    });
    const done = await world.waitFor(dep, "finished");
    expect(seen.map((j) => j.id)).toEqual([first.held[0]!.id]);
    expect(seen[0]!.attempt).toBe(2);
    expect(done.logs).toContain("resumed");
    expect(await db().job.count({ where: { type: "app.deploy", serverId: server.id } })).toBe(1);
  });
});

describe("tokens and members", () => {
  let server: ServerFixture;
  let app: string;

  beforeAll(async () => {
    server = await world.server("access");
    await world.agent(server, () => ({ ok: true, result: deployResult(), delayMs: 50 }));
    app = await world.imageApp(server, "access-app");
  });

  it("deploying needs the deploy scope; reading needs read", async () => {
    const readOnly = await t.newMember(team.teamId, "owner", ["read"]);
    const r = await t.api(readOnly.token).post(`/applications/${app}/deploy`);
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ message: "Invalid ability provided." });

    const deployOnly = await t.newMember(team.teamId, "owner", ["deploy"]);
    const dep = await world.deploy(app, undefined, t.api(deployOnly.token));
    expect((await t.api(deployOnly.token).get(`/deployments/${dep}`)).status).toBe(403);
    expect((await t.api(readOnly.token).get(`/deployments/${dep}`)).status).toBe(200);
    expect((await t.api(readOnly.token).post(`/deployments/${dep}/cancel`)).status).toBe(403);
    await world.waitFor(dep, "finished");
  });

  it("members: view_only cannot deploy or cancel, deploy can, no grant sees nothing", async () => {
    const viewer = await t.newMember(team.teamId, "member");
    const deployer = await t.newMember(team.teamId, "member");
    const stranger = await t.newMember(team.teamId, "member");
    for (const [m, level] of [[viewer, "view_only"], [deployer, "deploy"]] as const) {
      const g = await team.api.post("/permissions/project", { project_uuid: world.projectUuid, user_id: m.userId, permission_level: level });
      expect(g.status, JSON.stringify(g.body)).toBe(201);
    }
    const denied = await t.api(viewer.token).post(`/applications/${app}/deploy`);
    expect(denied.status).toBe(403);
    const dep = await world.deploy(app, undefined, t.api(deployer.token));
    expect((await t.api(viewer.token).get(`/deployments/${dep}`)).status).toBe(200);
    expect((await t.api(viewer.token).post(`/deployments/${dep}/cancel`)).status).toBe(403);
    expect((await t.api(stranger.token).post(`/applications/${app}/deploy`)).status).toBe(404);
    expect((await t.api(stranger.token).get(`/deployments/${dep}`)).status).toBe(404);
    expect((await t.api(stranger.token).get(`/deployments/applications/${app}`)).status).toBe(404);
    expect((await t.api(stranger.token).get(`/deployments`)).body.data).toEqual([]);
    await world.waitFor(dep, "finished");
  });
});
