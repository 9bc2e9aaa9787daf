import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DeployPayload, NetworkSpec, ProxySettings } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import type { JobContext } from "../../agent/src/dispatch/types.js";
import { gatherFacts } from "../../agent/src/facts/facts.js";
import { parseCompose, rewriteCompose } from "../../control-plane/src/compose/index.js";
import { createHandlers } from "../../agent/src/handlers/index.js";
import { loadImages, onHost, sh, startHosts, stopHosts, until } from "./support/kit.js";
import { fetchFrom, viaProxyAt } from "./support/http.js";
import { freePort } from "../support/ports.js";

/**
 * Network management on the agent, proven with real traffic on the local engine: the
 * network.* job handlers and app.deploy (environment networks, shared networks, the dedicated
 * proxy network, the capstan.proxy.network label) driving real containers (busybox httpd) and
 * a real Caddy proxy; reachability is checked from inside the containers with bounded
 * `timeout 3 wget`, and through the proxy's published port on loopback. The encrypted overlay
 * runs on a single-node swarm inside a test host (capstan-test/dind), whose engine the agent
 * code reaches through /proc/<pid>/root/run/docker.sock.
 */
const RUN = randomBytes(4).toString("hex");
const LABELS = { "capstan.test": "1", "capstan.test.run": RUN };
const IMAGE = `capstan-test/net-web:${RUN}`;
const PROXY = `capstan-test-netproxy-${RUN}`;
const HOSTS = `capstan-test-net-${RUN}`;
const net = (what: string) => `capstan-test-${what}-${RUN}`;
const ENV1 = net("env1");
const ENV2 = net("env2");
const ENV3 = net("env3");
const SHARED = net("shared");
const PROXY_NET = net("proxynet");
const NONE = net("none");
const BEHIND = net("behind");
const OVERLAY = net("overlay");

/** Serves "<name>" on :8080; busybox has wget and nc for the reachability probes. */
const APP_DOCKERFILE = `FROM capstan-test/busybox:latest
CMD ["sh", "-c", "mkdir -p /www && echo \\"$APP_NAME\\" > /www/index.html && exec httpd -f -p 8080 -h /www"]
`;

const engine = new DockerodeEngine();
let handlers: ReturnType<typeof createHandlers>;
let stateDir: string;
let httpPort: number;
let httpsPort: number;
const extraContainers: string[] = [];

function job(): JobContext & { lines: string[] } {
  const lines: string[] = [];
  return { signal: AbortSignal.timeout(150_000), progress: (l) => void lines.push(l), job: { id: `job-${randomUUID()}`, attempt: 1 }, lines };
}

const spec = (name: string, scope: string): NetworkSpec => ({ name, driver: "bridge", encrypted: false, attachable: true, labels: { "capstan.network.scope": scope } });

let proxy: ProxySettings;

interface AppDeploy {
  app: string;
  network: string;
  networks?: string[];
  ensure?: NetworkSpec[];
  proxyNetwork?: string | null;
  host?: string;
}

function payload(a: AppDeploy): DeployPayload {
  return {
    deployment_uuid: randomUUID(),
    app: { uuid: `net-${RUN}-${a.app}`, name: a.app },
    source: { kind: "image", image: IMAGE },
    build: { pack: "containerimage", no_cache: false, base_directory: "/", env: {}, base_images: { node: "x", python: "x", go: "x", static: "x", runtime: "x" } },
    run: {
      env: { APP_NAME: a.app },
      ports: [8080],
      health: { path: "/", port: 8080, interval_s: 1, timeout_s: 3, retries: 3, start_period_s: 0 },
      mounts: [],
      network: a.network,
      networks: a.networks ?? [],
      ensure_networks: a.ensure ?? [],
      proxy_network: a.proxyNetwork ?? null,
      memory: null,
      cpus: null,
      routes: a.host ? [{ host: a.host, https: false, path: "/" }] : [],
    },
    proxy,
  };
}

/** Deploys and returns the new container's name. */
async function deploy(a: AppDeploy, ctx = job()): Promise<string> {
  const r = await handlers["app.deploy"](payload(a), ctx);
  expect(r.status).toBe("running:healthy");
  return r.container;
}


const viaProxy = (host: string) => viaProxyAt("127.0.0.1", httpPort, host);

const ipOn = (container: string, network: string) => sh("docker", ["inspect", "-f", `{{(index .NetworkSettings.Networks "${network}").IPAddress}}`, container]);
const networksOf = async (container: string) =>
  (await sh("docker", ["inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", container])).split(" ").filter(Boolean).sort();


beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "capstan-net-state-"));
  httpPort = await freePort();
  httpsPort = await freePort();
  await sh("docker", ["build", "-q", "--label", "capstan.test=1", "-t", IMAGE, "-"], { input: APP_DOCKERFILE, timeoutMs: 120_000 });
  handlers = createHandlers(engine, {
    extraLabels: LABELS,
    stateDir,
    proxy: { volume: `${PROXY}-data`, select: { "capstan.test.run": RUN }, hostIp: "127.0.0.1" },
    timing: { stopTimeoutS: 1, stableMs: 1_000 },
  });
  // Environment mode without proxy isolation: the proxy joins the environment networks.
  proxy = { name: PROXY, image: "capstan-test/caddy:latest", networks: [ENV1, ENV2], ensure_networks: [], http_port: httpPort, https_port: httpsPort };
}, 180_000);

afterAll(async () => {
  const ids = (await sh("docker", ["ps", "-aq", "--filter", `label=capstan.test.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  const p = await engine.inspectContainer(PROXY).catch(() => null);
  if (p) ids.push(p.id);
  for (const c of extraContainers) ids.push(c);
  if (ids.length) await sh("docker", ["rm", "-f", ...ids]).catch(() => {});
  await sh("docker", ["volume", "rm", "-f", `${PROXY}-data`]).catch(() => {});
  const nets = (await sh("docker", ["network", "ls", "-q", "--filter", `label=capstan.test.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  for (const n of [...nets, BEHIND]) await sh("docker", ["network", "rm", n]).catch(() => {});
  await sh("docker", ["rmi", "-f", IMAGE]).catch(() => {});
  await stopHosts(HOSTS).catch(() => {});
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
}, 180_000);

describe("isolation mode environment", () => {
  const c: Record<string, string> = {};

  it("creates each environment's network on deploy, with the platform's labels", async () => {
    const first = job();
    c.a1 = await deploy({ app: "a1", network: ENV1, ensure: [spec(ENV1, "environment")] }, first);
    expect(first.lines).toContain(`network ${ENV1} created (bridge)`);
    c.a2 = await deploy({ app: "a2", network: ENV1, ensure: [spec(ENV1, "environment")] });
    c.b1 = await deploy({ app: "b1", network: ENV2, ensure: [spec(ENV2, "environment")] });
    const labels = JSON.parse(await sh("docker", ["network", "inspect", "-f", "{{json .Labels}}", ENV1]));
    expect(labels).toEqual({ "capstan.managed": "true", "capstan.network.scope": "environment", ...LABELS });
    expect(await networksOf(c.a1)).toEqual([ENV1]);
    expect(await networksOf(c.b1)).toEqual([ENV2]);
  });

  it("lets containers of one environment reach each other", async () => {
    expect(await fetchFrom(c.a1!, c.a2!)).toBe("a2");
    expect(await fetchFrom(c.a2!, c.a1!)).toBe("a1");
  });

  it("keeps containers of two environments apart, by name and by address", async () => {
    expect(await fetchFrom(c.a1!, c.b1!)).toBeNull();
    const b1Ip = await ipOn(c.b1!, ENV2);
    expect(b1Ip).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(await fetchFrom(c.a1!, b1Ip)).toBeNull();
    expect(await fetchFrom(c.b1!, await ipOn(c.a1!, ENV1))).toBeNull();
  });

  it("joins two environments through a shared network attached on the next deployment", async () => {
    const ensured = await handlers["network.ensure"]({ networks: [spec(SHARED, "shared")] }, job());
    expect(ensured.networks).toEqual([expect.objectContaining({ name: SHARED, driver: "bridge", scope: "local", encrypted: false, containers: [] })]);
    expect(ensured.networks[0]!.subnet).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    c.a1 = await deploy({ app: "a1", network: ENV1, networks: [SHARED], ensure: [spec(ENV1, "environment")] });
    c.b1 = await deploy({ app: "b1", network: ENV2, networks: [SHARED], ensure: [spec(ENV2, "environment")] });
    expect(await networksOf(c.a1)).toEqual([ENV1, SHARED].sort());
    expect(await fetchFrom(c.a1!, c.b1!)).toBe("b1");
    expect(await fetchFrom(c.b1!, c.a1!)).toBe("a1");
    // a2 was not attached: still apart from b1.
    expect(await fetchFrom(c.a2!, c.b1!)).toBeNull();
  });

  it("network.remove disconnects the attached containers first, and they are apart again", async () => {
    const r = await handlers["network.remove"]({ name: SHARED }, job());
    expect(r).toEqual({ removed: true, disconnected: [c.a1, c.b1].sort() });
    expect(await sh("docker", ["network", "ls", "-q", "--filter", `name=^${SHARED}$`])).toBe("");
    expect(await networksOf(c.a1!)).toEqual([ENV1]);
    expect(await fetchFrom(c.a1!, c.b1!)).toBeNull();
    expect(await handlers["network.remove"]({ name: SHARED }, job())).toEqual({ removed: false, disconnected: [] });
  });
});

describe("proxy isolation", () => {
  const c: Record<string, string> = {};
  const PUBLIC_HOST = `p1-${RUN}.net.test`;

  it("migrating: the public container joins the proxy network and is routed over it; the proxy creates that network", async () => {
    // Before cleanup the proxy keeps its old networks next to the dedicated one.
    proxy = { ...proxy, networks: [ENV1, ENV2, PROXY_NET], ensure_networks: [spec(PROXY_NET, "proxy")] };
    c.i1 = await deploy({ app: "i1", network: ENV1, ensure: [spec(ENV1, "environment")] });
    c.p1 = await deploy({ app: "p1", network: ENV1, networks: [PROXY_NET], proxyNetwork: PROXY_NET, ensure: [spec(ENV1, "environment"), spec(PROXY_NET, "proxy")], host: PUBLIC_HOST });
    expect(await networksOf(c.p1)).toEqual([ENV1, PROXY_NET].sort());
    expect(await networksOf(c.i1)).toEqual([ENV1]);
    expect((await engine.inspectContainer(c.p1))?.labels["capstan.proxy.network"]).toBe(PROXY_NET);
    expect(await viaProxy(PUBLIC_HOST)).toEqual({ status: 200, body: "p1\n" });
    expect(await networksOf(PROXY)).toEqual([ENV1, ENV2, PROXY_NET].sort());
    // Still on env1 with the proxy: the internal container reaches it (why cleanup exists).
    expect(await fetchFrom(c.i1!, await ipOn(PROXY, ENV1), 80, PUBLIC_HOST)).toBe("p1");
  });

  it("dials the container on the network its label names, even when the proxy shares two with it", async () => {
    const config = JSON.parse(await sh("docker", ["exec", PROXY, "cat", "/config/caddy/autosave.json"]));
    expect(JSON.stringify(config)).toContain(`"dial":"${c.p1}.${PROXY_NET}:8080"`);
  });

  it("after cleanup the proxy is on the proxy network only (platform networks left, others kept)", async () => {
    // A network made behind the platform's back, joined by hand: the agent must not touch it.
    await sh("docker", ["network", "create", "--label", "capstan.test=1", BEHIND]);
    await sh("docker", ["network", "connect", BEHIND, PROXY]);
    proxy = { ...proxy, networks: [PROXY_NET] };
    const ctx = job();
    c.p1 = await deploy({ app: "p1", network: ENV1, networks: [PROXY_NET], proxyNetwork: PROXY_NET, ensure: [spec(ENV1, "environment"), spec(PROXY_NET, "proxy")], host: PUBLIC_HOST }, ctx);
    expect(ctx.lines).toEqual(expect.arrayContaining([`proxy: left network ${ENV1} (no longer listed)`, `proxy: left network ${ENV2} (no longer listed)`]));
    expect(await networksOf(PROXY)).toEqual([BEHIND, PROXY_NET].sort());
    expect(await viaProxy(PUBLIC_HOST)).toEqual({ status: 200, body: "p1\n" });
  });

  it("an internal container cannot reach the proxy: not by name, not at any of its addresses", async () => {
    const proxyIp = await ipOn(PROXY, PROXY_NET);
    expect(proxyIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(await fetchFrom(c.i1!, proxyIp, 80, PUBLIC_HOST)).toBeNull();
    expect(await fetchFrom(c.i1!, PROXY, 80, PUBLIC_HOST)).toBeNull();
    // Nor the public container on the proxy network.
    expect(await fetchFrom(c.i1!, await ipOn(c.p1!, PROXY_NET))).toBeNull();
    // The public container reaches the proxy there (control: the probe itself works).
    expect(await fetchFrom(c.p1!, proxyIp, 80, PUBLIC_HOST)).toBe("p1");
    // Same environment: i1 still reaches p1 on their environment network.
    expect(await fetchFrom(c.i1!, c.p1!)).toBe("p1");
  });

  it("skips, with the reason, a public container whose routing network the proxy does not join", async () => {
    const host = `b2-${RUN}.net.test`;
    const ctx = job();
    c.b2 = await deploy({ app: "b2", network: ENV2, ensure: [spec(ENV2, "environment")], host }, ctx);
    expect(ctx.lines.join("\n")).toContain(`proxy: container ${c.b2}: network ${ENV2} is not one the proxy joins; not routed`);
    expect((await viaProxy(host)).status).toBe(404);
    expect(await viaProxy(PUBLIC_HOST)).toEqual({ status: 200, body: "p1\n" });
  });

  it("compose: creates the networks first; only the public service joins the proxy network and is routed over it", async () => {
    const appUuid = randomUUID();
    const host = `compose-${RUN}.net.test`;
    const routes = [{ host, https: false, path: "/" }];
    const httpd = (text: string, port: number) => `["sh", "-c", "mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -p ${port} -h /www"]`;
    const yaml = `
x-capstan-public-service: web
services:
  api:
    image: capstan-test/busybox:latest
    init: true
    command: ${httpd("api-ok", 8081)}
  web:
    image: capstan-test/busybox:latest
    init: true
    expose: ["8080"]
    command: ${httpd("web-ok", 8080)}
`;
    const deployment = randomUUID();
    const compose = rewriteCompose(parseCompose(yaml), {
      appUuid,
      appName: "compose net",
      deploymentUuid: deployment,
      network: ENV3,
      networks: [{ name: PROXY_NET, publicOnly: true }],
      proxyNetwork: PROXY_NET,
      routes,
      port: null,
      env: {},
      rollout: Date.now(),
      extraLabels: LABELS,
    });
    const base = payload({ app: "compose", network: ENV3 });
    const p: DeployPayload = {
      ...base,
      deployment_uuid: deployment,
      app: { uuid: appUuid, name: "compose net" },
      source: { kind: "compose", compose },
      build: { ...base.build, pack: "containercompose" },
      run: { ...base.run, health: null, network: ENV3, networks: [PROXY_NET], proxy_network: PROXY_NET, ensure_networks: [spec(ENV3, "environment"), spec(PROXY_NET, "proxy")], routes },
    };
    // The environment network does not exist before this deployment: the agent creates it before `up`.
    expect(await sh("docker", ["network", "ls", "-q", "--filter", `name=^${ENV3}$`])).toBe("");
    const ctx = job();
    const r = await handlers["app.deploy"](p, ctx);
    expect(r.container).toBe(`${appUuid}-web`);
    expect(ctx.lines).toContain(`network ${ENV3} created (bridge)`);
    const web = `${appUuid}-web`;
    const api = `${appUuid}-api`;
    expect(await networksOf(web)).toEqual([`capstan-${appUuid}`, ENV3, PROXY_NET].sort());
    expect(await networksOf(api)).toEqual([`capstan-${appUuid}`, ENV3].sort());
    expect((await engine.inspectContainer(web))?.labels["capstan.proxy.network"]).toBe(PROXY_NET);
    expect(await until("the compose app through the proxy", async () => {
      const res = await viaProxy(host);
      return res.status === 200 ? res.body : null;
    }, 20_000)).toBe("web-ok\n");
    // The internal service reaches its sibling, not the proxy.
    expect(await fetchFrom(api, web)).toBe("web-ok");
    expect(await fetchFrom(api, await ipOn(PROXY, PROXY_NET), 80, host)).toBeNull();
    expect(await fetchFrom(web, await ipOn(PROXY, PROXY_NET), 80, host)).toBe("web-ok");
  });

  it("network.connect attaches and detaches containers, idempotently", async () => {
    const proxyIp = await ipOn(PROXY, PROXY_NET);
    const on = await handlers["network.connect"]({ network: PROXY_NET, containers: [c.i1!, `ghost-${RUN}`], disconnect: false }, job());
    expect(on).toEqual({ changed: [c.i1] });
    expect(await fetchFrom(c.i1!, proxyIp, 80, PUBLIC_HOST)).toBe("p1");
    expect(await handlers["network.connect"]({ network: PROXY_NET, containers: [c.i1!], disconnect: false }, job())).toEqual({ changed: [] });
    expect(await handlers["network.connect"]({ network: PROXY_NET, containers: [c.i1!], disconnect: true }, job())).toEqual({ changed: [c.i1] });
    expect(await handlers["network.connect"]({ network: PROXY_NET, containers: [c.i1!], disconnect: true }, job())).toEqual({ changed: [] });
    expect(await fetchFrom(c.i1!, proxyIp, 80, PUBLIC_HOST)).toBeNull();
  });
});

describe("isolation mode none", () => {
  it("puts everything on one bridge, where every container reaches every other", async () => {
    await handlers["network.ensure"]({ networks: [spec(NONE, "system")] }, job());
    const n1 = await deploy({ app: "n1", network: NONE });
    const n2 = await deploy({ app: "n2", network: NONE });
    const n3 = await deploy({ app: "n3", network: NONE });
    for (const [from, to, body] of [
      [n1, n2, "n2"],
      [n2, n3, "n3"],
      [n3, n1, "n1"],
    ] as const) {
      expect(await fetchFrom(from, to)).toBe(body);
    }
    expect(new Set([...(await networksOf(n1)), ...(await networksOf(n2)), ...(await networksOf(n3))])).toEqual(new Set([NONE]));
  });
});

describe("networks.list", () => {
  it("sees a network created behind the platform's back, with subnet, gateway and containers; refuses to remove it", async () => {
    const probe = `capstan-test-behind-c-${RUN}`;
    await sh("docker", ["run", "-d", "--name", probe, "--label", "capstan.test=1", "--network", BEHIND, "capstan-test/busybox:latest", "sleep", "300"]);
    extraContainers.push(probe);
    const all = await handlers["networks.list"]({}, job());
    const behind = all.networks.find((n) => n.name === BEHIND);
    const ip = await ipOn(probe, BEHIND);
    expect(behind).toMatchObject({ driver: "bridge", scope: "local", internal: false, encrypted: false, labels: { "capstan.test": "1" } });
    expect(behind!.labels["capstan.managed"]).toBeUndefined();
    expect(behind!.subnet).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);
    expect(behind!.gateway).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    expect(behind!.containers).toEqual(expect.arrayContaining([expect.objectContaining({ name: probe, ipv4: ip }), expect.objectContaining({ name: PROXY })]));
    // The engine's own networks are listed too; names are unique in the answer.
    expect(all.networks.map((n) => n.name)).toEqual(expect.arrayContaining(["bridge", "host", "none", ENV1, PROXY_NET]));
    const named = await handlers["networks.list"]({ names: [BEHIND, `nope-${RUN}`] }, job());
    expect(named.networks.map((n) => n.name)).toEqual([BEHIND]);
    await expect(handlers["network.remove"]({ name: BEHIND }, job())).rejects.toThrow(/not created by the platform/);
    await expect(handlers["network.remove"]({ name: "bridge" }, job())).rejects.toThrow(/not created by the platform/);
  });

  it("refuses an overlay on an engine that is not a swarm manager, creating nothing", async () => {
    const facts = await gatherFacts(engine);
    expect(facts.engine.swarm_role).toBe("inactive");
    await expect(handlers["network.ensure"]({ networks: [{ ...spec(OVERLAY, "shared"), driver: "overlay", encrypted: true }] }, job())).rejects.toThrow(
      /overlay networks can only be created on a swarm manager, and this engine is not in a swarm/,
    );
    expect(await sh("docker", ["network", "ls", "-q", "--filter", `name=^${OVERLAY}$`])).toBe("");
  });
});

describe("encrypted overlay on a swarm manager (single-node swarm in a test host)", () => {
  it("creates an attachable, encrypted overlay that containers on the host use", async () => {
    const [host] = await startHosts(1, HOSTS);
    await loadImages(host!.name, "capstan-test/busybox:latest");
    await onHost(host!.name, "docker", "swarm", "init", "--advertise-addr", host!.ip);
    // The agent code talks to the host's inner engine through its mount namespace.
    const pid = await sh("docker", ["inspect", "-f", "{{.State.Pid}}", host!.name]);
    const inner = new DockerodeEngine(`/proc/${pid}/root/run/docker.sock`);
    const facts = await gatherFacts(inner);
    expect(facts.hostname).toBe(host!.name);
    expect(facts.engine.swarm_role).toBe("manager");

    const h = createHandlers(inner, { extraLabels: LABELS });
    const overlay: NetworkSpec = { ...spec(OVERLAY, "shared"), driver: "overlay", encrypted: true };
    const r = await h["network.ensure"]({ networks: [overlay] }, job());
    expect(r.networks).toEqual([expect.objectContaining({ name: OVERLAY, driver: "overlay", scope: "swarm", encrypted: true })]);
    const inspected = JSON.parse(await onHost(host!.name, "docker", "network", "inspect", OVERLAY))[0];
    expect(inspected).toMatchObject({ Driver: "overlay", Attachable: true, Scope: "swarm", Labels: { "capstan.managed": "true", ...LABELS } });
    expect(Object.keys(inspected.Options)).toContain("encrypted");
    // Idempotent by name.
    const again = await h["network.ensure"]({ networks: [overlay] }, job());
    expect(again.networks[0]!.id).toBe(r.networks[0]!.id);

    // Standalone containers join it (attachable) and talk over it.
    const run = (name: string, ...cmd: string[]) =>
      onHost(host!.name, "docker", "run", "-d", "--name", name, "--label", "capstan.test=1", "--network", OVERLAY, "capstan-test/busybox:latest", ...cmd);
    await run("srv", "sh", "-c", "mkdir -p /www && echo overlay-ok > /www/index.html && exec httpd -f -p 8080 -h /www");
    await run("cli", "sleep", "300");
    const body = await until(
      "traffic over the overlay",
      async () => {
        const out = await onHost(host!.name, "docker", "exec", "cli", "sh", "-c", 'timeout 3 wget -q -O- http://srv:8080/; echo "exit=$?"');
        return out.startsWith("overlay-ok") ? out : null;
      },
      30_000,
      500,
    );
    expect(body).toContain("exit=0");
    const listed = await h["networks.list"]({ names: [OVERLAY] }, job());
    expect(listed.networks[0]!.containers.map((x) => x.name).sort()).toEqual(["cli", "srv"]);
    expect(listed.networks[0]!.subnet).toMatch(/^\d+\.\d+\.\d+\.\d+\/\d+$/);

    const removed = await h["network.remove"]({ name: OVERLAY }, job());
    expect(removed).toEqual({ removed: true, disconnected: ["cli", "srv"] });
  });
});
