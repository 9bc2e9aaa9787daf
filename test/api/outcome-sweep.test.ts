import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outcomeMap } from "../../control-plane/src/jobs/outcome-map.js";
import type { OutcomeMap } from "../../control-plane/src/jobs/outcomes.js";
import type { Instance } from "../../control-plane/src/instance.js";
import { startTestInstance, type TestInstance } from "./harness.js";
import { DeployWorld, deployResult, until } from "./support/deployments.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";
import { startReplica, type Replica } from "./support/replica.js";

/**
 * The one job-outcome map and the one repair sweep (jobs/outcomes.ts, jobs/repair-sweep.ts):
 * the replica that ends a job (its agent's outcome stored, fenced) dies before it applies what
 * the end means for the deployment; another replica's sweep applies it, exactly once, though
 * every surviving replica sweeps. On SQLite the replicas share one file; on PostgreSQL
 * (CAPSTAN_TEST_PG_URL) this is the scale-out setup.
 */
describe("a job's outcome outlives the replica that ended it", () => {
  let t: TestInstance;
  let a: Replica;
  let b: Replica;
  let world: DeployWorld;
  let agent: ScriptedAgent | null = null;

  beforeAll(async () => {
    t = await startTestInstance();
    a = await startReplica(t);
    b = await startReplica(t);
  });
  afterAll(async () => {
    agent?.close();
    world?.close();
    await b?.close();
    await t?.close();
  });

  /** The instance's own outcome map, app.deploy's handler counted. */
  function counted(instance: Instance, calls: string[], name: string): OutcomeMap {
    const map = outcomeMap(instance.services);
    const deploy = map["app.deploy"]!;
    return { ...map, "app.deploy": async (job) => (calls.push(`${name} ${job.id}`), deploy(job)) };
  }

  it("another replica's sweep ends the deployment once: the application's status, the job marked applied", async () => {
    const team = await t.newTeam();
    world = await new DeployWorld(t, team).init();
    const server = await world.server();
    const app = await world.imageApp(server, "survivor");

    // Replica A holds the agent; its app.deploy outcome handler never gets to run (it "dies" first).
    let entered: (jobId: string) => void = () => {};
    const enteredA = new Promise<string>((r) => (entered = r));
    let release: (err: Error) => void = () => {};
    const gate = new Promise<never>((_, reject) => (release = reject));
    gate.catch(() => {});
    a.instance.jobs.useOutcomes({
      ...outcomeMap(a.instance.services),
      "app.deploy": async (job) => {
        entered(job.id);
        await gate;
      },
    });
    // The survivors count every application of app.deploy's outcome; their lease is short.
    const calls: string[] = [];
    for (const [name, instance] of [["t", t.instance], ["b", b.instance]] as const) {
      instance.jobs.useOutcomes(counted(instance, calls, name));
      instance.jobs.outcomeLeaseMs = 300;
    }

    agent = await connectAgent(a.url, server.agentToken);
    agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: ["capstan"] } }));
    agent.serve("app.deploy", () => ({ ok: true, result: deployResult("abc123") }));
    await agent.hello();
    await until(async () => (await team.api.get(`/servers/${server.uuid}`)).body.status === "reachable", 5000, "server reachable");

    const deployment = await world.deploy(app);
    const jobId = await enteredA;
    const prisma = t.instance.database.prisma;
    // The job ended (its outcome is stored) but nothing applied it: the deployment still runs.
    const ended = await prisma.job.findUniqueOrThrow({ where: { id: jobId } });
    expect(ended.status).toBe("succeeded");
    expect(ended.outcomeAppliedAt).toBeNull();
    expect(ended.outcomeClaimedAt).not.toBeNull();
    expect(await world.status(deployment)).toBe("in_progress");

    // Replica A dies (its connections cut, its sweep stopped) without applying the outcome.
    agent.close();
    agent = null;
    await a.close();
    release(new Error("replica A is gone"));

    // A survivor's sweep takes it over once the lease has passed.
    const done = await world.waitFor(deployment, "finished", 15_000);
    expect(done.commit).toBe("abc123");
    await until(async () => (await prisma.job.findUniqueOrThrow({ where: { id: jobId } })).outcomeAppliedAt !== null, 5000, "outcome marked applied");
    expect((await team.api.get(`/applications/${app}`)).body.status).toBe("running:healthy");

    // Every survivor sweeps again, at once and more than once: nothing applies it a second time.
    for (let round = 0; round < 3; round++) {
      await new Promise((r) => setTimeout(r, 350));
      await Promise.all([t.instance.repairSweep.run(), b.instance.repairSweep.run()]);
    }
    expect(calls.filter((c) => c.endsWith(jobId))).toHaveLength(1);
    expect(await world.status(deployment)).toBe("finished");
  });
});
