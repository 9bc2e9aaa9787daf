import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EV, FEATURES, type JobEnvelope, type SwarmNode } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { swarmNode } from "./support/swarm.js";
import { connectAgent, type JobAnswer, type ScriptedAgent } from "./support/fake-agent.js";
import { sampleHostFacts } from "../support/host-facts.js";

/**
 * /clusters (spec 4.12, issue 20) against scripted agents speaking the real wire protocol: one
 * manager and two workers of a swarm. What the agents answer is the engine's view (the real
 * engine is exercised by test/e2e/clusters.test.ts); this file checks the control plane's part:
 * the feature gate, detect's records and links, status from the agents' connections and the
 * node states, node changes with their refusals and version conflicts, validation.
 */
let t: TestInstance;
let team: TeamFixture;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];

const SWARM = "swarm0000000000000000000a1";
/** The swarm as the engine would list it; tests change it to script what the manager sees. */
let nodes: SwarmNode[] = [];
const resetNodes = () => {
  nodes = [swarmNode("nodem", "mgr", { role: "manager", reachability: "reachable", leader: true }), swarmNode("nodew1", "wk1"), swarmNode("nodew2", "wk2")];
};
/** How the manager answers the next node updates (default: applies the change). */
let updateScript: ((job: JobEnvelope) => JobAnswer) | null = null;
const updates: JobEnvelope[] = [];

const until = async (what: string, fn: () => Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what}: not in time`);
};

async function agentFor(token: string, nodeId: string, role: "manager" | "worker") {
  const agent = await connectAgent(t.url, token);
  agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: [] } }));
  agent.serve("swarm.info", () => ({
    ok: true,
    result: { state: "active", node_id: nodeId, role, swarm_id: role === "manager" ? SWARM : null, swarm_name: role === "manager" ? "default" : null, nodes: role === "manager" ? nodes : [] },
  }));
  if (role === "manager") {
    agent.serve("swarm.nodes", () => ({ ok: true, result: { nodes } }));
    agent.serve("swarm.node.update", (job) => {
      updates.push(job);
      if (updateScript) return updateScript(job);
      const { node_id, change } = job.payload as { node_id: string; change: { availability?: SwarmNode["availability"]; role?: SwarmNode["role"]; labels?: Record<string, string> } };
      nodes = nodes.map((n) =>
        n.id === node_id ? { ...n, version: n.version + 1, availability: change.availability ?? n.availability, role: change.role ?? n.role, labels: change.labels ?? n.labels } : n,
      );
      return { ok: true, result: { outcome: "updated", node: nodes.find((n) => n.id === node_id), attempts: 1 } };
    });
  }
  const facts = sampleHostFacts(`host-${nodeId}`);
  facts.engine.swarm = "active";
  facts.engine.swarm_role = role;
  await agent.hello(facts);
  agents.push(agent);
  return agent;
}

const servers: Record<string, { uuid: string; token: string; agent: ScriptedAgent }> = {};
async function serverWithAgent(name: string, nodeId: string, role: "manager" | "worker") {
  const key = (await team.api.post("/security/keys", { name: `${name}-key`, private_key: (await keys.generate("ed25519")).privateKey })).body;
  const server = (await team.api.post("/servers", { name, ip: "10.0.0.9", private_key_uuid: key.uuid })).body;
  servers[name] = { uuid: server.uuid, token: server.agent_token, agent: await agentFor(server.agent_token, nodeId, role) };
}

beforeAll(async () => {
  resetNodes();
  t = await startTestInstance();
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
  await serverWithAgent("mgr", "nodem", "manager");
  await serverWithAgent("wk1", "nodew1", "worker");
  await serverWithAgent("wk2", "nodew2", "worker");
}, 180_000);
afterAll(async () => {
  for (const a of agents) a.close();
  keys.cleanup();
  await t?.close();
});

let uuid: string;

describe("the feature gate", () => {
  it("answers 402 naming CLUSTER_MANAGEMENT on every route for a team without it, and creates nothing", async () => {
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: FEATURES.filter((f) => f !== "CLUSTER_MANAGEMENT") });
    for (const [method, path] of [
      ["get", "/clusters"],
      ["post", "/clusters/detect"],
      ["get", "/clusters/x"],
      ["get", "/clusters/x/nodes"],
      ["post", "/clusters/x/nodes/abc/drain"],
      ["post", "/clusters/x/nodes/abc/activate"],
      ["post", "/clusters/x/nodes/abc/promote"],
      ["post", "/clusters/x/nodes/abc/demote"],
      ["patch", "/clusters/x/nodes/abc/labels"],
    ] as const) {
      const res = await (other.api as any)[method](path, method === "patch" ? { labels: {} } : undefined);
      expect(res.status, `${method} ${path}`).toBe(402);
      expect(res.body.message).toMatch(/CLUSTER_MANAGEMENT/);
    }
    expect(await t.instance.database.prisma.cluster.count({ where: { teamId: other.teamId } })).toBe(0);
  });
});

describe("detect", () => {
  it("finds the swarm with 1 manager and 2 workers and links the three servers; a second detect updates the same record", async () => {
    const res = await team.api.post("/clusters/detect");
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({
      message: "1 cluster(s) found.",
      clusters_found: 1,
      data: [{ uuid: expect.any(String), name: `swarm-${SWARM.slice(0, 12)}`, orchestrator_id: SWARM, manager_count: 1, worker_count: 2 }],
    });
    uuid = res.body.data[0].uuid;
    const again = await team.api.post("/clusters/detect");
    expect(again.body.data.map((c: any) => c.uuid)).toEqual([uuid]);
    expect(await t.instance.database.prisma.cluster.count({ where: { teamId: team.teamId } })).toBe(1);
    const detail = (await team.api.get(`/clusters/${uuid}`)).body;
    expect(detail).toMatchObject({ uuid, orchestrator_id: SWARM, status: "healthy", status_reason: null, manager_count: 1, worker_count: 2, node_count: 3 });
    expect(detail.servers.map((s: any) => [s.name, s.node_id, s.role, s.reachable]).sort()).toEqual([
      ["mgr", "nodem", "manager", true],
      ["wk1", "nodew1", "worker", true],
      ["wk2", "nodew2", "worker", true],
    ]);
    const list = await team.api.get("/clusters");
    expect(list.body.data.map((c: any) => c.uuid)).toEqual([uuid]);
  });

  it("another team's detect sees none of it (its servers are not asked)", async () => {
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
    const res = await other.api.post("/clusters/detect");
    expect(res.body).toEqual({ message: "0 cluster(s) found.", clusters_found: 0, data: [] });
    expect((await other.api.get(`/clusters/${uuid}`)).status).toBe(404);
  });
});

describe("status", () => {
  it("is degraded while a worker's agent is away or a node is down, unreachable without the manager's agent, and recovers", async () => {
    const status = async () => (await team.api.get(`/clusters/${uuid}`)).body;
    servers.wk2!.agent.close();
    await until("degraded", async () => (await status()).status === "degraded");
    expect((await status()).status_reason).toMatch(/server wk2: its agent is not connected/);
    servers.wk2!.agent = await agentFor(servers.wk2!.token, "nodew2", "worker");
    await until("healthy again", async () => (await status()).status === "healthy");

    // A worker whose agent reports its engine stopped (its host going down) degrades it at once, before the swarm notices.
    const down = sampleHostFacts("host-nodew1");
    Object.assign(down.engine, { running: false, swarm: null, swarm_role: null, error: "Docker Engine is not reachable" });
    servers.wk1!.agent.socket.emit(EV.facts, { facts: down });
    await until("degraded by the engine report", async () => (await status()).status_reason === "server wk1: its Docker Engine does not answer");
    const up = sampleHostFacts("host-nodew1");
    Object.assign(up.engine, { swarm: "active", swarm_role: "worker" });
    servers.wk1!.agent.socket.emit(EV.facts, { facts: up });
    await until("healthy after the engine is back", async () => (await status()).status === "healthy");

    // A node the manager lists as down (its host stopped) degrades it too, once listed.
    nodes = nodes.map((n) => (n.id === "nodew1" ? { ...n, status: "down" } : n));
    expect((await team.api.get(`/clusters/${uuid}/nodes`)).body.refreshed).toBe(true);
    expect(await status()).toMatchObject({ status: "degraded", status_reason: "node wk1: down" });
    resetNodes();
    await team.api.get(`/clusters/${uuid}/nodes`);
    expect((await status()).status).toBe("healthy");

    servers.mgr!.agent.close();
    await until("unreachable", async () => (await status()).status === "unreachable");
    const stale = await team.api.get(`/clusters/${uuid}/nodes`);
    expect(stale.body.refreshed).toBe(false);
    expect(stale.body.data).toHaveLength(3);
    const refused = await team.api.post(`/clusters/${uuid}/nodes/nodew1/drain`);
    expect(refused.status).toBe(503);
    servers.mgr!.agent = await agentFor(servers.mgr!.token, "nodem", "manager");
    await until("healthy after the manager is back", async () => (await status()).status === "healthy");
  });
});

describe("nodes", () => {
  it("lists id, hostname, role, status, availability, engine_version, ip, labels and the linked server", async () => {
    const res = await team.api.get(`/clusters/${uuid}/nodes`);
    expect(res.status).toBe(200);
    expect(res.body.data.find((n: any) => n.id === "nodew1")).toEqual({
      id: "nodew1",
      hostname: "wk1",
      role: "worker",
      status: "ready",
      availability: "active",
      engine_version: "20.10.24",
      ip: "10.0.0.9",
      labels: {},
      leader: false,
      reachability: null,
      version: 10,
      server_uuid: servers.wk1!.uuid,
    });
  });

  it("drain, activate, promote and demote send the change to the manager and answer the node as read back", async () => {
    updates.length = 0;
    for (const [action, change, expected] of [
      ["drain", { availability: "drain" }, { availability: "drain" }],
      ["activate", { availability: "active" }, { availability: "active" }],
      ["promote", { role: "manager" }, { role: "manager" }],
      ["demote", { role: "worker" }, { role: "worker" }],
    ] as const) {
      const res = await team.api.post(`/clusters/${uuid}/nodes/nodew1/${action}`);
      expect(res.status, `${action}: ${JSON.stringify(res.body)}`).toBe(200);
      expect(res.body.data).toMatchObject({ id: "nodew1", ...expected });
      expect(res.body.message).toMatch(/^Node wk1 /);
      expect(updates.at(-1)!.payload).toEqual({ node_id: "nodew1", change });
    }
    const detail = (await team.api.get(`/clusters/${uuid}`)).body;
    expect(detail).toMatchObject({ manager_count: 1, worker_count: 2, status: "healthy" });
  });

  it("PATCH labels replaces the user labels; reserved capstan. keys and bad values are a 422 that sends nothing", async () => {
    updates.length = 0;
    const res = await team.api.patch(`/clusters/${uuid}/nodes/nodew2/labels`, { labels: { zone: "b", tier: "web" } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.labels).toEqual({ zone: "b", tier: "web" });
    expect(updates.map((u) => u.payload)).toEqual([{ node_id: "nodew2", change: { labels: { zone: "b", tier: "web" } } }]);
    for (const body of [{ labels: { "capstan.managed": "x" } }, { labels: { "bad key": "x" } }, { labels: "zone=b" }, {}, { labels: {}, extra: 1 }]) {
      const bad = await team.api.patch(`/clusters/${uuid}/nodes/nodew2/labels`, body);
      expect(bad.status, JSON.stringify(body)).toBe(422);
      expect(bad.body.errors).toBeDefined();
    }
    expect(updates).toHaveLength(1);
  });

  it("a refusal (last manager, quorum) and a second version conflict are 409 with the reason; an engine failure is 502", async () => {
    updateScript = () => ({ ok: true, result: { outcome: "refused", reason: "node mgr is the last reachable manager: demoting it would leave the swarm without a manager; promote another node first" } });
    const refused = await team.api.post(`/clusters/${uuid}/nodes/nodem/demote`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toMatch(/^Refused: node mgr is the last reachable manager/);
    updateScript = () => ({ ok: true, result: { outcome: "conflict", reason: "node wk1 changed while it was being updated (twice in a row); read it again and retry" } });
    const conflict = await team.api.post(`/clusters/${uuid}/nodes/nodew1/drain`);
    expect(conflict.status).toBe(409);
    expect(conflict.body.message).toMatch(/changed concurrently/);
    updateScript = () => ({ ok: false, error: "update node nodew1: rpc error: code = Unknown desc = node is not part of a swarm" });
    const failed = await team.api.post(`/clusters/${uuid}/nodes/nodew1/drain`);
    expect(failed.status).toBe(502);
    expect(failed.body.message).toMatch(/node is not part of a swarm/);
    updateScript = null;
  });

  it("a node id that is not in the cluster's list is a 404, never sent to the manager; a malformed one a 422", async () => {
    updates.length = 0;
    expect((await team.api.post(`/clusters/${uuid}/nodes/nosuchnode/drain`)).status).toBe(404);
    expect((await team.api.post(`/clusters/${uuid}/nodes/NOT-AN-ID/drain`)).status).toBe(422);
    expect((await team.api.post(`/clusters/nosuchcluster/nodes/nodew1/drain`)).status).toBe(404);
    expect(updates).toHaveLength(0);
  });

  it("a member reads but may not detect or change nodes (403)", async () => {
    const member = await t.newMember(team.teamId, "member");
    const api = t.api(member.token);
    expect((await api.get(`/clusters/${uuid}`)).status).toBe(200);
    expect((await api.post("/clusters/detect")).status).toBe(403);
    expect((await api.post(`/clusters/${uuid}/nodes/nodew1/drain`)).status).toBe(403);
  });
});
