import type { NetworkSpec } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { type ContainerDetails, type CreateNetworkSpec, type Engine, EngineError, type NetworkDetails } from "../docker/engine.js";
import { createSpecFor, toEngineNetwork } from "./engine-network.js";
import { connectContainers, ensureNetworks, joinResourceNetworks, listNetworks, prepareResourceNetworks, removeNetwork } from "./index.js";

/** An engine with networks and containers in memory: only what the network module calls. */
class FakeEngine {
  readonly socketPath = `/fake-${Math.random()}.sock`;
  readonly calls: string[] = [];
  readonly created: CreateNetworkSpec[] = [];
  nets = new Map<string, NetworkDetails>();
  containers = new Map<string, { id: string; name: string; networks: Set<string> }>();
  swarmRole: "inactive" | "worker" | "manager" = "inactive";
  seq = 0;
  /** Makes the next create fail like a racing creator's network was there first. */
  raceOnCreate = false;

  addNetwork(name: string, labels: Record<string, string> = { "capstan.managed": "true" }, driver = "bridge", options: Record<string, string> = {}): NetworkDetails {
    const n: NetworkDetails = { id: `net-${name}-${++this.seq}`, name, driver, created: `2026-01-01T00:00:0${this.seq}Z`, labels, scope: driver === "overlay" ? "swarm" : "local", internal: false, attachable: false, options, subnet: "172.30.0.0/16", gateway: "172.30.0.1", containers: [] };
    this.nets.set(n.id, n);
    return n;
  }
  addContainer(name: string, ...networks: string[]) {
    this.containers.set(name, { id: `c-${name}`, name, networks: new Set(networks) });
  }
  private byName(nameOrId: string) {
    return [...this.nets.values()].find((n) => n.name === nameOrId || n.id === nameOrId);
  }
  private details(n: NetworkDetails): NetworkDetails {
    const containers = [...this.containers.values()].filter((c) => c.networks.has(n.name)).map((c) => ({ id: c.id, name: c.name, ipv4: "172.30.0.2" }));
    return { ...n, containers };
  }
  async info() {
    return { swarmRole: this.swarmRole };
  }
  async listNetworks(name: string) {
    return [...this.nets.values()].filter((n) => n.name === name).sort((a, b) => a.created.localeCompare(b.created));
  }
  async listAllNetworks() {
    return [...this.nets.values()];
  }
  async inspectNetworkDetails(idOrName: string) {
    const n = this.byName(idOrName);
    return n ? this.details(n) : null;
  }
  async createNetwork(spec: CreateNetworkSpec) {
    this.calls.push(`create ${spec.name}`);
    if (this.raceOnCreate) {
      this.raceOnCreate = false;
      this.addNetwork(spec.name);
      throw new EngineError("network with name exists", 409);
    }
    if ([...this.nets.values()].some((n) => n.name === spec.name)) throw new EngineError("network with name exists", 409);
    this.created.push(spec);
    const n = this.addNetwork(spec.name, spec.labels, spec.driver, spec.options ?? {});
    n.attachable = spec.attachable ?? false;
    return { id: n.id };
  }
  async removeNetwork(id: string) {
    const n = this.byName(id);
    if (!n) throw new EngineError("no such network", 404);
    if (this.details(n).containers.length) throw new EngineError(`error while removing network: network ${n.name} has active endpoints`, 403);
    this.calls.push(`rmnet ${n.name}`);
    this.nets.delete(n.id);
  }
  async inspectContainer(name: string): Promise<ContainerDetails | null> {
    // Like the real engine wrapper: exact names only, never ids.
    const c = this.containers.get(name);
    if (!c) return null;
    return { id: c.id, name: c.name, image: "x", state: "running", running: true, paused: false, health: null, labels: {}, networks: [...c.networks] };
  }
  async connectNetwork(network: string, container: string) {
    const n = this.byName(network)!;
    const c = (await this.inspectContainer(container))!;
    const rec = this.containers.get(c.name)!;
    if (rec.networks.has(n.name)) throw new EngineError(`endpoint with name ${c.name} already exists in network ${n.name}`, 403);
    this.calls.push(`connect ${c.name} ${n.name}`);
    rec.networks.add(n.name);
  }
  async disconnectNetwork(network: string, container: string, force: boolean) {
    const n = this.byName(network)!;
    const rec = [...this.containers.values()].find((x) => x.id === container || x.name === container);
    if (!rec) throw new EngineError("no such container", 404);
    if (!rec.networks.has(n.name)) throw new EngineError(`container ${rec.name} is not connected to network ${n.name}`, 403);
    this.calls.push(`disconnect ${rec.name} ${n.name}${force ? " force" : ""}`);
    rec.networks.delete(n.name);
  }
}

const ctx = () => {
  const lines: string[] = [];
  return { signal: new AbortController().signal, progress: (l: string) => void lines.push(l), lines, extraLabels: { "capstan.test": "1" } };
};
const spec = (name: string, over: Partial<NetworkSpec> = {}): NetworkSpec => ({ name, driver: "bridge", encrypted: false, attachable: true, labels: {}, ...over });
const fake = () => {
  const f = new FakeEngine();
  return { f, engine: f as unknown as Engine };
};

describe("createSpecFor", () => {
  it("creates a bridge with the platform's labels over the spec's over the agent's, and no options", () => {
    expect(createSpecFor(spec("env-1", { labels: { "capstan.network.scope": "environment", "capstan.managed": "false" } }), { "capstan.test": "1", "capstan.network.scope": "x" })).toEqual({
      name: "env-1",
      driver: "bridge",
      labels: { "capstan.test": "1", "capstan.network.scope": "environment", "capstan.managed": "true" },
    });
  });

  it("creates an attachable overlay, with the encrypted option only when asked", () => {
    expect(createSpecFor(spec("o", { driver: "overlay", encrypted: true }))).toEqual({ name: "o", driver: "overlay", labels: { "capstan.managed": "true" }, attachable: true, options: { encrypted: "" } });
    expect(createSpecFor(spec("o", { driver: "overlay", attachable: false }))).toEqual({ name: "o", driver: "overlay", labels: { "capstan.managed": "true" }, attachable: false });
  });
});

describe("toEngineNetwork", () => {
  it("reports encryption when the option is present at all", () => {
    const base: NetworkDetails = { id: "i", name: "n", driver: "overlay", created: "", labels: {}, scope: "swarm", internal: false, attachable: true, options: { encrypted: "" }, subnet: "10.0.1.0/24", gateway: "10.0.1.1", containers: [] };
    expect(toEngineNetwork(base)).toEqual({ id: "i", name: "n", driver: "overlay", scope: "swarm", internal: false, encrypted: true, labels: {}, subnet: "10.0.1.0/24", gateway: "10.0.1.1", containers: [] });
    expect(toEngineNetwork({ ...base, options: {} }).encrypted).toBe(false);
  });
});

describe("ensureNetworks", () => {
  it("creates what is missing, returns existing ones as they are, once per name", async () => {
    const { f, engine } = fake();
    f.addNetwork("have", { "capstan.managed": "true", owner: "someone" });
    const c = ctx();
    const out = await ensureNetworks(engine, [spec("have"), spec("new-1"), spec("new-1")], c);
    expect(out.map((n) => n.name)).toEqual(["have", "new-1", "new-1"]);
    expect(f.calls).toEqual(["create new-1"]);
    expect(f.created[0]!.labels).toEqual({ "capstan.test": "1", "capstan.managed": "true" });
    expect(out[0]!.labels).toEqual({ "capstan.managed": "true", owner: "someone" });
    // Idempotent: a second call creates nothing.
    await ensureNetworks(engine, [spec("have"), spec("new-1")], c);
    expect(f.calls).toEqual(["create new-1"]);
  });

  it("refuses to take over a network of that name the platform did not create (no capstan.managed), creating nothing", async () => {
    const { f, engine } = fake();
    f.addNetwork("team-bus", { owner: "ops" });
    const shared = spec("team-bus", { labels: { "capstan.network.scope": "shared" } });
    await expect(ensureNetworks(engine, [shared], ctx())).rejects.toThrow(
      "network team-bus already exists on this server but was not created by the platform (no capstan.managed=true label); not taking it over: remove or rename it, or use another name",
    );
    expect(f.calls).toEqual([]);
    // The engine's own networks are never ours either.
    f.addNetwork("bridge", {});
    await expect(ensureNetworks(engine, [spec("bridge")], ctx())).rejects.toThrow(/not created by the platform/);
  });

  it("refuses a platform network of that name made for another scope (a compose application's own network, say)", async () => {
    const { f, engine } = fake();
    f.addNetwork("capstan-app1", { "capstan.managed": "true" });
    f.addNetwork("capstan-env-e1", { "capstan.managed": "true", "capstan.network.scope": "environment" });
    await expect(ensureNetworks(engine, [spec("capstan-app1", { labels: { "capstan.network.scope": "shared" } })], ctx())).rejects.toThrow(
      "network capstan-app1 already exists on this server as a platform network of scope (none), not shared; not taking it over",
    );
    // Same scope: it is the one asked for.
    const [n] = await ensureNetworks(engine, [spec("capstan-env-e1", { labels: { "capstan.network.scope": "environment" } })], ctx());
    expect(n!.name).toBe("capstan-env-e1");
    expect(f.calls).toEqual([]);
  });

  it("never creates again an environment network it removed (its environment was deleted); shared ones may come back", async () => {
    const { f, engine } = fake();
    f.addNetwork("capstan-env-gone", { "capstan.managed": "true", "capstan.network.scope": "environment" });
    await removeNetwork(engine, "capstan-env-gone", ctx());
    // A deployment of the deleted environment that was already running asks for it afterwards.
    const env = spec("capstan-env-gone", { labels: { "capstan.network.scope": "environment" } });
    await expect(prepareResourceNetworks(engine, { network: "capstan-env-gone", ensure_networks: [env] }, ctx())).rejects.toThrow(
      "network capstan-env-gone was removed by the control plane (its environment was deleted); not creating it again",
    );
    // Also when the removal found nothing to remove (the deployment had not created it yet).
    await removeNetwork(engine, "capstan-env-never", ctx());
    await expect(ensureNetworks(engine, [spec("capstan-env-never")], ctx())).rejects.toThrow(/not creating it again/);
    // Per engine: another engine is not affected.
    const other = fake();
    await ensureNetworks(other.engine, [spec("capstan-env-never")], ctx());
    // A shared network deleted and created again under its name.
    f.addNetwork("bus");
    await removeNetwork(engine, "bus", ctx());
    await ensureNetworks(engine, [spec("bus")], ctx());
    expect(f.calls.filter((c) => c.startsWith("create"))).toEqual(["create bus"]);
  });

  it("creates nothing once its job was cancelled while it waited for the name (network.remove holding it)", async () => {
    const { f, engine } = fake();
    f.addNetwork("bus");
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const list = f.listNetworks.bind(f);
    f.listNetworks = async (name: string) => {
      await gate;
      return list(name);
    };
    const removing = removeNetwork(engine, "bus", ctx());
    const ac = new AbortController();
    const ensuring = ensureNetworks(engine, [spec("bus")], { ...ctx(), signal: ac.signal });
    await new Promise((r) => setTimeout(r, 10));
    ac.abort(new Error("cancelled by the control plane"));
    release();
    await removing;
    await expect(ensuring).rejects.toThrow("cancelled by the control plane");
    expect(f.calls).toEqual(["rmnet bus"]);
  });

  it("treats a racing creator's network (409) as the one asked for", async () => {
    const { f, engine } = fake();
    f.raceOnCreate = true;
    const [n] = await ensureNetworks(engine, [spec("raced")], ctx());
    expect(n!.name).toBe("raced");
  });

  it("refuses an overlay on an engine that is not a swarm manager, creating nothing", async () => {
    const { f, engine } = fake();
    await expect(ensureNetworks(engine, [spec("o", { driver: "overlay" })], ctx())).rejects.toThrow(/overlay networks can only be created on a swarm manager, and this engine is not in a swarm/);
    f.swarmRole = "worker";
    await expect(ensureNetworks(engine, [spec("o", { driver: "overlay" })], ctx())).rejects.toThrow(/a swarm worker/);
    expect(f.calls).toEqual([]);
  });

  it("creates an encrypted attachable overlay on a swarm manager", async () => {
    const { f, engine } = fake();
    f.swarmRole = "manager";
    const [n] = await ensureNetworks(engine, [spec("o", { driver: "overlay", encrypted: true })], ctx());
    expect(f.created[0]).toMatchObject({ driver: "overlay", attachable: true, options: { encrypted: "" } });
    expect(n).toMatchObject({ driver: "overlay", scope: "swarm", encrypted: true });
  });

  it("says when an existing network differs from the spec, and leaves it", async () => {
    const { f, engine } = fake();
    f.addNetwork("shared", { "capstan.managed": "true" }, "bridge");
    const c = ctx();
    await ensureNetworks(engine, [spec("shared", { driver: "overlay" })], c);
    expect(c.lines).toEqual(["network shared exists (driver bridge, asked overlay; left as it is)"]);
    expect(f.calls).toEqual([]);
  });

  it("refuses an invalid spec with a reason", async () => {
    const { engine } = fake();
    await expect(ensureNetworks(engine, [spec("bad name!")], ctx())).rejects.toThrow(/invalid network spec "bad name!"/);
  });
});

describe("removeNetwork", () => {
  it("disconnects every container (force), then removes the network", async () => {
    const { f, engine } = fake();
    f.addNetwork("shared-1");
    f.addContainer("a", "shared-1", "capstan");
    f.addContainer("b", "shared-1");
    const out = await removeNetwork(engine, "shared-1", ctx());
    expect(out).toEqual({ removed: true, disconnected: ["a", "b"] });
    expect(f.calls).toEqual(["disconnect a shared-1 force", "disconnect b shared-1 force", "rmnet shared-1"]);
    expect([...f.containers.get("a")!.networks]).toEqual(["capstan"]);
  });

  it("is fine with a network that does not exist", async () => {
    const { engine } = fake();
    expect(await removeNetwork(engine, "gone", ctx())).toEqual({ removed: false, disconnected: [] });
  });

  it("refuses a network the platform did not create", async () => {
    const { f, engine } = fake();
    f.addNetwork("bridge", {});
    f.addContainer("x", "bridge");
    await expect(removeNetwork(engine, "bridge", ctx())).rejects.toThrow(/not created by the platform/);
    expect(f.calls).toEqual([]);
  });
});

describe("listNetworks", () => {
  it("lists every network, or the named ones, with containers, sorted by name", async () => {
    const { f, engine } = fake();
    f.addNetwork("zeta", {});
    f.addNetwork("alpha");
    f.addContainer("c1", "alpha");
    const all = await listNetworks(engine, {}, new AbortController().signal);
    expect(all.map((n) => n.name)).toEqual(["alpha", "zeta"]);
    expect(all[0]!.containers).toEqual([{ id: "c-c1", name: "c1", ipv4: "172.30.0.2" }]);
    expect((await listNetworks(engine, { names: ["zeta", "nope"] }, new AbortController().signal)).map((n) => n.name)).toEqual(["zeta"]);
  });
});

describe("connectContainers", () => {
  it("connects and disconnects idempotently, skipping missing containers", async () => {
    const { f, engine } = fake();
    f.addNetwork("proxy-net");
    f.addContainer("a");
    f.addContainer("b", "proxy-net");
    const c = ctx();
    expect(await connectContainers(engine, { network: "proxy-net", containers: ["a", "b", "ghost"] }, c)).toEqual({ changed: ["a"] });
    expect(c.lines).toContain("container ghost does not exist; skipped");
    expect(await connectContainers(engine, { network: "proxy-net", containers: ["a", "b"] }, c)).toEqual({ changed: [] });
    expect(await connectContainers(engine, { network: "proxy-net", containers: ["a", "b"], disconnect: true }, c)).toEqual({ changed: ["a", "b"] });
    expect(await connectContainers(engine, { network: "proxy-net", containers: ["a"], disconnect: true }, c)).toEqual({ changed: [] });
  });

  it("fails to connect to a network that does not exist; disconnecting from it is a no-op", async () => {
    const { f, engine } = fake();
    f.addContainer("a");
    await expect(connectContainers(engine, { network: "nope", containers: ["a"] }, ctx())).rejects.toThrow("network nope does not exist on this server");
    expect(await connectContainers(engine, { network: "nope", containers: ["a"], disconnect: true }, ctx())).toEqual({ changed: [] });
  });

  it("treats a concurrent connect (engine says already attached) as done", async () => {
    const { f, engine } = fake();
    f.addNetwork("n");
    f.addContainer("a");
    const real = f.connectNetwork.bind(f);
    // The first inspect says "not attached"; by the time we connect, someone else has.
    f.connectNetwork = async (net: string, container: string) => {
      f.containers.get("a")!.networks.add("n");
      return real(net, container);
    };
    expect(await connectContainers(engine, { network: "n", containers: ["a"] }, ctx())).toEqual({ changed: [] });
  });
});

describe("prepareResourceNetworks / joinResourceNetworks", () => {
  it("creates ensure_networks, then requires the primary and extra networks to exist", async () => {
    const { f, engine } = fake();
    f.addNetwork("capstan");
    await prepareResourceNetworks(engine, { network: "env-a", networks: ["proxy-net"], ensure_networks: [spec("env-a"), spec("proxy-net")] }, ctx());
    expect(f.calls).toEqual(["create env-a", "create proxy-net"]);
    await expect(prepareResourceNetworks(engine, { network: "env-a", networks: ["shared-x"] }, ctx())).rejects.toThrow("network shared-x does not exist on this server");
    await expect(prepareResourceNetworks(engine, { network: "env-b" }, ctx())).rejects.toThrow("network env-b does not exist on this server (prepare the server first)");
  });

  it("joins the extra networks and leaves platform networks no longer listed, never others", async () => {
    const { f, engine } = fake();
    for (const n of ["env-a", "shared-1", "shared-2"]) f.addNetwork(n);
    f.addNetwork("user-net", {});
    f.addContainer("db-1", "env-a", "shared-2", "user-net");
    const c = ctx();
    expect(await joinResourceNetworks(engine, "db-1", { network: "env-a", networks: ["shared-1"] }, c)).toEqual(["shared-1"]);
    expect([...f.containers.get("db-1")!.networks].sort()).toEqual(["env-a", "shared-1", "user-net"]);
    expect(c.lines).toEqual(["container db-1 joined network shared-1", "container db-1 left network shared-2 (no longer attached)"]);
    // Again: nothing to do.
    expect(await joinResourceNetworks(engine, "db-1", { network: "env-a", networks: ["shared-1"] }, ctx())).toEqual([]);
  });
});
