import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeployPayload, JobResult } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import type { JobContext } from "../../agent/src/dispatch/types.js";
import { createHandlers } from "../../agent/src/handlers/index.js";
import { GitRepos, startHttpGit, type HttpGitServer } from "../support/git-server.js";
import { sh, until } from "./support/kit.js";
import { viaProxyAt } from "./support/http.js";
import { freePort } from "../support/ports.js";

/**
 * The app.deploy / app.action / app.logs handlers on the real local engine: real builds
 * (busybox images), real containers with Docker health checks, and a real Caddy proxy
 * (capstan-test/caddy) configured by syncProxy, checked with HTTP through its published port.
 */
const RUN = randomBytes(4).toString("hex");
const NET = `capstan-test-deploy-${RUN}`;
const PROXY = `capstan-test-deploy-proxy-${RUN}`;
const APP = `e2e-${RUN}-web`;
const HOST = `web-${RUN}.deploy.test`;
const PREBUILT = `capstan-test/deploy-web:${RUN}`;
const LABELS = { "capstan.test": "1", "capstan.test.run": RUN };

/** A tiny web app: prints a start line, serves "hello $GREETING" on :8080. */
const APP_DOCKERFILE = `FROM capstan-test/busybox:latest
CMD ["sh", "-c", "echo \\"starting with GREETING=$GREETING\\"; mkdir -p /www && echo \\"hello $GREETING\\" > /www/index.html && exec httpd -f -p 8080 -h /www"]
`;

const engine = new DockerodeEngine();
let stateDir: string;
let httpPort: number;
let handlers: ReturnType<typeof createHandlers>;
let repos: GitRepos;
let gitServer: HttpGitServer;
const GIT_TOKEN = "git-token-e2e-0123456789";

/** GET through the proxy on loopback with the app's Host header. */
const get = (host = HOST, path = "/") => viaProxyAt("127.0.0.1", httpPort, host, path);

function job(signal: AbortSignal = AbortSignal.timeout(120_000)): JobContext & { lines: string[] } {
  const lines: string[] = [];
  return { signal, progress: (l) => void lines.push(l), job: { id: `job-${randomUUID()}`, attempt: 1 }, lines };
}

const health = (path = "/") => ({ path, port: 8080, interval_s: 1, timeout_s: 3, retries: 2, start_period_s: 0 });

function payload(over: { source?: DeployPayload["source"]; env?: Record<string, string>; health?: DeployPayload["run"]["health"]; noCache?: boolean } = {}): DeployPayload {
  return {
    deployment_uuid: randomUUID(),
    app: { uuid: APP, name: "e2e web" },
    source: over.source ?? { kind: "image", image: PREBUILT },
    build: { pack: over.source?.kind === "dockerfile" ? "containerfile" : "containerimage", no_cache: over.noCache ?? false, base_directory: "/", env: { BUILD_TOKEN: "build-token-value" }, base_images: { node: "x", python: "x", go: "x", static: "x", runtime: "x" } },
    run: {
      env: { GREETING: "one", API_SECRET: "super-secret-value" },
      ...(over.env ? { env: over.env } : {}),
      ports: [8080],
      health: over.health === undefined ? health() : over.health,
      mounts: [{ volume: "data", mount_path: "/data" }],
      network: NET,
      networks: [],
      ensure_networks: [],
      proxy_network: null,
      memory: "64m",
      cpus: "0.5",
      routes: [{ host: HOST, https: false, path: "/" }],
    },
    proxy: { name: PROXY, image: "capstan-test/caddy:latest", networks: [NET], ensure_networks: [], http_port: httpPort, https_port: httpsPort },
  };
}
let httpsPort: number;

const appContainers = async () => (await engine.listContainers({ "capstan.resource.uuid": APP, "capstan.test.run": RUN })).sort((a, b) => a.name.localeCompare(b.name));

async function served(): Promise<string> {
  return until("the app answers through the proxy", async () => {
    const r = await get();
    return r.status === 200 ? r.body.trim() : null;
  }, 20_000);
}

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "capstan-deploy-state-"));
  httpPort = await freePort();
  httpsPort = await freePort();
  await engine.createNetwork({ name: NET, driver: "bridge", labels: { ...LABELS, "capstan.managed": "true" } });
  await sh("docker", ["build", "-q", "--label", "capstan.test=1", "-t", PREBUILT, "-"], { input: APP_DOCKERFILE, timeoutMs: 120_000 });
  repos = await GitRepos.create();
  gitServer = await startHttpGit(repos.base, { auth: { username: "x-access-token", token: GIT_TOKEN } });
  handlers = createHandlers(engine, {
    extraLabels: LABELS,
    stateDir,
    // A proxy of this file's own, routing only this file's containers, on loopback.
    proxy: { volume: `${PROXY}-data`, select: { "capstan.test.run": RUN }, hostIp: "127.0.0.1" },
    // busybox httpd as PID 1 ignores SIGTERM: do not wait the production 10 s for it.
    timing: { stopTimeoutS: 1, stableMs: 2_000 },
  });
}, 180_000);

afterAll(async () => {
  const ids = (await sh("docker", ["ps", "-aq", "--filter", `label=capstan.test.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  const proxy = await engine.inspectContainer(PROXY).catch(() => null);
  if (proxy) ids.push(proxy.id);
  if (ids.length) await sh("docker", ["rm", "-f", ...ids]).catch(() => {});
  const vols = (await sh("docker", ["volume", "ls", "-q", "--filter", `label=capstan.test.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  await sh("docker", ["volume", "rm", "-f", ...vols, `${PROXY}-data`]).catch(() => {});
  const imgs = (await sh("docker", ["images", "-q", "--filter", `label=capstan.test.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  await sh("docker", ["rmi", "-f", ...new Set(imgs), PREBUILT]).catch(() => {});
  await sh("docker", ["network", "rm", NET]).catch(() => {});
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
  await gitServer?.stop();
  await repos?.cleanup();
}, 120_000);

describe("app.deploy on the real engine", () => {
  let first: JobResult<"app.deploy">;

  it("deploys a local image, waits for its health check and serves it through the proxy", async () => {
    const ctx = job();
    const p = payload();
    first = await handlers["app.deploy"](p, ctx);
    expect(first).toEqual({ image: PREBUILT, container: `${APP}-${p.deployment_uuid.slice(0, 12)}`, commit: null, commit_message: null, status: "running:healthy" });
    expect(await served()).toBe("hello one");
    const c = await engine.inspectContainer(first.container);
    expect(c?.labels).toMatchObject({ "capstan.deployment": p.deployment_uuid, "capstan.domains": HOST, "capstan.proxy.port": "8080", "capstan.proxy.network": NET, "capstan.test": "1" });
    // The volume was created with the platform's labels.
    expect(await sh("docker", ["volume", "inspect", "-f", '{{index .Labels "capstan.resource.uuid"}}', `${APP}-data`])).toBe(APP);
    // Secrets never appear in the progress stream.
    const log = ctx.lines.join("\n");
    expect(log).not.toContain("super-secret-value");
  });

  it("redeploys with a changed env var: the change shows through the proxy, the old container is gone", async () => {
    const r = await handlers["app.deploy"](payload({ env: { GREETING: "two", API_SECRET: "super-secret-value" } }), job());
    expect(r.status).toBe("running:healthy");
    expect(await served()).toBe("hello two");
    const names = (await appContainers()).map((c) => c.name);
    expect(names).toEqual([r.container]);
    first = r;
  });

  it("builds a Dockerfile source (build args, image labels, per-deployment tag) and rolls it out", async () => {
    const p = payload({ source: { kind: "dockerfile", dockerfile: `${APP_DOCKERFILE}ARG BUILD_TOKEN\nRUN echo "token is $BUILD_TOKEN" && echo built > /built.txt\n` }, env: { GREETING: "three" }, noCache: true });
    const ctx = job();
    const r = await handlers["app.deploy"](p, ctx);
    expect(r.image).toBe(`capstan/${APP}:${p.deployment_uuid}`);
    expect(await served()).toBe("hello three");
    expect(await sh("docker", ["image", "inspect", "-f", '{{index .Config.Labels "capstan.resource.uuid"}} {{index .Config.Labels "capstan.managed"}}', r.image])).toBe(`${APP} true`);
    const log = ctx.lines.join("\n");
    expect(log).toMatch(/Step \d+\/\d+ : RUN echo/);
    expect(log).toContain("token is ********");
    expect(log).not.toContain("build-token-value");
    first = r;
  });

  it("deploys a private git repository (token auth, Dockerfile in the base directory) and reports its commit", async () => {
    const repo = await repos.repo(`web-${RUN}.git`, { "apps/web/Dockerfile": APP_DOCKERFILE.replace("hello $GREETING", "hello git $GREETING"), "README.md": "fixture\n" });
    const p = payload({ env: { GREETING: "g1" } });
    p.source = { kind: "git", url: gitServer.url(repo.name), branch: "main", commit: null, auth: { kind: "token", username: "x-access-token", token: GIT_TOKEN } };
    p.build.pack = "containerfile";
    p.build.base_directory = "/apps/web";
    const ctx = job();
    const r = await handlers["app.deploy"](p, ctx);
    expect(r.commit).toBe(repo.commits[0]);
    expect(r.image).toBe(`capstan/${APP}:${p.deployment_uuid}`);
    expect(await served()).toBe("hello git g1");
    expect(ctx.lines.join("\n")).not.toContain(GIT_TOKEN);
    // The clone lived in a private work dir under the state dir, gone after the build.
    expect(await sh("ls", ["-A", join(stateDir, "builds")])).toBe("");
    first = r;
  });

  it("keeps the old container serving when the new one turns unhealthy, and fails with the reason", async () => {
    const p = payload({ env: { GREETING: "four" }, health: health("/missing") });
    const err = await handlers["app.deploy"](p, job()).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/is unhealthy: the health check http:\/\/127\.0\.0\.1:8080\/missing failed/);
    expect(err?.message).toMatch(/404/);
    expect((await appContainers()).map((c) => c.name)).toEqual([first.container]);
    expect(await served()).toBe("hello git g1");
  });

  it("fails a container that exits, quoting its last log lines, and keeps the old one", async () => {
    const p = payload({ source: { kind: "dockerfile", dockerfile: 'FROM capstan-test/busybox:latest\nCMD ["sh", "-c", "echo about to fail with $API_SECRET; exit 7"]\n' }, health: null });
    const err = await handlers["app.deploy"](p, job()).then(
      () => null,
      (e: Error) => e,
    );
    // Seen exited, restarting or already restarted, depending on when the engine's restart policy acts.
    expect(err?.message).toMatch(/(exited with code 7|keeps restarting \(last exit code 7\)|exited and was restarted by the engine)/);
    expect(err?.message).toContain("about to fail with ********");
    expect((await appContainers()).map((c) => c.name)).toEqual([first.container]);
    expect(await served()).toBe("hello git g1");
  });

  it("fails a build with the engine's error message and leaves nothing behind", async () => {
    const p = payload({ source: { kind: "dockerfile", dockerfile: "FROM capstan-test/busybox:latest\nRUN echo using $BUILD_TOKEN && exit 3\n" } });
    const err = await handlers["app.deploy"](p, job()).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/returned a non-zero code: 3/);
    expect(err?.message).not.toContain("build-token-value");
    expect((await appContainers()).map((c) => c.name)).toEqual([first.container]);
    expect(await sh("docker", ["images", "-q", `capstan/${APP}:${p.deployment_uuid}`])).toBe("");
  });

  it("cancel during a long build stops the build quickly and leaves no container", async () => {
    const marker = `capstan-cancel-${RUN}`;
    const p = payload({ source: { kind: "dockerfile", dockerfile: `FROM capstan-test/busybox:latest\nRUN echo ${marker} && sleep 60\n` }, noCache: true });
    const ac = new AbortController();
    const ctx = job(ac.signal);
    const running = handlers["app.deploy"](p, ctx).then(
      () => null,
      (e: Error) => e,
    );
    await until("the long build step runs", async () => ctx.lines.some((l) => l.trim() === marker), 60_000, 100);
    const t0 = Date.now();
    ac.abort(new Error("cancelled by the control plane"));
    const err = await running;
    expect(err?.message).toMatch(/cancelled/);
    expect(Date.now() - t0).toBeLessThan(5_000);
    // The engine stops the build: its RUN container goes away well before the 60 s sleep.
    await until(
      "the build container is gone",
      async () => !(await sh("docker", ["ps", "-a", "--no-trunc", "--format", "{{.Command}}"])).includes(marker),
      20_000,
      250,
    );
    expect((await appContainers()).map((c) => c.name)).toEqual([first.container]);
    expect(await sh("docker", ["images", "-q", `capstan/${APP}:${p.deployment_uuid}`])).toBe("");
    expect(await served()).toBe("hello git g1");
  });

  it("app.logs returns the serving container's lines with timestamps", async () => {
    const r = await handlers["app.logs"]({ app: { uuid: APP, name: "e2e web" }, since_s: 3600, tail: 50 }, job());
    expect(r.container).toBe(first.container);
    expect(r.truncated).toBe(false);
    expect(r.lines.some((l) => /^\d{4}-\d\d-\d\dT[\d:.]+Z starting with GREETING=g1$/.test(l))).toBe(true);
  });

  it("app.action stop, start and restart change the engine state and the proxy follows", async () => {
    const base = { app: { uuid: APP, name: "e2e web" }, delete_volumes: false, docker_cleanup: false, proxy: payload().proxy };
    const stopped = await handlers["app.action"]({ ...base, action: "stop" }, job());
    expect(stopped.status).toMatch(/^exited:/);
    expect((await get()).status).not.toBe(200);

    const started = await handlers["app.action"]({ ...base, action: "start" }, job());
    expect(started.status).toMatch(/^running:/);
    // Health starts over after a start: the proxy routes once it is healthy again, on the next sync.
    await until("healthy again", async () => (await engine.inspectContainer(first.container))?.health === "healthy", 20_000);
    await handlers["app.action"]({ ...base, action: "restart" }, job());
    await until("healthy after restart", async () => (await engine.inspectContainer(first.container))?.health === "healthy", 20_000);
    await handlers["app.action"]({ ...base, action: "start" }, job());
    expect(await served()).toBe("hello git g1");
  });

  it("app.action remove deletes the containers, the app's volumes and its built images", async () => {
    const r = await handlers["app.action"](
      { app: { uuid: APP, name: "e2e web" }, action: "remove", delete_volumes: true, docker_cleanup: true, proxy: payload().proxy },
      job(),
    );
    expect(r).toEqual({ status: "removed" });
    expect(await appContainers()).toEqual([]);
    expect(await sh("docker", ["volume", "ls", "-q", "--filter", `name=^${APP}-data$`])).toBe("");
    expect(await sh("docker", ["images", "-q", "--filter", `label=capstan.resource.uuid=${APP}`])).toBe("");
    expect((await get()).status).not.toBe(200);
    // An image the app did not build is not the app's to delete.
    expect(await sh("docker", ["images", "-q", PREBUILT])).not.toBe("");
  });
});

describe("app.deploy refuses bind mounts the control plane would have refused (the agent is the last line)", () => {
  it.each(["//etc", "/var//run/docker.sock", "/var", "/home"])("a payload binding %j fails with the reason; nothing reaches the engine", async (hostPath) => {
    const uuid = `${APP}-binds`;
    const p = payload();
    const bad: DeployPayload = { ...p, app: { uuid, name: "binds" }, run: { ...p.run, mounts: [{ host_path: hostPath, mount_path: "/host" }] } };
    await expect(handlers["app.deploy"](bad, job())).rejects.toThrow(/refused by the agent: .*system directory/);
    expect(await engine.listContainers({ "capstan.resource.uuid": uuid })).toEqual([]);
  });
});
