import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BuildPayload, DeployPayload, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { DeployWorld, deployResult, until, type ServerFixture } from "./support/deployments.js";
import type { JobScript, ScriptedAgent } from "./support/fake-agent.js";

/**
 * Build servers (docs/deployments.md): a deployment that builds runs app.build on the team's
 * build server, which pushes to the instance's registry, then app.deploy of that image on the
 * application's own server. Scripted agents answer both jobs.
 */
const REGISTRY = "registry.example.test:5000/capstan";
const REGISTRY_USER = "capstan-builder";
const REGISTRY_PASSWORD = "Registry-Pass-9f3b2c7d";
const DIGEST = `sha256:${"c".repeat(64)}`;

let t: TestInstance;
let team: TeamFixture;
let world: DeployWorld;
let target: ServerFixture;
let builder: ServerFixture;
let builderAgent: ScriptedAgent;
let targetAgent: ScriptedAgent;

const db = () => t.instance.database.prisma;

/** Jobs of one type an agent holds (they run until answered or cancelled), or answers at once with `reply`. */
function holder(reply?: (job: JobEnvelope) => ReturnType<JobScript>) {
  const held: JobEnvelope[] = [];
  return {
    held,
    script: (job: JobEnvelope): ReturnType<JobScript> => {
      held.push(job);
      return reply ? reply(job) : { hold: true as const };
    },
    async count(n: number, ms = 5000) {
      await until(async () => held.length >= n, ms, `${n} held jobs`);
    },
    of: (deployment: string) => held.filter((j) => (j.payload as { deployment_uuid: string }).deployment_uuid === deployment),
  };
}

/** The script an agent runs for each job type is swapped per test. */
let buildScript: JobScript;
let deployScript: JobScript;

const builtImage = (app: string) => `${REGISTRY}/${app}@${DIGEST}`;
const buildResult = (app: string) => ({ image: builtImage(app), commit: "b".repeat(40), commit_message: "Add the feature" });

beforeAll(async () => {
  t = await startTestInstance({
    PLATFORM_BUILD_REGISTRY: REGISTRY,
    PLATFORM_BUILD_REGISTRY_USERNAME: REGISTRY_USER,
    PLATFORM_BUILD_REGISTRY_PASSWORD: REGISTRY_PASSWORD,
    PLATFORM_BUILD_CONCURRENCY: "1",
  });
  team = await t.newTeam();
  world = await new DeployWorld(t, team).init();
  target = await world.server("target");
  builder = await world.server("builder");
  const patched = await team.api.patch(`/servers/${builder.uuid}`, { is_build_server: true });
  expect(patched.status, JSON.stringify(patched.body)).toBe(200);
  targetAgent = await world.agent(target, (job) => deployScript(job));
  builderAgent = await world.agent(builder);
  builderAgent.serve("app.build", (job) => buildScript(job));
});
afterAll(async () => {
  world?.close();
  await t?.close();
});

describe("a deployment built on a build server", () => {
  it("app.build on the build server, then app.deploy of the pushed image on the application's server; logs of both phases", async () => {
    const builds = holder();
    const deploys = holder();
    buildScript = builds.script;
    deployScript = deploys.script;
    const app = await world.gitApp(target, "bs-app");
    const env = await team.api.post(`/applications/${app}/envs`, { key: "RUNTIME_ONLY", value: "runtime-secret-value" });
    expect(env.status).toBeLessThan(300);
    const buildEnv = await team.api.post(`/applications/${app}/envs`, { key: "BUILD_FLAG", value: "build-time-value", is_build_time: true });
    expect(buildEnv.status).toBeLessThan(300);
    const dep = await world.deploy(app);

    await builds.count(1);
    const build = builds.held[0]!;
    expect(build.type).toBe("app.build");
    const payload = BuildPayload.parse(build.payload);
    expect(payload).toMatchObject({
      deployment_uuid: dep,
      app: { uuid: app, name: "bs-app" },
      source: { kind: "git", url: "https://git.example.test/org/repo.git", branch: "main", commit: null, auth: { kind: "none" } },
      build: { pack: "builder_a", no_cache: false, env: { BUILD_FLAG: "build-time-value" } },
      push: { image: `${REGISTRY}/${app}:${dep}`, auth: { username: REGISTRY_USER, password: REGISTRY_PASSWORD } },
    });
    // The build server gets the build, not the run environment.
    expect(JSON.stringify(build.payload)).not.toContain("runtime-secret-value");
    expect(deploys.of(dep)).toEqual([]);
    const building = await world.waitFor(dep, "in_progress");
    expect(building.logs).toContain(`[capstan] building on the build server builder (${builder.uuid})`);

    builderAgent.progress(build.id, ["[build] Step 1/3 : FROM node", "[build] pushed"]);
    await until(async () => (await team.api.get(`/deployments/${dep}`)).body.logs.includes("[build] pushed"));
    await builderAgent.outcome({ id: build.id, attempt: build.attempt, ok: true, result: buildResult(app) });

    await deploys.count(1);
    const deploy = deploys.held[0]!;
    expect(deploy.type).toBe("app.deploy");
    const dp = DeployPayload.parse(deploy.payload);
    expect(dp).toMatchObject({
      deployment_uuid: dep,
      source: { kind: "image", image: builtImage(app), auth: { username: REGISTRY_USER, password: REGISTRY_PASSWORD }, always_pull: true, built_for_app: true },
      run: { env: { RUNTIME_ONLY: "runtime-secret-value", BUILD_FLAG: "build-time-value" } },
    });
    const deploying = await world.waitFor(dep, "in_progress");
    expect(deploying.commit).toBe("b".repeat(40));
    expect(deploying.commit_message).toBe("Add the feature");
    // The deploy job's log carries on the build's.
    expect(deploying.logs).toContain("[build] Step 1/3 : FROM node\n[build] pushed\n");
    expect(deploying.logs).toContain(`[capstan] built ${builtImage(app)}; deploying it on the application's server target (${target.uuid})`);

    targetAgent.progress(deploy.id, [`pulling image ${builtImage(app)}`]);
    await until(async () => (await team.api.get(`/deployments/${dep}`)).body.logs.includes("pulling image"));
    await targetAgent.outcome({ id: deploy.id, attempt: deploy.attempt, ok: true, result: { ...deployResult(null), image: builtImage(app) } });
    const done = await world.waitFor(dep, "finished");
    expect(done.commit).toBe("b".repeat(40));
    expect(done.logs.indexOf("[build] pushed")).toBeLessThan(done.logs.indexOf("pulling image"));
    expect((await team.api.get(`/applications/${app}`)).body.status).toBe("running:healthy");

    // Secrets: the registry password and env values are sealed in the job rows, and absent from every answer.
    const rows = await db().job.findMany({ where: { id: { in: [build.id, deploy.id] } } });
    expect(rows.map((r) => r.type).sort()).toEqual(["app.build", "app.deploy"]);
    for (const row of rows) {
      for (const secret of [REGISTRY_PASSWORD, "runtime-secret-value", "build-time-value"]) {
        expect(JSON.stringify(row)).not.toContain(secret);
      }
    }
    const answers = [
      await team.api.get(`/deployments/${dep}`),
      await team.api.get(`/deployments`),
      await team.api.get(`/deployments/applications/${app}`),
      await team.api.get(`/servers/${builder.uuid}`),
    ];
    for (const a of answers) expect(JSON.stringify(a.body)).not.toContain(REGISTRY_PASSWORD);
  });

  it("a Dockerfile application builds there too; an image application never does", async () => {
    const builds = holder((job) => ({ ok: true, result: buildResult((job.payload as BuildPayload).app.uuid) }));
    const deploys = holder(() => ({ ok: true, result: deployResult() }));
    buildScript = builds.script;
    deployScript = deploys.script;
    const created = await team.api.post("/applications/dockerfile", {
      project_uuid: world.projectUuid,
      environment_name: "production",
      server_uuid: target.uuid,
      destination_uuid: target.destinationUuid,
      name: "bs-dockerfile",
      dockerfile: "FROM busybox\nCMD [\"httpd\", \"-f\"]\n",
      ports_exposes: "80",
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const dockerfileDep = await world.deploy(created.body.uuid);
    await world.waitFor(dockerfileDep, "finished");
    expect(BuildPayload.parse(builds.of(dockerfileDep)[0]!.payload).source.kind).toBe("dockerfile");
    expect(DeployPayload.parse(deploys.of(dockerfileDep)[0]!.payload).source).toMatchObject({ kind: "image", image: builtImage(created.body.uuid) });

    const imageApp = await world.imageApp(target, "bs-image");
    const imageDep = await world.deploy(imageApp);
    const done = await world.waitFor(imageDep, "finished");
    expect(builds.of(imageDep)).toEqual([]);
    expect(DeployPayload.parse(deploys.of(imageDep)[0]!.payload).source).toEqual({ kind: "image", image: "registry.example.test/app:1" });
    expect(done.logs).not.toContain("[capstan]");
  });
});

describe("cancel and failure in each phase", () => {
  it("cancel while building: the build server is told to stop; nothing reaches the application's server", async () => {
    const builds = holder();
    const deploys = holder();
    buildScript = builds.script;
    deployScript = deploys.script;
    const dep = await world.deploy(await world.gitApp(target, "cancel-build"));
    await builds.count(1);
    const c = await team.api.post(`/deployments/${dep}/cancel`);
    expect(c.status).toBe(200);
    expect(await builderAgent.nextCancel()).toBe(builds.held[0]!.id);
    const cancelled = await world.waitFor(dep, "cancelled");
    expect(cancelled.reason).toBe("cancelled by a user");
    await new Promise((r) => setTimeout(r, 300));
    expect(deploys.of(dep)).toEqual([]);
    expect((await db().job.findUniqueOrThrow({ where: { id: builds.held[0]!.id } })).status).toBe("cancelled");
    expect((await team.api.post(`/deployments/${dep}/cancel`)).status).toBe(400);
  });

  it("cancel while deploying: the application's server is told to stop", async () => {
    const builds = holder((job) => ({ ok: true, result: buildResult((job.payload as BuildPayload).app.uuid) }));
    const deploys = holder();
    buildScript = builds.script;
    deployScript = deploys.script;
    const dep = await world.deploy(await world.gitApp(target, "cancel-deploy"));
    await deploys.count(1);
    const c = await team.api.post(`/deployments/${dep}/cancel`);
    expect(c.status).toBe(200);
    expect(await targetAgent.nextCancel()).toBe(deploys.held[0]!.id);
    const cancelled = await world.waitFor(dep, "cancelled");
    expect(cancelled.reason).toBe("cancelled by a user");
  });

  it("a failed build fails the deployment with the build server's reason; a failed rollout with the target's", async () => {
    buildScript = () => ({ ok: false, error: "pushing the image to the registry registry.example.test:5000 failed: unauthorized: authentication required" });
    const deploys = holder(() => ({ ok: false, error: "new container exited with code 1 instead of staying up" }));
    deployScript = deploys.script;
    const buildFails = await world.deploy(await world.gitApp(target, "fail-build"));
    const failed = await world.waitFor(buildFails, "failed");
    expect(failed.reason).toBe(
      `the build on the build server builder (${builder.uuid}) failed: pushing the image to the registry registry.example.test:5000 failed: unauthorized: authentication required`,
    );
    expect(deploys.of(buildFails)).toEqual([]);

    buildScript = (job) => ({ ok: true, result: buildResult((job.payload as BuildPayload).app.uuid) });
    const deployFails = await world.deploy(await world.gitApp(target, "fail-deploy"));
    const failed2 = await world.waitFor(deployFails, "failed");
    expect(failed2.reason).toBe("new container exited with code 1 instead of staying up");
    expect(deploys.of(deployFails)).toHaveLength(1);
  });
});

describe("where the build runs", () => {
  it("build slots count against the build server: a second build waits there, though the application's server is idle", async () => {
    const builds = holder();
    const deploys = holder(() => ({ ok: true, result: deployResult() }));
    buildScript = builds.script;
    deployScript = deploys.script;
    const first = await world.deploy(await world.gitApp(target, "slot-1"));
    await builds.count(1);
    const second = await world.deploy(await world.gitApp(target, "slot-2"));
    // An image application is not held up by the busy build server: it takes the target's slot.
    const image = await world.deploy(await world.imageApp(target, "slot-image"));
    await world.waitFor(image, "finished");
    expect(await world.status(second)).toBe("queued");
    expect(builds.held).toHaveLength(1);

    await builderAgent.outcome({ id: builds.held[0]!.id, attempt: builds.held[0]!.attempt, ok: true, result: buildResult("x") });
    await world.waitFor(first, "finished");
    await builds.count(2);
    expect(BuildPayload.parse(builds.held[1]!.payload).deployment_uuid).toBe(second);
    await builderAgent.outcome({ id: builds.held[1]!.id, attempt: builds.held[1]!.attempt, ok: true, result: buildResult("y") });
    await world.waitFor(second, "finished");
  });

  it("no reachable build server: the application's server builds, and the log says why", async () => {
    const deploys = holder(() => ({ ok: true, result: deployResult("d".repeat(40)) }));
    deployScript = deploys.script;
    builderAgent.close();
    await until(async () => (await team.api.get(`/servers/${builder.uuid}`)).body.status === "unreachable", 10_000, "build server unreachable");
    const dep = await world.deploy(await world.gitApp(target, "local-build"));
    const done = await world.waitFor(dep, "finished");
    const payload = DeployPayload.parse(deploys.of(dep)[0]!.payload);
    expect(payload.source).toMatchObject({ kind: "git", url: "https://git.example.test/org/repo.git" });
    expect(done.logs).toContain("[capstan] no build server of the team is reachable: building on the application's server");
    // Never a build job on the application's server, nor a deploy job on the build server.
    expect(await db().job.count({ where: { type: "app.build", serverId: target.id } })).toBe(0);
    expect(await db().job.count({ where: { type: "app.deploy", serverId: builder.id } })).toBe(0);
  });
});

describe("instance settings", () => {
  it("without PLATFORM_BUILD_REGISTRY the build servers are not used, and the log says so", async () => {
    const plain = await startTestInstance();
    try {
      const plainTeam = await plain.newTeam();
      const w = await new DeployWorld(plain, plainTeam).init();
      try {
        const own = await w.server("own");
        const b = await w.server("builder");
        expect((await plainTeam.api.patch(`/servers/${b.uuid}`, { is_build_server: true })).status).toBe(200);
        const deploys = holder(() => ({ ok: true, result: deployResult() }));
        await w.agent(own, deploys.script);
        const bAgent = await w.agent(b);
        const builds: JobEnvelope[] = [];
        bAgent.serve("app.build", (job) => {
          builds.push(job);
          return { ok: false, error: "should not build" };
        });
        const dep = await w.deploy(await w.gitApp(own, "no-registry"));
        const done = await w.waitFor(dep, "finished");
        expect(done.logs).toContain("[capstan] the team has build servers, but they are not used without a registry (PLATFORM_BUILD_REGISTRY is not set)");
        expect(DeployPayload.parse(deploys.of(dep)[0]!.payload).source.kind).toBe("git");
        expect(builds).toEqual([]);
      } finally {
        w.close();
      }
    } finally {
      await plain.close();
    }
  });

  it("a registry setting that is not a registry location, or a login without a password, stops the instance from starting", async () => {
    const bad: Record<string, string>[] = [
      { PLATFORM_BUILD_REGISTRY: "capstan" },
      { PLATFORM_BUILD_REGISTRY: "registry.example.test/Capstan" },
      { PLATFORM_BUILD_REGISTRY: "registry.example.test/x; rm -rf /" },
      { PLATFORM_BUILD_REGISTRY: "registry.example.test", PLATFORM_BUILD_REGISTRY_USERNAME: "u" },
      { PLATFORM_BUILD_REGISTRY_USERNAME: "u", PLATFORM_BUILD_REGISTRY_PASSWORD: "p" },
    ];
    for (const env of bad) {
      await expect(startTestInstance(env), JSON.stringify(env)).rejects.toThrow(/PLATFORM_BUILD_REGISTRY/);
    }
  });
});
