import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { startReplica, type Replica } from "./support/replica.js";
import { DeployWorld, deployResult, until } from "./support/deployments.js";

/** Separate instances: each test needs its own deployment settings. */
const instances: TestInstance[] = [];
const worlds: DeployWorld[] = [];
afterAll(async () => {
  for (const w of worlds) w.close();
  for (const t of instances) await t.close();
});

async function worldWith(env: Record<string, string>) {
  const t = await startTestInstance(env);
  instances.push(t);
  const world = await new DeployWorld(t, await t.newTeam()).init();
  worlds.push(world);
  return { t, world };
}

describe("deadline (PLATFORM_DEPLOY_TIMEOUT_S=2): nothing stays in progress or queued for ever", () => {
  it("a deployment the agent does not finish in time fails with the reason, and the agent is told to stop", async () => {
    const { world } = await worldWith({ PLATFORM_DEPLOY_TIMEOUT_S: "2" });
    const server = await world.server();
    const held: JobEnvelope[] = [];
    const agent = await world.agent(server, (job) => {
      held.push(job);
      return { hold: true };
    });
    const dep = await world.deploy(await world.imageApp(server, "slow"));
    await world.waitFor(dep, "in_progress");
    const failed = await world.waitFor(dep, "failed", 8000);
    expect(failed.reason).toMatch(/^deadline exceeded: the agent did not finish the job in time/);
    expect(await agent.nextCancel()).toBe(held[0]!.id);
    // A late success changes nothing.
    await agent.outcome({ id: held[0]!.id, attempt: held[0]!.attempt, ok: true, result: deployResult() });
    expect(await world.status(dep)).toBe("failed");
  });

  it("a deployment of a server whose agent is away stays queued, then fails once the deadline has passed", async () => {
    const { t, world } = await worldWith({ PLATFORM_DEPLOY_TIMEOUT_S: "2" });
    const server = await world.server();
    const dep = await world.deploy(await world.imageApp(server, "orphan"));
    expect(await world.status(dep)).toBe("queued");
    const failed = await world.waitFor(dep, "failed", 8000);
    expect(failed.reason).toBe("deadline exceeded: the server's agent was not connected for 2 s");
    expect(failed.started_at).toBeNull();
    expect(await t.instance.database.prisma.job.count({ where: { type: "app.deploy" } })).toBe(0);
  });
});

describe("queue limit (PLATFORM_DEPLOY_QUEUE_LIMIT=2)", () => {
  it("one deployment more than the server's queue holds is refused with 429 and Retry-After; nothing is created", async () => {
    const { t, world } = await worldWith({ PLATFORM_DEPLOY_QUEUE_LIMIT: "2" });
    const server = await world.server(); // no agent: everything stays queued
    const apps = [await world.imageApp(server, "q1"), await world.imageApp(server, "q2"), await world.imageApp(server, "q3")];
    await world.deploy(apps[0]!);
    await world.deploy(apps[1]!);
    const full = await world.team.api.post(`/applications/${apps[2]}/deploy`);
    expect(full.status).toBe(429);
    expect(full.headers.get("retry-after")).toBe("30");
    expect(full.body.message).toMatch(/deploy queue of this application's server is full \(2 deployments waiting, limit 2\)/);
    expect(await t.instance.database.prisma.deployment.count()).toBe(2);

    // Cancelling one makes room.
    const list = (await world.team.api.get("/deployments")).body.data;
    expect((await world.team.api.post(`/deployments/${list[0].uuid}/cancel`)).status).toBe(200);
    await world.deploy(apps[2]!);
  });
});

const pgUrl = process.env.CAPSTAN_TEST_PG_URL;

describe.skipIf(!pgUrl)("two replicas sharing PostgreSQL", () => {
  let a: TestInstance;
  let b: Replica;

  beforeAll(async () => {
    a = await startTestInstance();
    instances.push(a);
    b = await startReplica(a);
  });
  afterAll(async () => {
    await b?.close();
  });

  // About 20 steps in sequence, each bounded with its own named timeout: the test's own limit
  // stays above their sum, so a slow step on a loaded machine is named instead of the test
  // timing out as a whole (the CI of 5a9966b: the test timed out at 30 s on PostgreSQL).
  it("deployments requested on both replicas at once start at most 2 at a time, each once; a cancel on B stops the job on A's agent", { timeout: 180_000 }, async () => {
    const team = await a.newTeam();
    const world = await new DeployWorld(a, team).init();
    worlds.push(world);
    const server = await world.server();
    const held: JobEnvelope[] = [];
    const agent = await world.agent(server, (job) => {
      held.push(job);
      return { hold: true };
    });
    const apiB = b.api(team.token);
    const apps: string[] = [];
    for (let i = 0; i < 6; i++) apps.push(await world.imageApp(server, `r${i}`));
    // Both replicas admit and schedule concurrently.
    const deps = await Promise.all(apps.map((app, i) => world.deploy(app, undefined, i % 2 ? apiB : team.api)));
    await until(async () => held.length >= 2, 5000, "two started");
    // Several sweeps of both replicas, side by side (each pass runs the scheduler's): still two.
    for (let pass = 0; pass < 3; pass++) await Promise.all([a.instance.repairSweep.run(), b.instance.repairSweep.run()]);
    const prisma = a.instance.database.prisma;
    expect(held.length).toBe(2);
    expect(await prisma.deployment.count({ where: { uuid: { in: deps }, status: "in_progress" } })).toBe(2);
    expect(await prisma.job.count({ where: { type: "app.deploy" } })).toBe(2);

    // Cancel through B: A holds the agent's connection, and A's agent is told to stop.
    const running = await prisma.deployment.findFirstOrThrow({ where: { uuid: { in: deps }, status: "in_progress" } });
    expect((await apiB.post(`/deployments/${running.uuid}/cancel`)).status).toBe(200);
    expect(await agent.nextCancel(5000)).toBe(running.jobId);

    // Finish everything as it starts; each deployment runs once.
    for (let done = 0; done < 4; done++) {
      await until(async () => held.length >= 3 + done, 8000, `deployment ${3 + done} started`);
      const job = held[2 + done]!;
      await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: deployResult() });
    }
    const other = held.find((j) => j.id !== running.jobId && held.indexOf(j) < 2)!;
    await agent.outcome({ id: other.id, attempt: other.attempt, ok: true, result: deployResult() });
    await until(async () => (await prisma.deployment.count({ where: { uuid: { in: deps }, status: "finished" } })) === 5, 8000, "all finished");
    expect(new Set(held.map((j) => j.id)).size).toBe(held.length);
    expect(held.length).toBe(6);
  });

  it("a log stream on replica B delivers lines the agent sends to replica A", async () => {
    const team = await a.newTeam();
    const world = await new DeployWorld(a, team).init();
    worlds.push(world);
    const server = await world.server();
    const held: JobEnvelope[] = [];
    const agent = await world.agent(server, (job) => {
      held.push(job);
      return { hold: true };
    });
    const dep = await world.deploy(await world.imageApp(server, "streamed"));
    await until(async () => held.length === 1);
    const res = await fetch(`${b.url}/api/v1/deployments/${dep}/logs/stream`, { headers: { Authorization: `Bearer ${team.token}` } });
    expect(res.status).toBe(200);
    agent.progress(held[0]!.id, ["stored by replica A"]);
    await agent.outcome({ id: held[0]!.id, attempt: 1, ok: true, result: deployResult() });
    // B learns both the line and the end by reading the rows A wrote.
    expect(await res.text()).toBe('data: stored by replica A\n\nevent: end\ndata: {"status":"finished"}\n\n');
  });
});
