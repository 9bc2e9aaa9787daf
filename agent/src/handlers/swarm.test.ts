import { describe, expect, it } from "vitest";
import { swarmNodeChangeRefusal, type SwarmNode } from "@capstan/shared";
import { EngineError, type Engine, type SwarmNodeSpec } from "../docker/engine.js";
import { swarmNodeOf } from "../docker/dockerode-engine.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { storeLogin } from "../registries/config.js";
import { changedSpec, serviceRegistryAuth, swarmInfo, swarmNodeUpdate, swarmObjectCreate, swarmObjectDelete, swarmObjects, swarmServiceOf, swarmServiceScale, swarmTasks } from "./swarm.js";

const ctx = () => {
  const lines: string[] = [];
  return { lines, c: { signal: new AbortController().signal, progress: (l: string) => lines.push(l), job: { id: "job-1", attempt: 1 } } };
};

const node = (id: string, over: Partial<SwarmNode> = {}): SwarmNode => ({
  id,
  version: 10,
  hostname: `host-${id}`,
  role: "worker",
  availability: "active",
  status: "ready",
  addr: "10.0.0.1",
  engine_version: "20.10.24",
  labels: {},
  reachability: null,
  leader: false,
  ...over,
});
const manager = (id: string, over: Partial<SwarmNode> = {}) => node(id, { role: "manager", reachability: "reachable", ...over });

/** A swarm kept in memory with the engine's version index rule: an update naming an old version is out of sequence. */
class FakeSwarm {
  updates: { id: string; version: number; spec: SwarmNodeSpec }[] = [];
  /** Bumps a node's version right before each of the next N updates (a heartbeat racing the client). */
  raceNext = 0;
  /** Reads of a promoted node that still see it "unknown" (joining Raft) before it is reachable. */
  joinReads = 0;
  constructor(public nodes: SwarmNode[], public specNames: Record<string, string> = {}) {}
  engine(): Engine {
    return {
      info: async () => ({ swarm: "active", swarmRole: "manager", swarmNodeId: this.nodes[0]!.id }),
      inspectSwarm: async () => ({ id: "swarmid1", name: "default" }),
      listNodes: async () => this.nodes.map((n) => ({ ...n })),
      inspectNode: async (id: string) => {
        const n = this.nodes.find((x) => x.id === id);
        if (!n) throw new EngineError(`inspect node ${id}: node ${id} not found`, 404);
        if (n.reachability === "unknown" && this.joinReads-- <= 0) n.reachability = "reachable";
        const name = this.specNames[id];
        return { node: { ...n }, spec: { ...(name ? { Name: name } : {}), Labels: { ...n.labels }, Role: n.role, Availability: n.availability } };
      },
      updateNode: async (id: string, version: number, spec: SwarmNodeSpec) => {
        const n = this.nodes.find((x) => x.id === id)!;
        if (this.raceNext > 0) {
          this.raceNext--;
          n.version++;
        }
        if (version !== n.version) throw new EngineError(`update node ${id}: rpc error: code = Unknown desc = update out of sequence`, 500);
        this.updates.push({ id, version, spec });
        Object.assign(n, { version: n.version + 1, role: spec.Role, availability: spec.Availability, labels: spec.Labels, reachability: spec.Role === "manager" ? (n.role === "manager" ? n.reachability : "unknown") : null });
      },
    } as unknown as Engine;
  }
}

describe("swarm.info", () => {
  it("reports a manager's swarm id and its nodes, and only membership on a worker", async () => {
    const s = new FakeSwarm([manager("m1"), node("w1")]);
    expect(await swarmInfo(s.engine())({}, ctx().c)).toMatchObject({ state: "active", node_id: "m1", role: "manager", swarm_id: "swarmid1", swarm_name: "default", nodes: [{ id: "m1" }, { id: "w1" }] });
    const worker = { info: async () => ({ swarm: "active", swarmRole: "worker", swarmNodeId: "w1" }), inspectSwarm: async () => { throw new Error("a worker's engine is not asked"); } } as unknown as Engine;
    expect(await swarmInfo(worker)({}, ctx().c)).toEqual({ state: "active", node_id: "w1", role: "worker", swarm_id: null, swarm_name: null, nodes: [] });
    const none = { info: async () => ({ swarm: "inactive", swarmRole: "inactive", swarmNodeId: "" }) } as unknown as Engine;
    expect(await swarmInfo(none)({}, ctx().c)).toEqual({ state: "inactive", node_id: null, role: null, swarm_id: null, swarm_name: null, nodes: [] });
  });
});

describe("swarm.node.update", () => {
  it("updates at the node's version index with its whole spec (name kept)", async () => {
    const s = new FakeSwarm([manager("m1"), node("w1", { labels: { zone: "a" } })], { w1: "named" });
    const { c } = ctx();
    const r = await swarmNodeUpdate(s.engine())({ node_id: "w1", change: { availability: "drain" } }, c);
    expect(r).toMatchObject({ outcome: "updated", attempts: 1, node: { id: "w1", availability: "drain", version: 11 } });
    expect(s.updates).toEqual([{ id: "w1", version: 10, spec: { Name: "named", Labels: { zone: "a" }, Role: "worker", Availability: "drain" } }]);
  });

  it("retries once with the fresh version after 'out of sequence'", async () => {
    const s = new FakeSwarm([manager("m1"), node("w1")]);
    s.raceNext = 1;
    const { c, lines } = ctx();
    const r = await swarmNodeUpdate(s.engine())({ node_id: "w1", change: { role: "manager" } }, c);
    expect(r).toMatchObject({ outcome: "updated", attempts: 2, node: { role: "manager" } });
    expect(s.updates.map((u) => u.version)).toEqual([11]);
    expect(lines.join("\n")).toMatch(/out of sequence; retrying with the fresh version/);
  });

  it("answers a promoted node once it has joined the managers (reachable), not while it is still unknown", async () => {
    const s = new FakeSwarm([manager("m1"), node("w1")]);
    s.joinReads = 3;
    const { c, lines } = ctx();
    const r = await swarmNodeUpdate(s.engine())({ node_id: "w1", change: { role: "manager" } }, c);
    expect(r).toMatchObject({ outcome: "updated", node: { id: "w1", role: "manager", reachability: "reachable" } });
    expect(lines.filter((l) => l.includes("waiting for it to join the managers"))).toHaveLength(3);
  });

  it("reports a conflict after a second 'out of sequence', changing nothing", async () => {
    const s = new FakeSwarm([manager("m1"), node("w1")]);
    s.raceNext = 2;
    const r = await swarmNodeUpdate(s.engine())({ node_id: "w1", change: { availability: "pause" } }, ctx().c);
    expect(r).toEqual({ outcome: "conflict", reason: expect.stringMatching(/changed while it was being updated/) });
    expect(s.updates).toEqual([]);
    expect(s.nodes[1]!.availability).toBe("active");
  });

  it("refuses to demote or drain the last reachable manager, changing nothing", async () => {
    const s = new FakeSwarm([manager("m1"), node("w1")]);
    const h = swarmNodeUpdate(s.engine());
    expect(await h({ node_id: "m1", change: { role: "worker" } }, ctx().c)).toEqual({ outcome: "refused", reason: expect.stringMatching(/last reachable manager/) });
    expect(await h({ node_id: "m1", change: { availability: "drain" } }, ctx().c)).toEqual({ outcome: "refused", reason: expect.stringMatching(/last reachable active manager/) });
    expect(s.updates).toEqual([]);
  });

  it("other errors of the engine fail the job with the engine's message", async () => {
    const s = new FakeSwarm([manager("m1")]);
    await expect(swarmNodeUpdate(s.engine())({ node_id: "nope", change: { availability: "drain" } }, ctx().c)).rejects.toThrow(/node nope not found/);
  });

  it("PATCHed labels replace the user's labels and keep the reserved capstan. ones", () => {
    const spec: SwarmNodeSpec = { Labels: { old: "1", "capstan.managed": "true" }, Role: "worker", Availability: "active" };
    expect(changedSpec(spec, { labels: { zone: "b", "capstan.sneaky": "x" } }).Labels).toEqual({ zone: "b", "capstan.managed": "true" });
    expect(changedSpec(spec, { availability: "drain" }).Labels).toEqual(spec.Labels);
  });
});

describe("swarmNodeChangeRefusal (quorum rules)", () => {
  it("allows promoting a ready worker and demoting it back", () => {
    const one = [manager("m1"), node("w1"), node("w2")];
    expect(swarmNodeChangeRefusal(one, "w1", { role: "manager" })).toBeNull();
    const two = [manager("m1"), manager("w1"), node("w2")];
    expect(swarmNodeChangeRefusal(two, "w1", { role: "worker" })).toBeNull();
  });
  it("refuses promoting a down node when the reachable managers would no longer be a majority", () => {
    expect(swarmNodeChangeRefusal([manager("m1"), node("w1", { status: "down" })], "w1", { role: "manager" })).toMatch(/would lose quorum: 1 of 2 managers/);
  });
  it("refuses demoting a reachable manager when one of three is unreachable (2 of 3 -> 1 of 2)", () => {
    const nodes = [manager("m1"), manager("m2"), manager("m3", { reachability: "unreachable", status: "down" })];
    expect(swarmNodeChangeRefusal(nodes, "m1", { role: "worker" })).toMatch(/would lose quorum/);
    // demoting the unreachable one leaves 2 of 2
    expect(swarmNodeChangeRefusal(nodes, "m3", { role: "worker" })).toBeNull();
  });
  it("allows draining a manager while another reachable active manager remains, and draining workers", () => {
    const nodes = [manager("m1"), manager("m2"), manager("m3"), node("w1")];
    expect(swarmNodeChangeRefusal(nodes, "m1", { availability: "drain" })).toBeNull();
    expect(swarmNodeChangeRefusal(nodes, "w1", { availability: "drain" })).toBeNull();
    expect(swarmNodeChangeRefusal([manager("m1"), manager("m2", { availability: "drain" })], "m1", { availability: "drain" })).toMatch(/last reachable active manager/);
  });
});

describe("swarmNodeOf", () => {
  it("reads the engine's node object (spec labels, manager status, engine version)", () => {
    const n = swarmNodeOf({
      ID: "abc123",
      Version: { Index: 42 },
      Spec: { Role: "manager", Availability: "drain", Labels: { zone: "a" } },
      Description: { Hostname: "h1", Engine: { EngineVersion: "20.10.24", Labels: { engine: "x" } } },
      Status: { State: "ready", Addr: "172.18.0.2" },
      ManagerStatus: { Leader: true, Reachability: "reachable", Addr: "172.18.0.2:2377" },
    });
    expect(n).toEqual({ id: "abc123", version: 42, hostname: "h1", role: "manager", availability: "drain", status: "ready", addr: "172.18.0.2", engine_version: "20.10.24", labels: { zone: "a" }, reachability: "reachable", leader: true });
    expect(swarmNodeOf({ ID: "w", Version: { Index: 1 }, Spec: { Role: "worker", Availability: "active", Labels: null }, Status: { State: "down" } })).toMatchObject({ role: "worker", reachability: null, leader: false, labels: {}, addr: null });
  });
});

// ---- swarm services (issue 20) ----
describe("swarm services", () => {
  const raw = (over: Record<string, unknown> = {}) => ({
    ID: "svc1",
    Version: { Index: 5 },
    UpdatedAt: "2026-01-01T00:00:00Z",
    Spec: { Name: "web", Mode: { Replicated: { Replicas: 2 } }, TaskTemplate: { ContainerSpec: { Image: "nginx:1@sha256:abc123" } }, Labels: { a: "b" } },
    Endpoint: { Ports: [{ PublishedPort: 8080, TargetPort: 80, Protocol: "tcp" }, { TargetPort: 53, Protocol: "udp" }] },
    ...over,
  });
  const task = (id: string, state: string, over: Record<string, unknown> = {}) => ({ ID: id, ServiceID: "svc1", Slot: 1, NodeID: "n1", DesiredState: "running", Status: { State: state }, ...over });
  function engine(service: Record<string, unknown> | null, raceNext = 0) {
    const updates: { version: number; spec: any; auth?: unknown }[] = [];
    let s = service;
    const e = {
      listServices: async () => (s ? [s] : []),
      inspectService: async () => {
        if (!s) throw new EngineError("inspect service x: service x not found", 404);
        return s;
      },
      updateService: async (_id: string, version: number, spec: any, _signal?: AbortSignal, auth?: unknown) => {
        if (raceNext-- > 0) (s!.Version as { Index: number }).Index++;
        if (version !== (s!.Version as { Index: number }).Index) throw new EngineError("update service svc1: rpc error: code = Unknown desc = update out of sequence", 500);
        updates.push({ version, spec, auth });
        s = { ...s, Version: { Index: version + 1 }, Spec: spec };
      },
      listTasks: async () => [task("t1", "running"), task("t2", "preparing", { Slot: 2 }), task("t3", "shutdown", { DesiredState: "shutdown" })],
    } as unknown as Engine;
    return { e, updates };
  }

  it("maps a service: image without digest, running/desired, ports", () => {
    expect(swarmServiceOf(raw(), [task("t1", "running"), task("t2", "preparing"), task("x", "running", { ServiceID: "other" })])).toEqual({
      id: "svc1",
      version: 5,
      name: "web",
      image: "nginx:1",
      mode: "replicated",
      desired: 2,
      running: 1,
      ports: [{ published: 8080, target: 80, protocol: "tcp" }, { published: null, target: 53, protocol: "udp" }],
      updated_at: "2026-01-01T00:00:00Z",
    });
  });

  it("scales a replicated service at its version with the whole spec kept, retrying once after out of sequence", async () => {
    const { e, updates } = engine(raw(), 1);
    const { c, lines } = ctx();
    const r = await swarmServiceScale(e)({ service_id: "svc1", replicas: 3 }, c);
    expect(r).toMatchObject({ outcome: "updated", attempts: 2, service: { desired: 3, name: "web" } });
    expect(updates).toHaveLength(1);
    expect(updates[0]!.spec).toMatchObject({ Name: "web", Labels: { a: "b" }, Mode: { Replicated: { Replicas: 3 } }, TaskTemplate: { ContainerSpec: { Image: "nginx:1@sha256:abc123" } } });
    expect(lines.join("\n")).toMatch(/out of sequence; retrying/);
  });

  // ---- registry auth on scale (issue 20, w7) ----
  it("passes the manager's stored login of the image's registry with the update (X-Registry-Auth), none for an image of a registry it has no login of", async () => {
    const stateDir = mkdtempSync(join(tmpdir(), "swarm-auth-"));
    try {
      await storeLogin(stateDir, "registry.example.com:5000", "robot", "pw-1");
      const priv = engine(raw({ Spec: { Name: "web", Mode: { Replicated: { Replicas: 1 } }, TaskTemplate: { ContainerSpec: { Image: "registry.example.com:5000/team/web:2@sha256:abc123" } } } }));
      const { c, lines } = ctx();
      expect(await swarmServiceScale(priv.e, { stateDir })({ service_id: "svc1", replicas: 3 }, c)).toMatchObject({ outcome: "updated" });
      expect(priv.updates[0]!.auth).toEqual({ username: "robot", password: "pw-1", serveraddress: "registry.example.com:5000" });
      expect(lines.join("\n")).toMatch(/login of registry registry.example.com:5000 \(as robot\)/);
      expect(lines.join("\n")).not.toMatch(/pw-1/);
      // nginx:1 names no host: the hub's login, and this manager has none.
      const pub = engine(raw());
      await swarmServiceScale(pub.e, { stateDir })({ service_id: "svc1", replicas: 3 }, ctx().c);
      expect(pub.updates[0]!.auth).toBeNull();
      expect(await serviceRegistryAuth(stateDir, "registry.example.com:5000/x")).toMatchObject({ username: "robot" });
      expect(await serviceRegistryAuth(stateDir, "other.example.com/x")).toBeNull();
    } finally {
      rmSync(stateDir, { recursive: true, force: true });
    }
  });

  it("a second conflict is reported, a global service refused, an unknown one missing", async () => {
    expect(await swarmServiceScale(engine(raw(), 2).e)({ service_id: "svc1", replicas: 3 }, ctx().c)).toMatchObject({ outcome: "conflict" });
    const global = engine(raw({ Spec: { Name: "agent", Mode: { Global: {} } } }));
    expect(await swarmServiceScale(global.e)({ service_id: "svc1", replicas: 3 }, ctx().c)).toEqual({ outcome: "refused", reason: expect.stringMatching(/global mode/) });
    expect(global.updates).toEqual([]);
    expect(await swarmServiceScale(engine(null).e)({ service_id: "svc1", replicas: 3 }, ctx().c)).toEqual({ outcome: "missing" });
    expect(await swarmTasks(engine(null).e)({ service_id: "svc1" }, ctx().c)).toEqual({ found: false, tasks: [] });
  });
});

// ---- swarm secrets and configs (issue 20, w7) ----
describe("swarm secrets and configs", () => {
  /** The engine's secret and config stores (Spec.Data base64, as the engine keeps it) and its services' mounts. */
  function store() {
    const objects: Record<"secret" | "config", { ID: string; Version: { Index: number }; CreatedAt: string; UpdatedAt: string; Spec: { Name: string; Labels: Record<string, string>; Data: string } }[]> = { secret: [], config: [] };
    const services: unknown[] = [];
    const removed: string[] = [];
    let seq = 0;
    /** The engine answers "in use" itself on the next remove (a service started using it in between). */
    let raceInUse = false;
    const e = {
      // The engine never answers a secret's data in a list; a config's it does.
      listSwarmObjects: async (kind: "secret" | "config") => objects[kind].map((o) => (kind === "secret" ? { ...o, Spec: { Name: o.Spec.Name, Labels: o.Spec.Labels } } : o)),
      createSwarmObject: async (kind: "secret" | "config", spec: { Name: string; Labels: Record<string, string>; Data: string }) => {
        if (objects[kind].some((o) => o.Spec.Name === spec.Name)) throw new EngineError(`create ${kind} ${spec.Name}: rpc error: code = AlreadyExists desc = ${kind} ${spec.Name} already exists`, 409);
        const ID = `${kind}${++seq}`;
        objects[kind].push({ ID, Version: { Index: 11 }, CreatedAt: "2026-01-01T00:00:00Z", UpdatedAt: "2026-01-01T00:00:00Z", Spec: spec });
        return ID;
      },
      removeSwarmObject: async (kind: "secret" | "config", id: string) => {
        if (raceInUse) throw new EngineError(`remove ${kind} ${id}: rpc error: code = InvalidArgument desc = ${kind} 'x' is in use by the following service: late`, 400);
        if (!objects[kind].some((o) => o.ID === id)) throw new EngineError(`remove ${kind} ${id}: not found`, 404);
        objects[kind] = objects[kind].filter((o) => o.ID !== id);
        removed.push(id);
      },
      listServices: async () => services,
    } as unknown as Engine;
    return { e, objects, services, removed, setRace: (v: boolean) => (raceInUse = v) };
  }

  it("creates a secret with its data base64 to the engine only: neither the result nor a progress line carries it", async () => {
    const s = store();
    const { c, lines } = ctx();
    const r = await swarmObjectCreate(s.e)({ kind: "secret", name: "db-password", data: "hunter2-très", labels: { app: "web" } }, c);
    expect(r).toEqual({ outcome: "created", object: { id: "secret1", version: 11, name: "db-password", labels: { app: "web" }, data: null, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z" } });
    expect(Buffer.from(s.objects.secret[0]!.Spec.Data, "base64").toString("utf8")).toBe("hunter2-très");
    expect(JSON.stringify(r) + lines.join("\n")).not.toMatch(/hunter2/);
    expect(await swarmObjectCreate(s.e)({ kind: "secret", name: "db-password", data: "other", labels: {} }, ctx().c)).toEqual({ outcome: "exists", reason: "a secret named db-password already exists in the swarm" });
  });

  it("lists configs with their data decoded and secrets without theirs, by name", async () => {
    const s = store();
    await swarmObjectCreate(s.e)({ kind: "config", name: "nginx.conf", data: "server {}\n", labels: {} }, ctx().c);
    await swarmObjectCreate(s.e)({ kind: "config", name: "a.conf", data: "x", labels: {} }, ctx().c);
    await swarmObjectCreate(s.e)({ kind: "secret", name: "s", data: "v", labels: {} }, ctx().c);
    const configs = await swarmObjects(s.e)({ kind: "config" }, ctx().c);
    expect(configs.objects.map((o) => [o.name, o.data])).toEqual([["a.conf", "x"], ["nginx.conf", "server {}\n"]]);
    expect((await swarmObjects(s.e)({ kind: "secret" }, ctx().c)).objects.map((o) => [o.name, o.data])).toEqual([["s", null]]);
  });

  it("refuses to delete what a service mounts (naming it), deletes the rest, and answers missing for an unknown id", async () => {
    const s = store();
    await swarmObjectCreate(s.e)({ kind: "secret", name: "used", data: "v", labels: {} }, ctx().c);
    await swarmObjectCreate(s.e)({ kind: "config", name: "free", data: "v", labels: {} }, ctx().c);
    s.services.push({ Spec: { Name: "web", TaskTemplate: { ContainerSpec: { Secrets: [{ SecretID: "secret1", SecretName: "used" }], Configs: null } } } });
    expect(await swarmObjectDelete(s.e)({ kind: "secret", id: "secret1" }, ctx().c)).toEqual({ outcome: "in_use", reason: "secret used is in use by service(s) web: remove it from them first", services: ["web"] });
    expect(s.removed).toEqual([]);
    expect(await swarmObjectDelete(s.e)({ kind: "config", id: "config2" }, ctx().c)).toEqual({ outcome: "deleted", name: "free" });
    expect(await swarmObjectDelete(s.e)({ kind: "config", id: "config2" }, ctx().c)).toEqual({ outcome: "missing" });
    s.services.length = 0;
    s.setRace(true);
    expect(await swarmObjectDelete(s.e)({ kind: "secret", id: "secret1" }, ctx().c)).toMatchObject({ outcome: "in_use", reason: expect.stringMatching(/in use by the following service: late/) });
  });
});
