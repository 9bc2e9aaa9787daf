import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FEATURES, type JobEnvelope, type SwarmNode, type SwarmStoredObject } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { swarmNode } from "./support/swarm.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";
import { sampleHostFacts } from "../support/host-facts.js";

/**
 * Swarm secrets and configs (spec 4.12, issue 20) against a scripted manager agent speaking the
 * real wire protocol (the real engine: test/e2e/clusters.test.ts). Checks the control plane's
 * part: the gate, validation before any job, 201/409/404 from the agent's outcomes, a secret's
 * data in no response and in no job row once the job ended, cross-team 404.
 */
let t: TestInstance;
let team: TeamFixture;
const keys = new KeyFactory();
let agent: ScriptedAgent;
let uuid: string;

const SWARM = "swarm0000000000000000000b2";
const manager: SwarmNode = swarmNode("nodem", "mgr", { version: 3, role: "manager", reachability: "reachable", leader: true });
/** The swarm's stores as the scripted manager keeps them (data kept for configs only, as the engine answers). */
const stores: Record<"secret" | "config", (SwarmStoredObject & { mountedBy?: string })[]> = { secret: [], config: [] };
const jobs: JobEnvelope[] = [];
let seq = 0;
let failNext: string | null = null;

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
  const key = (await team.api.post("/security/keys", { name: "mgr-key", private_key: (await keys.generate("ed25519")).privateKey })).body;
  const server = (await team.api.post("/servers", { name: "mgr", ip: "10.0.0.9", private_key_uuid: key.uuid })).body;
  agent = await connectAgent(t.url, server.agent_token);
  agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: [] } }));
  agent.serve("swarm.info", () => ({ ok: true, result: { state: "active", node_id: "nodem", role: "manager", swarm_id: SWARM, swarm_name: "default", nodes: [manager] } }));
  agent.serve("swarm.objects", (job) => {
    jobs.push(job);
    const { kind } = job.payload as { kind: "secret" | "config" };
    return { ok: true, result: { objects: stores[kind].map(({ mountedBy: _m, ...o }) => o) } };
  });
  agent.serve("swarm.object.create", (job) => {
    jobs.push(job);
    if (failNext) return { ok: false, error: failNext };
    const { kind, name, data, labels } = job.payload as { kind: "secret" | "config"; name: string; data: string; labels: Record<string, string> };
    if (stores[kind].some((o) => o.name === name)) return { ok: true, result: { outcome: "exists", reason: `a ${kind} named ${name} already exists in the swarm` } };
    const o = { id: `${kind}${++seq}`, version: 1, name, labels, data: kind === "config" ? data : null, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z" };
    stores[kind].push(o);
    return { ok: true, result: { outcome: "created", object: o } };
  });
  agent.serve("swarm.object.delete", (job) => {
    jobs.push(job);
    const { kind, id } = job.payload as { kind: "secret" | "config"; id: string };
    const o = stores[kind].find((x) => x.id === id);
    if (!o) return { ok: true, result: { outcome: "missing" } };
    if (o.mountedBy) return { ok: true, result: { outcome: "in_use", reason: `${kind} ${o.name} is in use by service(s) ${o.mountedBy}: remove it from them first`, services: [o.mountedBy] } };
    stores[kind] = stores[kind].filter((x) => x !== o);
    return { ok: true, result: { outcome: "deleted", name: o.name } };
  });
  const facts = sampleHostFacts("host-nodem");
  facts.engine.swarm = "active";
  facts.engine.swarm_role = "manager";
  await agent.hello(facts);
  const detected = await team.api.post("/clusters/detect");
  expect(detected.body.clusters_found).toBe(1);
  uuid = detected.body.data[0].uuid;
}, 180_000);
afterAll(async () => {
  agent?.close();
  keys.cleanup();
  await t?.close();
});

describe("the feature gate", () => {
  it("answers 402 on every secret and config route for a team without CLUSTER_MANAGEMENT, sending no job", async () => {
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: FEATURES.filter((f) => f !== "CLUSTER_MANAGEMENT") });
    jobs.length = 0;
    for (const [method, path] of [
      ["get", `/clusters/${uuid}/secrets`],
      ["post", `/clusters/${uuid}/secrets`],
      ["delete", `/clusters/${uuid}/secrets/secret1`],
      ["get", `/clusters/${uuid}/configs`],
      ["post", `/clusters/${uuid}/configs`],
      ["delete", `/clusters/${uuid}/configs/config1`],
    ] as const) {
      const res = await (other.api as any)[method](path, method === "post" ? { name: "x", data: "y" } : undefined);
      expect(res.status, `${method} ${path}`).toBe(402);
      expect(res.body.message).toMatch(/CLUSTER_MANAGEMENT/);
    }
    expect(jobs).toEqual([]);
  });
});

describe("secrets", () => {
  const VALUE = "s3cr3t-value-ünïcode";

  it("create answers 201 without the data, sends it to the manager, and no job row keeps it once the job ended", async () => {
    jobs.length = 0;
    const res = await team.api.post(`/clusters/${uuid}/secrets`, { name: "db_password", data: VALUE, labels: { app: "web" } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toEqual({
      message: "Secret db_password created.",
      data: { id: "secret1", name: "db_password", labels: { app: "web" }, version: 1, created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z" },
    });
    expect(JSON.stringify(res.body)).not.toContain(VALUE);
    expect(jobs.map((j) => j.payload)).toEqual([{ kind: "secret", name: "db_password", data: VALUE, labels: { app: "web" } }]);
    const rows = await t.instance.database.prisma.job.findMany({ where: { type: "swarm.object.create" } });
    expect(rows).toHaveLength(1);
    for (const r of rows) {
      const opened = t.instance.box.open(r.payload);
      expect(opened).not.toContain(VALUE);
      expect(JSON.parse(opened)).toMatchObject({ kind: "secret", name: "db_password", data: "(removed)" });
      expect(`${r.result ?? ""}${r.log ?? ""}${r.error ?? ""}`).not.toContain(VALUE);
    }
  });

  it("the list shows names and labels and never data", async () => {
    const res = await team.api.get(`/clusters/${uuid}/secrets`);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual([expect.objectContaining({ id: "secret1", name: "db_password", labels: { app: "web" } })]);
    expect(res.body.data[0]).not.toHaveProperty("data");
  });

  it("a duplicate name is a 409; a bad name, empty or too large data, unknown fields are a 422 naming the field, sending nothing", async () => {
    const dup = await team.api.post(`/clusters/${uuid}/secrets`, { name: "db_password", data: "x" });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toBe("A secret named db_password already exists in this cluster.");
    jobs.length = 0;
    for (const [body, field] of [
      [{ name: "-leading", data: "x" }, "name"],
      [{ name: "has space", data: "x" }, "name"],
      [{ name: "a".repeat(65), data: "x" }, "name"],
      [{ name: "ok", data: "" }, "data"],
      [{ name: "ok", data: "x".repeat(500 * 1024) }, "data"],
      [{ name: "ok" }, "data"],
      [{ name: "ok", data: "x", labels: { "bad key": "v" } }, "labels"],
      [{ name: "ok", data: "x", extra: 1 }, "extra"],
    ] as const) {
      const res = await team.api.post(`/clusters/${uuid}/secrets`, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(JSON.stringify(res.body.errors), JSON.stringify(body).slice(0, 80)).toContain(field);
    }
    expect(jobs).toEqual([]);
  });

  it("one in use by a service is refused (409 naming it); an unknown id is a 404; a malformed one a 422; a free one is deleted", async () => {
    stores.secret[0]!.mountedBy = "web";
    const refused = await team.api.delete(`/clusters/${uuid}/secrets/secret1`);
    expect(refused.status).toBe(409);
    expect(refused.body.message).toBe("Refused: secret db_password is in use by service(s) web: remove it from them first");
    expect((await team.api.delete(`/clusters/${uuid}/secrets/nosuch`)).status).toBe(404);
    expect((await team.api.delete(`/clusters/${uuid}/secrets/NOT-AN-ID`)).status).toBe(422);
    delete stores.secret[0]!.mountedBy;
    const res = await team.api.delete(`/clusters/${uuid}/secrets/secret1`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Secret db_password deleted." });
    expect(stores.secret).toEqual([]);
  });

  it("an engine failure is a 502 with its reason, and the payload is scrubbed then too", async () => {
    failNext = "create secret boom: rpc error: code = Unknown desc = raft unavailable";
    const res = await team.api.post(`/clusters/${uuid}/secrets`, { name: "boom", data: VALUE });
    failNext = null;
    expect(res.status).toBe(502);
    expect(res.body.message).toMatch(/raft unavailable/);
    for (const r of await t.instance.database.prisma.job.findMany({ where: { type: "swarm.object.create" } })) expect(t.instance.box.open(r.payload)).not.toContain(VALUE);
  });
});

describe("configs", () => {
  it("create and list return the data (documented); delete removes it", async () => {
    const res = await team.api.post(`/clusters/${uuid}/configs`, { name: "nginx.conf", data: "server { listen 80; }\n" });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ name: "nginx.conf", data: "server { listen 80; }\n", labels: {} });
    const list = await team.api.get(`/clusters/${uuid}/configs`);
    expect(list.body.data.map((c: any) => [c.name, c.data])).toEqual([["nginx.conf", "server { listen 80; }\n"]]);
    const id = res.body.data.id;
    const del = await team.api.delete(`/clusters/${uuid}/configs/${id}`);
    expect(del.body).toEqual({ message: "Config nginx.conf deleted." });
    expect((await team.api.delete(`/clusters/${uuid}/configs/${id}`)).status).toBe(404);
  });
});

describe("teams and roles", () => {
  it("another team's cluster is a 404 on every route and nothing is sent; a member lists but may not create or delete (403)", async () => {
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
    jobs.length = 0;
    for (const kind of ["secrets", "configs"]) {
      expect((await other.api.get(`/clusters/${uuid}/${kind}`)).status).toBe(404);
      expect((await other.api.post(`/clusters/${uuid}/${kind}`, { name: "intruder", data: "x" })).status).toBe(404);
      expect((await other.api.delete(`/clusters/${uuid}/${kind}/abc`)).status).toBe(404);
    }
    expect(jobs).toEqual([]);
    const member = await t.newMember(team.teamId, "member");
    const api = t.api(member.token);
    expect((await api.get(`/clusters/${uuid}/configs`)).status).toBe(200);
    expect((await api.post(`/clusters/${uuid}/secrets`, { name: "m", data: "x" })).status).toBe(403);
    expect((await api.delete(`/clusters/${uuid}/configs/abc`)).status).toBe(403);
  });
});
