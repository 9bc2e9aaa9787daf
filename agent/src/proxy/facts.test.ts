import { describe, expect, it } from "vitest";
import { HostFacts, ProxyFacts } from "@capstan/shared";
import type { ExecResult, ProxyContainer } from "./docker.js";
import { onProxyWarningsChanged, proxyFacts, recordLoadedRoutes, type ProxyFactsSource } from "./facts.js";

const isProxy = (c: ProxyContainer) => c.labels["capstan.component"] === "proxy";

function proxy(over: Partial<ProxyContainer> = {}): ProxyContainer {
  return {
    id: `id-${Math.random().toString(36).slice(2)}`,
    image: "caddy:2",
    running: true,
    state: "running",
    env: ["PATH=/usr/bin"],
    labels: { "capstan.managed": "true", "capstan.component": "proxy" },
    networks: ["capstan"],
    ports: { "80/tcp": "80" },
    ...over,
  };
}

/** A fake engine: one container by name, `caddy version` answered as given; counts the execs. */
function source(container: ProxyContainer | null, version: ExecResult | Error = { exitCode: 0, stdout: "v2.6.2 h1:abc=\n", stderr: "" }) {
  const execs: string[][] = [];
  const s: ProxyFactsSource = {
    async inspect(name) {
      return container && name === "capstan-proxy" ? container : null;
    },
    async exec(_id, argv) {
      execs.push(argv);
      if (version instanceof Error) throw version;
      return version;
    },
  };
  return { s, execs };
}

describe("proxy facts (what GET /servers/{uuid} shows as proxy)", () => {
  it("a running proxy: its state, image, Caddy's version (asked once per container) and the routes last loaded", async () => {
    const c = proxy();
    const { s, execs } = source(c);
    const first = await proxyFacts(s, "capstan-proxy", isProxy);
    expect(first).toEqual({ kind: "caddy", name: "capstan-proxy", image: "caddy:2", version: "v2.6.2", status: "running", routes: null });
    expect(ProxyFacts.parse(first)).toEqual(first);
    recordLoadedRoutes(c.id, 3);
    expect(await proxyFacts(s, "capstan-proxy", isProxy)).toMatchObject({ version: "v2.6.2", routes: 3 });
    expect(execs).toEqual([["caddy", "version"]]);
  });

  it("takes the version from CADDY_VERSION (the official image) without asking the container", async () => {
    const { s, execs } = source(proxy({ env: ["CADDY_VERSION=v2.8.4"] }));
    expect(await proxyFacts(s, "capstan-proxy", isProxy)).toMatchObject({ version: "v2.8.4", status: "running" });
    expect(execs).toEqual([]);
  });

  it("a stopped proxy: its state, no version asked; no proxy, or a container that is not the platform's: missing", async () => {
    const stopped = source(proxy({ running: false, state: "exited" }));
    expect(await proxyFacts(stopped.s, "capstan-proxy", isProxy)).toMatchObject({ status: "exited", version: null, image: "caddy:2" });
    expect(stopped.execs).toEqual([]);
    const none = source(null);
    expect(await proxyFacts(none.s, "capstan-proxy", isProxy)).toEqual({ kind: "caddy", name: "capstan-proxy", image: null, version: null, status: "missing", routes: null });
    const foreign = source(proxy({ labels: {} }));
    expect(await proxyFacts(foreign.s, "capstan-proxy", isProxy)).toMatchObject({ status: "missing", image: null });
  });

  it("a version the container cannot tell is null, and asked again on the next report", async () => {
    const failing = source(proxy(), new Error("exec: caddy: not found"));
    expect(await proxyFacts(failing.s, "capstan-proxy", isProxy)).toMatchObject({ status: "running", version: null });
    await proxyFacts(failing.s, "capstan-proxy", isProxy);
    expect(failing.execs).toHaveLength(2);
    const silent = source(proxy(), { exitCode: 1, stdout: "", stderr: "boom" });
    expect(await proxyFacts(silent.s, "capstan-proxy", isProxy)).toMatchObject({ version: null });
  });

  it("is part of the host facts; agents that do not send it still parse", () => {
    const base = {
      hostname: "h",
      os: { platform: "linux", distro: "debian", release: "12", arch: "x64", kernel: "6" },
      cpu: { cores: 2, model: "x" },
      memory: { total_bytes: 1, available_bytes: 1 },
      disk: { total_bytes: 1, free_bytes: 1 },
      engine: { running: true, version: "20.10.24", api_version: "1.41", compose_version: "1.29.2", swarm: "inactive" as const },
    };
    expect(HostFacts.parse(base).proxy).toBeUndefined();
    const withProxy = { ...base, proxy: { kind: "caddy" as const, name: "capstan-proxy", image: "caddy:2", version: "v2.6.2", status: "running", routes: 2 } };
    expect(HostFacts.parse(withProxy).proxy).toEqual(withProxy.proxy);
  });
});

// proxy-label namespace (issue 17): the reasons of the last sync reach GET /servers/{uuid}
describe("proxy facts: the last sync's warnings", () => {
  it("are reported once a sync recorded them, bounded in count and length", async () => {
    const c = proxy({ id: "warned-proxy" });
    const { s } = source(c);
    expect((await proxyFacts(s, "capstan-proxy", isProxy)).warnings).toBeUndefined();
    recordLoadedRoutes(c.id, 1, ["container a: label proxy.basic_auth.x: not a bcrypt hash; ignored", "y".repeat(2000), ...Array(200).fill("z")]);
    const facts = await proxyFacts(s, "capstan-proxy", isProxy);
    expect(facts.warnings![0]).toBe("container a: label proxy.basic_auth.x: not a bcrypt hash; ignored");
    expect(facts.warnings![1]!.length).toBe(500);
    expect(facts.warnings).toHaveLength(100);
    expect(ProxyFacts.parse(facts)).toEqual(facts);
    recordLoadedRoutes(c.id, 1);
    expect((await proxyFacts(s, "capstan-proxy", isProxy)).warnings).toEqual([]);
  });
});

describe("proxy facts: a change of warnings is announced", () => {
  it("calls the listener when the warnings differ from the last sync's, not when they repeat", () => {
    let calls = 0;
    onProxyWarningsChanged(() => calls++);
    try {
      recordLoadedRoutes("announce-proxy", 1);
      expect(calls).toBe(0);
      recordLoadedRoutes("announce-proxy", 1, ["w1"]);
      recordLoadedRoutes("announce-proxy", 1, ["w1"]);
      expect(calls).toBe(1);
      recordLoadedRoutes("announce-proxy", 1);
      expect(calls).toBe(2);
    } finally {
      onProxyWarningsChanged(null);
    }
  });
});
