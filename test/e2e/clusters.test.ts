import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, startTestInstance, type TeamFixture, type TestInstance } from "../api/harness.js";
import { KeyFactory } from "../api/support/ssh.js";
import { INSECURE_REGISTRIES, gatewayOf, loadImages, onHost, onHostWithInput, repo, sh, startHosts, startPrivateRegistry, stopHosts, until, type TestHost } from "./support/kit.js";

/**
 * Issue 20: clusters on a REAL 3-node Docker Swarm. Three test hosts (each its own Docker
 * Engine), `docker swarm init` on the first, the two others join as workers, the real agent on
 * each host (started with the join command the API hands out), a real control plane. One swarm
 * is shared by every test of the file; the tests run in order and leave it as they found it.
 */
const PREFIX = "capswarm";
const BUSYBOX = "capstan-test/busybox:latest";
// Our own agent tag: other checkouts rebuild capstan/agent:latest on this shared engine.
const AGENT = "capstan-swarm/agent:latest";
const SERVICE = "capswarm-web";
let t: TestInstance;
let team: TeamFixture;
let hosts: TestHost[];
const servers: { uuid: string; host: TestHost }[] = [];
const keys = new KeyFactory();
let uuid: string;
// ---- registry auth on scale (issue 20, w7): a private registry on the hosts' network ----
const REGISTRY_NAME = `${PREFIX}-registry`;
const REG_USER = "swarm-puller";
const REG_PASSWORD = `reg-${randomBytes(16).toString("hex")}`;
let registryHost = "";
let authDir = "";
// ---- cluster events (issue 20, w7/events): taken before the first change the tests make ----
let eventsSince = "";

const manager = () => hosts[0]!.name;
const nodeIdOf = (host: string) => onHost(host, "docker", "info", "-f", "{{.Swarm.NodeID}}");
const detail = async () => (await team.api.get(`/clusters/${uuid}`)).body;
/** Waits for the cluster's status; a timeout names the last status and its reason. */
async function statusBecomes(want: string, timeoutMs: number, refresh = false): Promise<number> {
  const start = Date.now();
  let last: any;
  try {
    await until(want, async () => {
      if (refresh) await team.api.get(`/clusters/${uuid}/nodes`);
      last = await detail();
      return last.status === want;
    }, timeoutMs, 100);
  } catch (err) {
    throw new Error(`${(err as Error).message}; last: ${last?.status} (${last?.status_reason})`);
  }
  return Date.now() - start;
}
const nodes = async () => (await team.api.get(`/clusters/${uuid}/nodes`)).body.data as any[];
/** The service's tasks that should be running, as the engine places them: [{node hostname, state}]. */
async function tasks(): Promise<{ node: string; state: string }[]> {
  const out = await onHost(manager(), "docker", "service", "ps", SERVICE, "--filter", "desired-state=running", "--format", "{{.Node}} {{.CurrentState}}");
  return out
    .split("\n")
    .filter(Boolean)
    .map((l) => {
      const [node, state] = l.split(" ");
      return { node: node!, state: state!.toLowerCase() };
    });
}

beforeAll(async () => {
  await sh("bash", [`${repo}/deploy/agent/build-image.sh`], { env: { CAPSTAN_AGENT_REPO: "capstan-swarm/agent" } });
  await sh("bash", [join(repo, "test/kit/images.sh"), "registry"]);
  hosts = await startHosts(3, PREFIX, { dockerdArgs: INSECURE_REGISTRIES });
  await Promise.all(hosts.map((h) => loadImages(h.name, AGENT, BUSYBOX)));
  // A private registry (htpasswd) holding an image no node has; the nodes log in to it only through the platform.
  ({ host: registryHost, authDir } = await startPrivateRegistry(PREFIX, REGISTRY_NAME, REG_USER, REG_PASSWORD));
  const [m, ...workers] = hosts as [TestHost, ...TestHost[]];
  const dockerfile = `FROM ${BUSYBOX}\nCMD ["sleep", "3600"]\n`;
  await onHostWithInput(m.name, dockerfile, "docker", "build", "-q", "-t", `${registryHost}/private/swarm:1`, "-");
  await until("the registry to take the test's login", async () => {
    await onHostWithInput(m.name, REG_PASSWORD, "docker", "login", "-u", REG_USER, "--password-stdin", registryHost);
    return true;
  }, 30_000, 500);
  await onHost(m.name, "docker", "push", `${registryHost}/private/swarm:1`);
  await onHost(m.name, "docker", "logout", registryHost);
  await onHost(m.name, "docker", "rmi", `${registryHost}/private/swarm:1`);
  await onHost(m.name, "docker", "swarm", "init", "--advertise-addr", m.ip);
  const token = await onHost(m.name, "docker", "swarm", "join-token", "-q", "worker");
  await Promise.all(workers.map((w) => onHost(w.name, "docker", "swarm", "join", "--advertise-addr", w.ip, "--token", token, `${m.ip}:2377`)));

  const gw = await gatewayOf(`${PREFIX}-net`);
  const port = await freePort();
  t = await startTestInstance({ PLATFORM_PUBLIC_URL: `http://${gw}:${port}`, PLATFORM_AGENT_IMAGE: AGENT }, { host: "0.0.0.0", port });
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["CLUSTER_MANAGEMENT", "REGISTRY_MANAGEMENT"] });
  const key = await keys.generate("ed25519");
  const keyUuid = (await team.api.post("/security/keys", { name: "hosts", private_key: key.privateKey })).body.uuid;
  for (const host of hosts) {
    const created = await team.api.post("/servers", { name: host.name, ip: host.ip, private_key_uuid: keyUuid });
    expect(created.status).toBe(201);
    await onHost(host.name, "sh", "-c", created.body.join_command);
    servers.push({ uuid: created.body.uuid, host });
  }
  for (const s of servers) {
    await until(`${s.host.name} reachable`, async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "reachable", 60_000);
  }
});

afterAll(async () => {
  await t?.close();
  await sh("docker", ["rm", "-f", REGISTRY_NAME]).catch(() => {});
  await stopHosts(PREFIX).catch(() => {});
  if (authDir) await rm(authDir, { recursive: true, force: true });
  keys.cleanup();
});

describe("a real 3-node swarm", () => {
  it("detect finds the swarm with 1 manager and 2 workers and links the three servers; it is healthy", async () => {
    eventsSince = new Date().toISOString();
    const res = await team.api.post("/clusters/detect");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const swarmId = await onHost(manager(), "docker", "info", "-f", "{{.Swarm.Cluster.ID}}");
    expect(res.body).toEqual({
      message: "1 cluster(s) found.",
      clusters_found: 1,
      data: [{ uuid: expect.any(String), name: `swarm-${swarmId.slice(0, 12)}`, orchestrator_id: swarmId, manager_count: 1, worker_count: 2 }],
    });
    uuid = res.body.data[0].uuid;
    const d = await detail();
    expect(d).toMatchObject({ status: "healthy", status_reason: null, manager_count: 1, worker_count: 2, node_count: 3 });
    const expected = await Promise.all(hosts.map(async (h, i) => [h.name, await nodeIdOf(h.name), i === 0 ? "manager" : "worker", true]));
    expect(d.servers.map((s: any) => [s.name, s.node_id, s.role, s.reachable]).sort()).toEqual(expected.sort());

    const listed = await nodes();
    const engine = await onHost(manager(), "docker", "version", "-f", "{{.Server.Version}}");
    for (const [i, h] of hosts.entries()) {
      expect(listed.find((n) => n.hostname === h.name)).toMatchObject({
        id: await nodeIdOf(h.name),
        role: i === 0 ? "manager" : "worker",
        status: "ready",
        availability: "active",
        engine_version: engine,
        ip: h.ip,
        labels: {},
        leader: i === 0,
        reachability: i === 0 ? "reachable" : null,
        server_uuid: servers[i]!.uuid,
      });
    }
  });

  it("promotes a worker to manager and demotes it back, as the engine sees it", async () => {
    const w = hosts[1]!.name;
    const id = await nodeIdOf(w);
    const role = () => onHost(manager(), "docker", "node", "inspect", "-f", "{{.Spec.Role}}", id);
    const promoted = await team.api.post(`/clusters/${uuid}/nodes/${id}/promote`);
    expect(promoted.status, JSON.stringify(promoted.body)).toBe(200);
    // Answered once it has joined the managers: before that the swarm calls it "unknown", and the
    // node list stored with the answer kept the cluster degraded until the next list (seen here).
    expect(promoted.body.data).toMatchObject({ id, role: "manager", reachability: "reachable" });
    expect(await role()).toBe("manager");
    expect(await detail()).toMatchObject({ status: "healthy", manager_count: 2, worker_count: 1 });

    const demoted = await team.api.post(`/clusters/${uuid}/nodes/${id}/demote`);
    expect(demoted.status, JSON.stringify(demoted.body)).toBe(200);
    expect(demoted.body.data).toMatchObject({ id, role: "worker" });
    expect(await role()).toBe("worker");
    expect(await detail()).toMatchObject({ manager_count: 1, worker_count: 2 });

    // The only manager may not be demoted: refused with the reason, nothing changed.
    const mid = await nodeIdOf(manager());
    const refused = await team.api.post(`/clusters/${uuid}/nodes/${mid}/demote`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/last reachable manager/);
    expect(await onHost(manager(), "docker", "node", "inspect", "-f", "{{.Spec.Role}}", mid)).toBe("manager");
  });

  it("drains a node: its tasks move to the other nodes; activate makes it available again", async () => {
    await onHost(manager(), "docker", "service", "create", "--detach", "--name", SERVICE, "--replicas", "3", "--no-resolve-image", "--label", "capstan.test=1", BUSYBOX, "sleep", "3600");
    await until("3 running tasks", async () => {
      const ts = await tasks();
      return ts.length === 3 && ts.every((x) => x.state === "running");
    }, 60_000);
    const w = hosts[2]!.name;
    const id = await nodeIdOf(w);
    // Spread placement puts one task on each node; make sure the drained node has one.
    await until(`a task on ${w}`, async () => (await tasks()).some((x) => x.node === w), 30_000);

    const drained = await team.api.post(`/clusters/${uuid}/nodes/${id}/drain`);
    expect(drained.status, JSON.stringify(drained.body)).toBe(200);
    expect(drained.body.data).toMatchObject({ id, availability: "drain" });
    const moved = await until("tasks moved off the drained node", async () => {
      const ts = await tasks();
      return ts.length === 3 && ts.every((x) => x.node !== w && x.state === "running") && ts;
    }, 60_000);
    expect(new Set(moved.map((x) => x.node))).toEqual(new Set([hosts[0]!.name, hosts[1]!.name]));
    expect((await nodes()).find((n) => n.id === id).availability).toBe("drain");

    const active = await team.api.post(`/clusters/${uuid}/nodes/${id}/activate`);
    expect(active.status, JSON.stringify(active.body)).toBe(200);
    expect(active.body.data).toMatchObject({ id, availability: "active" });
    expect(await onHost(manager(), "docker", "node", "inspect", "-f", "{{.Spec.Availability}}", id)).toBe("active");
    await onHost(manager(), "docker", "service", "rm", SERVICE);
  });

  it("PATCH labels replaces the node's labels, on the engine too", async () => {
    const id = await nodeIdOf(hosts[1]!.name);
    const engineLabels = async () => JSON.parse(await onHost(manager(), "docker", "node", "inspect", "-f", "{{json .Spec.Labels}}", id));
    const set = await team.api.patch(`/clusters/${uuid}/nodes/${id}/labels`, { labels: { zone: "b", tier: "web" } });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    expect(set.body.data.labels).toEqual({ zone: "b", tier: "web" });
    expect(await engineLabels()).toEqual({ zone: "b", tier: "web" });
    expect((await nodes()).find((n) => n.id === id).labels).toEqual({ zone: "b", tier: "web" });

    const replaced = await team.api.patch(`/clusters/${uuid}/nodes/${id}/labels`, { labels: { zone: "c" } });
    expect(replaced.body.data.labels).toEqual({ zone: "c" });
    expect(await engineLabels()).toEqual({ zone: "c" });
    await team.api.patch(`/clusters/${uuid}/nodes/${id}/labels`, { labels: {} });
    expect(await engineLabels()).toEqual({});
  });

  it("services: list (replicas running/desired, ports published:target), scale 1 → 3 → 0 with the tasks placed on nodes; global mode refused", async () => {
    const API = "capswarm-api";
    await onHost(manager(), "docker", "service", "create", "--detach", "--name", API, "--replicas", "1", "--publish", "published=18080,target=80", "--no-resolve-image", "--label", "capstan.test=1", BUSYBOX, "httpd", "-f", "-p", "80");
    try {
      const listed = async () => ((await team.api.get(`/clusters/${uuid}/services`)).body.data as any[]).find((x) => x.name === API);
      const first = await until("1/1", async () => {
        const svc = await listed();
        return svc?.replicas === "1/1" && svc;
      }, 60_000);
      const engineId = await onHost(manager(), "docker", "service", "inspect", "-f", "{{.ID}}", API);
      expect(first).toMatchObject({ id: engineId, image: BUSYBOX, mode: "replicated", ports: ["18080:80"], updated_at: expect.any(String) });
      const tasksOf = async () => ((await team.api.get(`/clusters/${uuid}/services/${engineId}/tasks`)).body.data as any[]).filter((x) => x.desired_state === "running");

      const up = await team.api.post(`/clusters/${uuid}/services/${engineId}/scale`, { replicas: 3 });
      expect(up.status, JSON.stringify(up.body)).toBe(200);
      expect(up.body.data.replicas).toMatch(/^\d\/3$/);
      expect(await onHost(manager(), "docker", "service", "inspect", "-f", "{{.Spec.Mode.Replicated.Replicas}}", API)).toBe("3");
      const three = await until("3 running tasks", async () => {
        const ts = await tasksOf();
        return ts.length === 3 && ts.every((x) => x.state === "running") && ts;
      }, 60_000);
      // Placed on the swarm's nodes, each named and linked to the team's server that is it.
      for (const x of three) {
        const i = hosts.findIndex((h) => h.name === x.node_hostname);
        expect(i, JSON.stringify(x)).toBeGreaterThanOrEqual(0);
        expect(x).toMatchObject({ node_id: await nodeIdOf(hosts[i]!.name), server_uuid: servers[i]!.uuid, slot: expect.any(Number) });
      }
      expect(new Set(three.map((x) => x.slot))).toEqual(new Set([1, 2, 3]));
      await until("3/3", async () => (await listed())?.replicas === "3/3", 30_000);

      const down = await team.api.post(`/clusters/${uuid}/services/${engineId}/scale`, { replicas: 0 });
      expect(down.status, JSON.stringify(down.body)).toBe(200);
      await until("0/0 and no task running", async () => (await listed())?.replicas === "0/0" && (await tasksOf()).length === 0, 60_000);

      expect((await team.api.post(`/clusters/${uuid}/services/${engineId}/scale`, { replicas: -1 })).status).toBe(422);
      expect((await team.api.post(`/clusters/${uuid}/services/nosuchservice0000000000000/scale`, { replicas: 1 })).status).toBe(404);
      expect((await team.api.get(`/clusters/${uuid}/services/nosuchservice0000000000000/tasks`)).status).toBe(404);
    } finally {
      await onHost(manager(), "docker", "service", "rm", API).catch(() => {});
    }

    const GLOBAL = "capswarm-global";
    await onHost(manager(), "docker", "service", "create", "--detach", "--name", GLOBAL, "--mode", "global", "--no-resolve-image", "--label", "capstan.test=1", BUSYBOX, "sleep", "3600");
    try {
      const id = await onHost(manager(), "docker", "service", "inspect", "-f", "{{.ID}}", GLOBAL);
      const refused = await team.api.post(`/clusters/${uuid}/services/${id}/scale`, { replicas: 2 });
      expect(refused.status).toBe(409);
      expect(refused.body.message).toMatch(/global mode/);
      const g = await until("global 3/3", async () => {
        const svc = ((await team.api.get(`/clusters/${uuid}/services`)).body.data as any[]).find((x) => x.name === GLOBAL);
        return svc?.replicas === "3/3" && svc;
      }, 60_000);
      expect(g).toMatchObject({ mode: "global", ports: [] });
    } finally {
      await onHost(manager(), "docker", "service", "rm", GLOBAL).catch(() => {});
    }
  });

  // ---- swarm secrets and configs (issue 20, w7) ----
  it("secrets and configs: create (a secret's value only on the engine), list, a secret a service mounts refused, delete", async () => {
    const VALUE = "e2e-secret-value-7f3a";
    const made = await team.api.post(`/clusters/${uuid}/secrets`, { name: "capswarm_db_pw", data: VALUE, labels: { "capstan.test": "1" } });
    expect(made.status, JSON.stringify(made.body)).toBe(201);
    expect(JSON.stringify(made.body)).not.toContain(VALUE);
    const secretId = made.body.data.id;
    expect(await onHost(manager(), "docker", "secret", "inspect", "-f", "{{.ID}} {{.Spec.Name}}", "capswarm_db_pw")).toBe(`${secretId} capswarm_db_pw`);
    expect((await team.api.post(`/clusters/${uuid}/secrets`, { name: "capswarm_db_pw", data: "x" })).status).toBe(409);
    expect((await team.api.post(`/clusters/${uuid}/secrets`, { name: "bad name", data: "x" })).status).toBe(422);
    const listed = (await team.api.get(`/clusters/${uuid}/secrets`)).body.data as any[];
    expect(listed.find((x) => x.id === secretId)).toMatchObject({ name: "capswarm_db_pw", labels: { "capstan.test": "1" } });
    expect(JSON.stringify(listed)).not.toContain(VALUE);
    // No job row keeps the value (the payload is replaced once the job ended).
    for (const r of await t.instance.database.prisma.job.findMany({ where: { type: "swarm.object.create" } })) expect(t.instance.box.open(r.payload)).not.toContain(VALUE);

    const cfg = await team.api.post(`/clusters/${uuid}/configs`, { name: "capswarm.conf", data: "listen 80;\n" });
    expect(cfg.status, JSON.stringify(cfg.body)).toBe(201);
    expect(cfg.body.data).toMatchObject({ name: "capswarm.conf", data: "listen 80;\n" });
    expect(((await team.api.get(`/clusters/${uuid}/configs`)).body.data as any[]).find((x) => x.id === cfg.body.data.id)).toMatchObject({ data: "listen 80;\n" });

    // A service that mounts the secret: it reads the value the engine stored, and the delete is refused naming it.
    const USER = "capswarm-secret-user";
    await onHost(manager(), "docker", "service", "create", "--detach", "--name", USER, "--secret", "capswarm_db_pw", "--no-resolve-image", "--label", "capstan.test=1", BUSYBOX, "sleep", "3600");
    try {
      const refused = await team.api.delete(`/clusters/${uuid}/secrets/${secretId}`);
      expect(refused.status, JSON.stringify(refused.body)).toBe(409);
      expect(refused.body.message).toBe(`Refused: secret capswarm_db_pw is in use by service(s) ${USER}: remove it from them first`);
    } finally {
      await onHost(manager(), "docker", "service", "rm", USER).catch(() => {});
    }
    const del = await team.api.delete(`/clusters/${uuid}/secrets/${secretId}`);
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    expect(await onHost(manager(), "docker", "secret", "ls", "-q", "--filter", "name=capswarm_db_pw")).toBe("");
    expect((await team.api.delete(`/clusters/${uuid}/secrets/${secretId}`)).status).toBe(404);
    expect((await team.api.delete(`/clusters/${uuid}/configs/${cfg.body.data.id}`)).status).toBe(200);
    expect(await onHost(manager(), "docker", "config", "ls", "-q", "--filter", "name=capswarm.conf")).toBe("");
  });

  // ---- registry auth on scale (issue 20, w7) ----
  it("scaling a service whose image is private passes the manager's registry login: every node pulls it", async () => {
    const created = await team.api.post("/registries", { name: "private", type: "custom", url: `http://${registryHost}`, credentials: { username: REG_USER, password: REG_PASSWORD } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const registryId = created.body.data.id;
    // Assigned to the manager server only: the workers never get a login of their own.
    expect((await team.api.patch(`/registries/${registryId}`, { server_ids: [servers[0]!.uuid] })).status).toBe(200);
    await team.api.post(`/registries/${registryId}/sync`);
    await until("the manager synced", async () => {
      const b = (await team.api.get(`/registries/${registryId}`)).body;
      if (b.servers.some((x: { sync_status: string }) => x.sync_status === "failed")) throw new Error(JSON.stringify(b.servers));
      return b.servers.length === 1 && b.servers[0].sync_status === "synced";
    }, 120_000, 250);

    const PRIV = "capswarm-private";
    const IMAGE = `${registryHost}/private/swarm:1`;
    // Created by hand without any login: no node can pull the image.
    await onHost(manager(), "docker", "service", "create", "--detach", "--name", PRIV, "--replicas", "1", "--no-resolve-image", "--label", "capstan.test=1", IMAGE);
    try {
      const id = await onHost(manager(), "docker", "service", "inspect", "-f", "{{.ID}}", PRIV);
      const all = async () => (await team.api.get(`/clusters/${uuid}/services/${id}/tasks`)).body.data as any[];
      await until("a task failing to pull", async () => (await all()).some((x) => x.state === "rejected" || /No such image|denied|unauthorized/i.test(`${x.error ?? ""}`)), 90_000);
      const scaled = await team.api.post(`/clusters/${uuid}/services/${id}/scale`, { replicas: 3 });
      expect(scaled.status, JSON.stringify(scaled.body)).toBe(200);
      const running = await until("3 running tasks, on every node", async () => {
        const ts = (await all()).filter((x) => x.desired_state === "running" && x.state === "running");
        return ts.length === 3 && new Set(ts.map((x) => x.node_id)).size === 3 && ts;
      }, 120_000);
      expect(new Set(running.map((x: any) => x.node_hostname))).toEqual(new Set(hosts.map((h) => h.name)));
      // The workers pulled it (they have it now) with no login stored on them.
      for (const w of hosts.slice(1)) expect(await onHost(w.name, "sh", "-c", "cat ~/.docker/config.json 2>/dev/null || true")).not.toContain(registryHost);
    } finally {
      await onHost(manager(), "docker", "service", "rm", PRIV).catch(() => {});
    }
  });

  // ---- cluster events (issue 20, w7/events) ----
  it("events after since list the node (promote, drain, labels), service (create, scale) and secret/config changes made above, chronologically", async () => {
    type Ev = { time: string; time_nano: string; type: string; action: string; actor_id: string; attributes: Record<string, string> };
    const promotedId = await nodeIdOf(hosts[1]!.name);
    const drainedId = await nodeIdOf(hosts[2]!.name);
    /** Every event after since, paging on with the last one's time (limit 100). */
    const all = async () => {
      const out: Ev[] = [];
      let since = eventsSince;
      for (;;) {
        const res = await team.api.get(`/clusters/${uuid}/events?since=${encodeURIComponent(since)}&limit=100`);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        out.push(...res.body.data);
        if (res.body.data.length < 100) return out;
        since = res.body.data[res.body.data.length - 1].time;
      }
    };
    const has = (evs: Ev[], type: string, action: string, pred: (e: Ev) => boolean = () => true) => evs.some((e) => e.type === type && e.action === action && pred(e));
    const events = await until("the changes made above in the events", async () => {
      const evs = await all();
      return (
        has(evs, "node", "update", (e) => e.actor_id === promotedId && e.attributes["role.new"] === "manager") &&
        has(evs, "node", "update", (e) => e.actor_id === promotedId && e.attributes["role.new"] === "worker") &&
        has(evs, "node", "update", (e) => e.actor_id === drainedId && e.attributes["availability.new"] === "drain") &&
        has(evs, "service", "create", (e) => e.attributes.name === SERVICE) &&
        has(evs, "service", "update", (e) => e.attributes.name === "capswarm-api" && e.attributes["replicas.new"] === "3") &&
        has(evs, "service", "update", (e) => e.attributes.name === "capswarm-api" && e.attributes["replicas.new"] === "0") &&
        has(evs, "secret", "create", (e) => e.attributes.name === "capswarm_db_pw") &&
        has(evs, "config", "remove", (e) => e.attributes.name === "capswarm.conf") &&
        evs
      );
    }, 60_000, 1000);
    // The labels change is a node update of that node too.
    expect(events.filter((e) => e.type === "node" && e.action === "update" && e.actor_id === promotedId).length).toBeGreaterThanOrEqual(3);
    const nanos = events.map((e) => BigInt(e.time_nano));
    expect(nanos.every((n, i) => i === 0 || n >= nanos[i - 1]!)).toBe(true);
    expect(nanos[0]! > BigInt(Date.parse(eventsSince)) * 1_000_000n).toBe(true);
    expect(new Set(events.map((e) => e.type))).toEqual(new Set(["node", "service", "secret", "config"]));
    // Each once, however many collections ran.
    expect(new Set(events.map((e) => JSON.stringify(e))).size).toBe(events.length);
    console.log(`cluster events since the start: ${events.length} (${[...new Set(events.map((e) => `${e.type} ${e.action}`))].join(", ")})`);
    // limit: the latest ones, chronological.
    const latest = (await team.api.get(`/clusters/${uuid}/events?limit=2`)).body.data as Ev[];
    expect(latest).toHaveLength(2);
    expect(BigInt(latest[0]!.time_nano) <= BigInt(latest[1]!.time_nano)).toBe(true);
  });

  it("a worker host dropping off turns the cluster degraded within 10 s; the manager's agent stopping makes it unreachable; both recover", async () => {
    const w = hosts[2]!;
    const net = `${PREFIX}-net`;
    await statusBecomes("healthy", 30_000, true);
    try {
      // The host leaves the network without closing anything: its agent and its swarm heartbeats stop.
      await sh("docker", ["network", "disconnect", net, w.name]);
      const ms = await statusBecomes("degraded", 15_000);
      expect(ms).toBeLessThan(10_000);
      expect((await detail()).status_reason).toMatch(new RegExp(`${w.name}`));
      console.log(`cluster degraded ${ms} ms after the worker host dropped off`);
    } finally {
      await sh("docker", ["network", "connect", net, w.name]).catch(() => {});
    }
    await statusBecomes("healthy", 90_000, true);

    await onHost(manager(), "docker", "stop", "capstan-agent");
    try {
      await statusBecomes("unreachable", 15_000);
      const stale = await team.api.get(`/clusters/${uuid}/nodes`);
      expect(stale.body.refreshed).toBe(false);
    } finally {
      await onHost(manager(), "docker", "start", "capstan-agent");
    }
    await statusBecomes("healthy", 60_000);
  });
});
