import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeployPayload, ProxyRoute, ProxySettings } from "@capstan/shared";
import { composeDown, deployCompose } from "../../agent/src/deploy/compose.js";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import { syncProxy, type ProxyOptions } from "../../agent/src/proxy/index.js";
import { parseCompose, rewriteCompose } from "../../control-plane/src/compose/index.js";
import { repo, sh, until } from "./support/kit.js";
import { httpGet } from "./support/http.js";

/**
 * A compose application on the real local engine, end to end from the user's YAML: the control
 * plane's parseCompose + rewriteCompose, the agent's deployCompose (docker-compose 1.29 from
 * Debian, as in the agent image), a real Caddy configured by syncProxy, HTTP through it on
 * loopback. Two services: "web" (public) builds its page from the app's variables and from
 * "api", which it reaches by service name on the application's own network.
 */
const RUN = randomBytes(4).toString("hex");
const APP = randomUUID();
const NET = `capstan-test-compose-${RUN}`;
const PROXY = `capstan-test-compose-proxy-${RUN}`;
const PROXY_VOLUME = `capstan-test-compose-proxy-${RUN}`;
const HTTP_PORT = 18280;
const HOST = `compose-${RUN}.capstan.test`;
const BUSYBOX = "capstan-test/busybox:latest";
const TEST_LABELS = { "capstan.test": "1", "capstan.test.run": RUN };

const engine = new DockerodeEngine();
const proxy: ProxySettings = { name: PROXY, image: "capstan-test/caddy:latest", networks: [NET], ensure_networks: [], http_port: HTTP_PORT, https_port: 18643 };
const proxyOpts: ProxyOptions = { volume: PROXY_VOLUME, labels: { "capstan.test": "1" }, select: { "capstan.test.run": RUN }, hostIp: "127.0.0.1" };
const routes: ProxyRoute[] = [{ host: HOST, https: false, path: "/" }];
let stateDir: string;
const lines: string[] = [];
const ctx = (timeoutMs = 240_000) => ({ signal: AbortSignal.timeout(timeoutMs), progress: (l: string) => void lines.push(l), stateDir });

const COMPOSE = `
x-capstan-public-service: web
x-httpd: &httpd
  image: ${BUSYBOX}
  restart: unless-stopped
  # httpd as PID 1 ignores SIGTERM; an init forwards it, so a redeploy does not wait 10 s per service.
  init: true
services:
  api:
    <<: *httpd
    volumes: ["data:/data"]
    # The volume keeps a line per start: a redeploy shows 2.
    command: ["sh", "-c", "mkdir -p /www && echo start >> /data/starts && echo \\"api-ok starts=$$(wc -l < /data/starts)\\" > /www/index.html && exec httpd -f -p 8081 -h /www"]
    healthcheck:
      test: ["CMD", "wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8081/"]
      interval: 1s
      timeout: 2s
      retries: 30
    labels:
      capstan.proxy.routes: '[{"host":"hijack-${RUN}.capstan.test","https":false,"path":"/"}]'
  web:
    <<: *httpd
    environment:
      GREETING: \${GREETING}
      LEAK: "[\${CAPSTAN_AGENT_TOKEN}]"
    expose: ["8080"]
    depends_on:
      api: {condition: service_healthy}
    command: ["sh", "-c", "mkdir -p /www && printf 'greeting=%s leak=%s api=%s' \\"$$GREETING\\" \\"$$LEAK\\" \\"$$(wget -q -O - http://api:8081/)\\" > /www/index.html && exec httpd -f -p 8080 -h /www"]
    healthcheck:
      test: ["CMD-SHELL", "wget -q -O /dev/null http://127.0.0.1:8080/ || exit 1"]
      interval: 1s
      timeout: 2s
      retries: 30
volumes:
  data:
`;

function payload(deployment: string, env: Record<string, string>, rollout: number): DeployPayload {
  const doc = parseCompose(COMPOSE);
  const compose = rewriteCompose(doc, {
    appUuid: APP,
    appName: "compose e2e",
    deploymentUuid: deployment,
    network: NET,
    routes,
    port: null,
    env,
    rollout,
    extraLabels: TEST_LABELS,
  });
  return {
    deployment_uuid: deployment,
    app: { uuid: APP, name: "compose e2e" },
    source: { kind: "compose", compose },
    // Compose applications build nothing; the payload shape still carries the base images.
    build: { pack: "containercompose", no_cache: false, base_directory: "/", env: {}, base_images: { node: BUSYBOX, python: BUSYBOX, go: BUSYBOX, static: BUSYBOX, runtime: BUSYBOX } },
    run: { env, ports: [8080], health: null, mounts: [], network: NET, networks: [], ensure_networks: [], proxy_network: null, memory: null, cpus: null, routes },
    proxy,
  };
}


/** GET through the proxy on loopback with our Host header. */
const viaProxy = (host = HOST) => httpGet({ host: "127.0.0.1", port: HTTP_PORT, headers: { Host: host }, timeoutMs: 10_000 });

/** wget from a throwaway container on the destination network (what another app there sees). */
const fromNeighbour = (url: string) =>
  sh("docker", ["run", "--rm", "--network", NET, ...Object.entries(TEST_LABELS).flatMap(([k, v]) => ["--label", `${k}=${v}`]), BUSYBOX, "sh", "-c", `wget -q -O - ${url} 2>/dev/null || echo unreachable`]);

const GREETING_1 = "hello $HOME ${PATH} $$ `id` \"quoted\"";
const GREETING_2 = "second deploy ✓";

/** The agent image has Debian's docker-compose; this test runs the agent's code on this machine. */
async function ensureCompose(): Promise<void> {
  const has = (cmd: string, args: string[]) => sh(cmd, args).then(() => true, () => false);
  if ((await has("docker", ["compose", "version"])) || (await has("docker-compose", ["version"]))) return;
  await sh("bash", ["-c", `. "${join(repo, "test/kit/lib.sh")}" && apt_install docker-compose`]);
}

beforeAll(async () => {
  await ensureCompose();
  await sh("bash", [join(repo, "test/kit/images.sh"), "busybox", "caddy"]);
  await sh("docker", ["network", "create", "--label", "capstan.test=1", NET]);
  stateDir = await mkdtemp(join(tmpdir(), "capstan-compose-e2e-"));
  // What the agent holds in its environment must never reach the services.
  process.env.CAPSTAN_AGENT_TOKEN = "agent-secret-token";
});

afterAll(async () => {
  delete process.env.CAPSTAN_AGENT_TOKEN;
  await composeDown(engine, { appUuid: APP, removeVolumes: true }, ctx()).catch(() => {});
  await sh("docker", ["rm", "-f", PROXY]).catch(() => {});
  await sh("docker", ["volume", "rm", "-f", PROXY_VOLUME]).catch(() => {});
  await sh("docker", ["network", "rm", NET]).catch(() => {});
  await rm(stateDir, { recursive: true, force: true });
});

describe("compose application on a real engine", () => {
  const first = randomUUID();

  it("deploys both services and serves the public one through the proxy", async () => {
    const p = payload(first, { GREETING: GREETING_1 }, Date.now());
    const result = await deployCompose(engine, p, ctx());
    expect(result).toEqual({ container: `${APP}-web`, status: "running:healthy" });
    // Values of the app's variables never appear in the deployment log.
    expect(lines.join("\n")).not.toContain("hello $HOME");

    const file = join(stateDir, "compose", APP, "docker-compose.yml");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect((await stat(join(stateDir, "compose", APP))).mode & 0o777).toBe(0o700);

    const web = JSON.parse(await sh("docker", ["inspect", `${APP}-web`]))[0];
    expect(web.Config.Labels).toMatchObject({
      "capstan.managed": "true",
      "capstan.resource.uuid": APP,
      "capstan.resource.type": "application",
      "capstan.deployment": first,
      "capstan.proxy.port": "8080",
      "capstan.proxy.network": NET,
      "capstan.domains": HOST,
      "com.docker.compose.project": `capstan-${APP}`,
    });
    expect(Object.keys(web.NetworkSettings.Networks).sort()).toEqual([`capstan-${APP}`, NET].sort());
    // The api's own capstan.proxy.routes label (a hijack attempt) was dropped by the rewrite.
    const api = JSON.parse(await sh("docker", ["inspect", `${APP}-api`]))[0];
    expect(api.Config.Labels["capstan.proxy.routes"]).toBe("");
    expect(api.State.Health.Status).toBe("healthy");
    expect(await sh("docker", ["volume", "inspect", "-f", "{{json .Labels}}", `${APP}-data`])).toContain(`"capstan.resource.uuid":"${APP}"`);

    const synced = await syncProxy(engine, proxy, ctx(), proxyOpts);
    expect(synced.routes).toBe(1);
    const res = await until("the app through the proxy", async () => {
      const r = await viaProxy();
      return r.status === 200 ? r : null;
    });
    // The variable's text arrives literally ($, ${...}, backticks untouched); the agent's own
    // environment does not leak through ${CAPSTAN_AGENT_TOKEN}; api answered by service name.
    expect(res.body).toBe(`greeting=${GREETING_1} leak=[] api=api-ok starts=1`);
    expect((await viaProxy(`hijack-${RUN}.capstan.test`)).status).toBe(404);
  });

  it("keeps service names private to the application; other apps reach containers by name", async () => {
    expect(await fromNeighbour("http://api:8081/")).toBe("unreachable");
    expect(await fromNeighbour(`http://${APP}-api:8081/`)).toBe("api-ok starts=1");
  });

  it("redeploys with a changed variable: new value served, volume kept", async () => {
    const second = randomUUID();
    const result = await deployCompose(engine, payload(second, { GREETING: GREETING_2 }, Date.now()), ctx());
    expect(result).toEqual({ container: `${APP}-web`, status: "running:healthy" });
    await syncProxy(engine, proxy, ctx(), proxyOpts);
    const body = await until("the new deployment through the proxy", async () => {
      const r = await viaProxy();
      return r.status === 200 && r.body.includes(GREETING_2) ? r.body : null;
    });
    expect(body).toBe(`greeting=${GREETING_2} leak=[] api=api-ok starts=2`);
    expect(await sh("docker", ["inspect", "-f", '{{index .Config.Labels "capstan.deployment"}}', `${APP}-web`])).toBe(second);
  });

  it("refuses a payload that is not the control plane's rewrite, without running anything", async () => {
    const p = payload(randomUUID(), { GREETING: "x" }, Date.now());
    const doc = JSON.parse(p.source.kind === "compose" ? p.source.compose : "{}");
    doc.services[`${APP}-web`].privileged = true;
    const tampered = { ...p, source: { kind: "compose" as const, compose: JSON.stringify(doc) } };
    await expect(deployCompose(engine, tampered, ctx())).rejects.toThrow(/not the platform's rewrite.*privileged/);
    const yaml = { ...p, source: { kind: "compose" as const, compose: "services:\n  x:\n    image: busybox\n" } };
    await expect(deployCompose(engine, yaml, ctx())).rejects.toThrow(/not the platform's rewrite/);
    const other = { ...p, app: { uuid: randomUUID(), name: "other" } };
    await expect(deployCompose(engine, other, ctx())).rejects.toThrow(/not the platform's rewrite for this deployment \(project\)/);
    // The running deployment is untouched.
    expect(await sh("docker", ["inspect", "-f", '{{index .Config.Labels "capstan.deployment"}}', `${APP}-web`])).not.toBe(p.deployment_uuid);
  });

  it("fails a deployment whose service exits, with the reason", async () => {
    const broken = `services:\n  web:\n    image: ${BUSYBOX}\n    command: ["sh", "-c", "echo boom >&2; exit 3"]\n    expose: ["8080"]\n`;
    const other = randomUUID();
    const compose = rewriteCompose(parseCompose(broken), {
      appUuid: other, appName: "broken", deploymentUuid: randomUUID(), network: NET, routes: [], port: null, env: {}, rollout: Date.now(), extraLabels: TEST_LABELS,
    });
    const p = payload(randomUUID(), {}, Date.now());
    const meta = JSON.parse(compose)["x-capstan"];
    const bad: DeployPayload = { ...p, deployment_uuid: meta.deployment_uuid, app: { uuid: other, name: "broken" }, source: { kind: "compose", compose } };
    try {
      await expect(deployCompose(engine, bad, ctx())).rejects.toThrow(/service .*-web (exited with code 3|keeps restarting)/);
      expect(lines.some((l) => l.includes("boom"))).toBe(true);
    } finally {
      await composeDown(engine, { appUuid: other, removeVolumes: true }, ctx());
    }
  });

  it("composeDown removes containers, network, volumes and the stored file", async () => {
    const removed = await composeDown(engine, { appUuid: APP, removeVolumes: true }, ctx());
    expect(removed.volumes).toBeGreaterThanOrEqual(0);
    expect(await sh("docker", ["ps", "-aq", "--filter", `label=capstan.resource.uuid=${APP}`])).toBe("");
    expect(await sh("docker", ["network", "ls", "-q", "--filter", `name=^capstan-${APP}$`])).toBe("");
    expect(await sh("docker", ["volume", "ls", "-q", "--filter", `name=${APP}-data`])).toBe("");
    await expect(stat(join(stateDir, "compose", APP))).rejects.toThrow();
    await syncProxy(engine, proxy, ctx(), proxyOpts);
    expect((await viaProxy()).status).toBe(404);
  });
});
