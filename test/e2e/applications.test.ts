/**
 * Issue 4 end to end, the way a user drives it: a real control plane, a real agent on this
 * machine's Docker Engine, a real git server, the real proxy image. For each of the seven
 * build packs: create through the API, deploy, the container runs, HTTP through the proxy
 * answers with the app's response; a redeploy with a changed variable shows the change.
 * Then the hard parts: cancel during a build, the agent killed mid-deploy, status from the
 * engine, logs, domains, and removal.
 *
 * The agent runs as a process on this machine (the `npm start` local-agent mode), so it
 * reaches the loopback git server; the agent container path is covered by fleet.test.ts.
 * Everything it creates carries capstan.test=1 (CAPSTAN_AGENT_LABELS).
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFile, readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { GitRepos, startGitDaemon, type GitServer } from "../support/git-server.js";
import { repo, sh, until } from "./support/kit.js";
import { viaProxyAt } from "./support/http.js";
import { spawnLocalAgent, stopLocalAgent } from "./support/local-agent.js";
import { applicationCreator, buildHelloImage, localProxyInstanceEnv, registerLocalServer } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const PROXY_NAME = `capstan-proxy-e2e-${RUN}`;
const HELLO_IMAGE = "capstan-test/e2e-hello:latest";
const DEPLOY_TIMEOUT_S = 240;

let t: TestInstance;
let team: TeamFixture;
let agent: ChildProcess | null = null;
let agentOpts: Parameters<typeof spawnLocalAgent>[0];
let stateDir = "";
let proxyPort = 0;
let git: GitServer;
let repos: GitRepos;
let server: { uuid: string; destination: string };
let project: string;
const keys = new KeyFactory();

// ---------------------------------------------------------------------------------------------
// Helpers

function startAgent(): void {
  agent = spawnLocalAgent(agentOpts);
}

async function stopAgent(signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  const a = agent;
  agent = null;
  await stopLocalAgent(a, signal);
}

const serverStatus = async () => (await team.api.get(`/servers/${server.uuid}`)).body.status as string;


/** One request to the proxy on loopback with a Host header. */
const viaProxy = (host: string, path = "/") => viaProxyAt("127.0.0.1", proxyPort, host, path);

async function answers(host: string, expected: string, timeoutMs = 30_000): Promise<string> {
  return until(
    `${host} to answer "${expected}" through the proxy`,
    async () => {
      const r = await viaProxy(host);
      return r.status === 200 && r.body.includes(expected) ? r.body : false;
    },
    timeoutMs,
    250,
  );
}

const { common, create } = applicationCreator(() => team.api, () => ({ project, server }));

async function setEnv(app: string, key: string, value: string, isBuildTime = false): Promise<void> {
  const res = await team.api.patch(`/applications/${app}/envs/bulk`, { variables: [{ key, value, is_build_time: isBuildTime }] });
  expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
}

async function deploy(app: string, query = ""): Promise<string> {
  const res = await team.api.post(`/applications/${app}/deploy${query}`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.message).toMatch(/queued/i);
  return res.body.deployment_uuid as string;
}

async function deployment(uuid: string): Promise<Record<string, any>> {
  const res = await team.api.get(`/deployments/${uuid}`);
  expect(res.status).toBe(200);
  return res.body;
}

async function settled(uuid: string, timeoutMs = DEPLOY_TIMEOUT_S * 1000): Promise<Record<string, any>> {
  return until(
    `deployment ${uuid} to end`,
    async () => {
      const d = await deployment(uuid);
      return ["finished", "failed", "cancelled"].includes(d.status) ? d : false;
    },
    timeoutMs,
    500,
  );
}

async function deployed(app: string): Promise<Record<string, any>> {
  const d = await settled(await deploy(app));
  expect(d.status, `deployment failed: ${d.reason ?? ""}\n${String(d.logs).slice(-3000)}`).toBe("finished");
  return d;
}

const containersOf = async (app: string) =>
  (await sh("docker", ["ps", "-a", "--filter", `label=capstan.resource.uuid=${app}`, "--format", "{{.Names}} {{.State}}"])).split("\n").filter(Boolean);

const fixtureFiles = async (name: string): Promise<Record<string, string>> => {
  const base = join(repo, "test/fixtures/apps", name);
  const out: Record<string, string> = {};
  const walk = async (dir: string, rel: string) => {
    for (const entry of await readdir(join(dir), { withFileTypes: true })) {
      const r = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) await walk(join(dir, entry.name), r);
      else out[r] = await readFile(join(dir, entry.name), "utf8");
    }
  };
  await walk(base, "");
  return out;
};

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  await buildHelloImage(HELLO_IMAGE);

  repos = await GitRepos.create();
  git = await startGitDaemon(repos.base);

  proxyPort = await freePort();
  const httpsPort = await freePort();
  const port = await freePort();
  t = await startTestInstance(
    {
      // The server is this machine, added at 127.0.0.1: loopback addresses need the opt-out (docs/configuration.md).
      ...localProxyInstanceEnv({ port, proxyName: PROXY_NAME, proxyPort, httpsPort, deployTimeoutS: DEPLOY_TIMEOUT_S }),
      PLATFORM_BUILD_CONCURRENCY: "2",
      PLATFORM_BUILDER_IMAGE_NODE: "capstan-test/node:latest",
      PLATFORM_BUILDER_IMAGE_PYTHON: "capstan-test/python:latest",
      PLATFORM_BUILDER_IMAGE_GO: "capstan-test/go:latest",
      PLATFORM_BUILDER_IMAGE_STATIC: "capstan-test/static:latest",
      PLATFORM_BUILDER_IMAGE_RUNTIME: "capstan-test/debian:latest",
    },
    { host: "127.0.0.1", port },
  );
  team = await t.newTeam();
  const local = await registerLocalServer(team, keys);
  ({ server, stateDir } = local);
  agentOpts = { url: `http://127.0.0.1:${port}`, token: local.agentToken, stateDir };
  startAgent();
  await until("the agent to connect", async () => (await serverStatus()) === "reachable", 60_000);
  project = (await team.api.post("/projects", { name: `e2e-${RUN}` })).body.uuid;
}, 600_000);

afterAll(async () => {
  await stopAgent().catch(() => {});
  await t?.close();
  await git?.stop().catch(() => {});
  await repos?.cleanup().catch(() => {});
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
  await sh("docker", ["rm", "-f", PROXY_NAME]).catch(() => {});
  await sh("docker", ["volume", "rm", "-f", `${PROXY_NAME}-data`]).catch(() => {});
  keys.cleanup();
});

describe("applications on a real engine, through the proxy", () => {
  it("containerimage: deploys the image, serves it by domain, and a changed variable shows after a redeploy", async () => {
    const host = `image-${RUN}.e2e.test`;
    const app = await create("dockerimage", common("hello-image", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}` }));
    await setEnv(app, "GREETING", "one");
    const first = await deployed(app);
    expect(first.logs).toBeTruthy();
    await answers(host, "hello one");
    await setEnv(app, "GREETING", "two");
    await deployed(app);
    await answers(host, "hello two");
    // The old container is gone; one serves.
    expect((await containersOf(app)).length).toBe(1);
    // The engine's status reaches the API.
    await until("status running", async () => ((await team.api.get(`/applications/${app}`)).body.status as string).startsWith("running"), 30_000);
    // The server's domains: the application's, served by its running container now.
    const domains = await team.api.get(`/servers/${server.uuid}/domains`);
    expect(domains.body.data).toContainEqual(expect.objectContaining({ domain: host, resource_uuid: app, resource_type: "application", routed: true, stale: false }));
    // Logs of the serving container.
    const logs = await team.api.get(`/applications/${app}/logs?since=600&tail=50`);
    expect(logs.status).toBe(200);
  });

  it("containerfile: builds a raw Dockerfile and serves it", async () => {
    const host = `dockerfile-${RUN}.e2e.test`;
    const dockerfile = [
      "FROM capstan-test/busybox:latest",
      "ARG BUILD_NOTE=none",
      "RUN mkdir -p /www && echo \"built with $BUILD_NOTE\" > /www/note",
      'CMD ["sh", "-c", "echo \\"dockerfile $GREETING $(cat /www/note)\\" > /www/index.html; exec httpd -f -p 8000 -h /www"]',
    ].join("\n");
    const app = await create("dockerfile", common("hello-dockerfile", { dockerfile, ports_exposes: "8000", fqdn: `http://${host}` }));
    await setEnv(app, "GREETING", "alpha");
    await setEnv(app, "BUILD_NOTE", "note-1", true);
    await deployed(app);
    await answers(host, "dockerfile alpha built with note-1");
    await setEnv(app, "GREETING", "beta");
    await deployed(app);
    await answers(host, "dockerfile beta built with note-1");
  });

  const sources: { pack: string; fixture: string; port: string; expect: (v: string) => string; buildTime?: boolean }[] = [
    { pack: "builder_a", fixture: "node", port: "3000", expect: (v) => `node fixture: ${v}` },
    { pack: "builder_b", fixture: "static-build", port: "8080", expect: (v) => `static-build fixture: ${v}`, buildTime: true },
    { pack: "builder_c", fixture: "procfile", port: "5000", expect: (v) => `procfile fixture: ${v}` },
    { pack: "builder_d", fixture: "descriptor", port: "8080", expect: (v) => `descriptor fixture: ${v}` },
  ];
  for (const s of sources) {
    it(`${s.pack}: clones the repository, builds with its build system and serves it`, async () => {
      const repoName = `${s.fixture}-${RUN}.git`;
      await repos.repo(repoName, await fixtureFiles(s.fixture));
      const host = `${s.pack.replace("_", "-")}-${RUN}.e2e.test`;
      const app = await create(
        "public",
        common(`${s.fixture}-app`, { git_repository: git.url(repoName), git_branch: "main", build_pack: s.pack, ports_exposes: s.port, fqdn: `http://${host}` }),
      );
      await setEnv(app, "GREETING", "first", s.buildTime);
      const d = await deployed(app);
      expect(d.commit).toBe(await sh("git", ["--git-dir", join(repos.base, repoName), "rev-parse", "main"]));
      expect(d.commit_message).toBe("initial commit");
      await answers(host, s.expect("first"), 60_000);
      await setEnv(app, "GREETING", "second", s.buildTime);
      await deployed(app);
      await answers(host, s.expect("second"), 60_000);
    });
  }

  it("containercompose: runs the services, routes the public one", async () => {
    const host = `compose-${RUN}.e2e.test`;
    const compose = [
      "services:",
      "  web:",
      "    image: capstan-test/busybox:latest",
      "    command: [\"sh\", \"-c\", \"mkdir -p /www && echo \\\"compose $${GREETING} $$(wget -q -O- http://api:9000/ || echo no-api)\\\" > /www/index.html; exec httpd -f -p 8080 -h /www\"]",
      "    environment:",
      "      GREETING: ${GREETING}",
      "    depends_on: [api]",
      "  api:",
      "    image: capstan-test/busybox:latest",
      "    command: [\"sh\", \"-c\", \"mkdir -p /www && echo api-ok > /www/index.html; exec httpd -f -p 9000 -h /www\"]",
      "x-capstan-public-service: web",
    ].join("\n");
    const app = await create("dockercompose", common("hello-compose", { docker_compose_raw: compose, ports_exposes: "8080", fqdn: `http://${host}` }));
    await setEnv(app, "GREETING", "c1");
    await deployed(app);
    await answers(host, "compose c1");
    await setEnv(app, "GREETING", "c2");
    await deployed(app);
    await answers(host, "compose c2");
  });
});

describe("deployments that must not get stuck", () => {
  const slowDockerfile = (marker: string) =>
    ["FROM capstan-test/busybox:latest", `RUN echo ${marker} && sleep 120`, 'CMD ["httpd", "-f", "-p", "8080"]'].join("\n");

  it("cancel during a running build stops it and frees the slot", async () => {
    const marker = `slow-${RUN}-${randomBytes(2).toString("hex")}`;
    const app = await create("dockerfile", common("slow-build", { dockerfile: slowDockerfile(marker), ports_exposes: "8080" }));
    const uuid = await deploy(app);
    await until("the build to run", async () => (await deployment(uuid)).status === "in_progress" && String((await deployment(uuid)).logs).includes(marker), 60_000);
    const started = Date.now();
    const res = await team.api.post(`/deployments/${uuid}/cancel`);
    expect(res.status).toBe(200);
    const d = await settled(uuid, 30_000);
    expect(d.status).toBe("cancelled");
    // The build's container (classic builder: one per RUN step) is gone soon after.
    await until("the build to stop", async () => !(await sh("docker", ["ps", "--format", "{{.Command}}"])).includes(marker), 30_000);
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(await containersOf(app)).toEqual([]);
    // Cancelling again is a 400: it is no longer queued or in progress.
    expect((await team.api.post(`/deployments/${uuid}/cancel`)).status).toBe(400);
    // The slot is free: the next deployment runs to the end.
    const host = `after-cancel-${RUN}.e2e.test`;
    const next = await create("dockerimage", common("after-cancel", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}` }));
    await setEnv(next, "GREETING", "free");
    await deployed(next);
    await answers(host, "hello free");
  });

  it("an agent killed mid-deploy: the deployment ends (finished once, or failed with a reason) within its deadline", async () => {
    const marker = `killed-${RUN}`;
    const dockerfile = ["FROM capstan-test/busybox:latest", `RUN echo ${marker} && sleep 8`, 'CMD ["httpd", "-f", "-p", "8080"]'].join("\n");
    const app = await create("dockerfile", common("agent-killed", { dockerfile, ports_exposes: "8080" }));
    const uuid = await deploy(app);
    await until("the build to run", async () => (await deployment(uuid)).status === "in_progress", 60_000);
    await stopAgent("SIGKILL");
    await new Promise((r) => setTimeout(r, 2_000));
    startAgent();
    const d = await settled(uuid);
    expect(["finished", "failed"]).toContain(d.status);
    if (d.status === "failed") expect(d.reason).toBeTruthy();
    // Never two serving containers for one deployment.
    const running = (await containersOf(app)).filter((c) => c.endsWith(" running"));
    expect(running.length).toBeLessThanOrEqual(1);
    await until("the agent to be back", async () => (await serverStatus()) === "reachable", 60_000);
  });

  it("a repository that does not exist fails the deployment with the reason", async () => {
    const app = await create("public", common("missing-repo", { git_repository: git.url("does-not-exist.git"), git_branch: "main", build_pack: "builder_a" }));
    const d = await settled(await deploy(app));
    expect(d.status).toBe("failed");
    expect(String(d.reason)).toMatch(/not found|does not exist|repository/i);
  });
});

describe("lifecycle from the engine", () => {
  it("stop, start, a container stopped behind the platform's back, and delete", async () => {
    const host = `life-${RUN}.e2e.test`;
    const app = await create("dockerimage", common("lifecycle", { docker_registry_image_name: HELLO_IMAGE, ports_exposes: "8080", fqdn: `http://${host}` }));
    await setEnv(app, "GREETING", "alive");
    await deployed(app);
    await answers(host, "hello alive");

    expect((await team.api.post(`/applications/${app}/stop`)).status).toBe(200);
    await until("stopped status", async () => ((await team.api.get(`/applications/${app}`)).body.status as string).startsWith("exited"), 30_000);
    expect((await viaProxy(host)).status).not.toBe(200);

    expect((await team.api.post(`/applications/${app}/start`)).status).toBe(200);
    await answers(host, "hello alive");

    // Behind the platform's back: the agent's event stream reports it.
    const [name] = (await containersOf(app)).map((c) => c.split(" ")[0]!);
    await sh("docker", ["stop", "-t", "1", name!]);
    await until("status from the engine", async () => ((await team.api.get(`/applications/${app}`)).body.status as string).startsWith("exited"), 30_000);

    const del = await team.api.delete(`/applications/${app}?delete_volumes=true`);
    expect(del.status).toBe(200);
    await until("containers removed", async () => (await containersOf(app)).length === 0, 60_000);
    expect((await viaProxy(host)).status).not.toBe(200);
  });
});

describe("cleanup by label", () => {
  it("everything the agent created for the apps carries the agent's extra label", async () => {
    const unlabelled = async (kind: "ps" | "volume" | "network") => {
      const args = kind === "ps" ? ["ps", "-a", "-q", "--filter", "label=capstan.resource.uuid"] : [kind, "ls", "-q", "--filter", "label=capstan.resource.uuid"];
      const all = (await sh("docker", args)).split("\n").filter(Boolean);
      const labelled = new Set((await sh("docker", [...args, "--filter", "label=capstan.test=1"])).split("\n").filter(Boolean));
      return all.filter((id) => !labelled.has(id));
    };
    expect(await unlabelled("ps")).toEqual([]);
    expect(await unlabelled("volume")).toEqual([]);
    expect(await unlabelled("network")).toEqual([]);
  });
});
