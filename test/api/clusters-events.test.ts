import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FEATURES, type JobEnvelope, type SwarmEvent, type SwarmNode } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { swarmNode } from "./support/swarm.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";
import { sampleHostFacts } from "../support/host-facts.js";
import { until } from "./support/deployments.js";
import { EVENTS_KEPT, pruneEvents } from "../../control-plane/src/services/clusters/events.js";

/**
 * Cluster events (spec 4.12 / section 6, issue 20) against two scripted manager agents of one
 * swarm speaking the real wire protocol (the real engine: test/e2e/clusters.test.ts). Each
 * manager answers swarm.events as the engine does: every event it keeps from `since`
 * (inclusive) on. Checks the control plane's part: collection before answering, each event
 * stored once however often and by whichever manager it is reported, since (exclusive) and
 * limit, chronological order, the gate, cross-team 404, validation, retention.
 */
let t: TestInstance;
let team: TeamFixture;
const keys = new KeyFactory();
const agents: Record<string, ScriptedAgent> = {};
const serverIds: Record<string, string> = {};
let uuid: string;

const SWARM = "swarm0000000000000000000c3";
const mgr = (id: string, leader: boolean): SwarmNode => swarmNode(id, id, { version: 3, role: "manager", reachability: "reachable", leader });
const NODES = [mgr("nodea", true), mgr("nodeb", false)];

/** A minute ago, in nanoseconds, with digits a double would lose. */
const BASE = BigInt(Date.now() - 60_000) * 1_000_000n + 123_457n;
const at = (i: number) => (BASE + BigInt(i)).toString();
/** What the swarm's engines keep (both managers see the same cluster events). */
const kept: SwarmEvent[] = [
  { type: "node", action: "update", actor_id: "nodeb", attributes: { name: "nodeb", "availability.old": "active", "availability.new": "drain" }, time_nano: at(0) },
  { type: "service", action: "create", actor_id: "svc1", attributes: { name: "web" }, time_nano: at(1) },
  { type: "service", action: "update", actor_id: "svc1", attributes: { name: "web", "replicas.old": "1", "replicas.new": "3" }, time_nano: at(2) },
];
const asked: { server: string; job: JobEnvelope }[] = [];

async function manager(id: string) {
  const key = (await team.api.post("/security/keys", { name: `${id}-key`, private_key: (await keys.generate("ed25519")).privateKey })).body;
  const server = (await team.api.post("/servers", { name: id, ip: "10.0.0.9", private_key_uuid: key.uuid })).body;
  serverIds[id] = server.uuid;
  const agent = await connectAgent(t.url, server.agent_token);
  agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: [] } }));
  agent.serve("swarm.info", () => ({ ok: true, result: { state: "active", node_id: id, role: "manager", swarm_id: SWARM, swarm_name: "default", nodes: NODES } }));
  agent.serve("swarm.events", (job) => {
    asked.push({ server: id, job });
    const since = BigInt((job.payload as { since_nano: string }).since_nano);
    return { ok: true, result: { events: kept.filter((e) => BigInt(e.time_nano) >= since), until_nano: (BigInt(Date.now()) * 1_000_000n).toString() } };
  });
  const facts = sampleHostFacts(`host-${id}`);
  facts.engine.swarm = "active";
  facts.engine.swarm_role = "manager";
  await agent.hello(facts);
  agents[id] = agent;
}

const db = () => t.instance.database.prisma;
/** The next GET collects again (as once the last collection is a few seconds old). */
const stale = () => db().cluster.updateMany({ where: { uuid }, data: { eventsAt: null } });
const stored = async () => db().clusterEvent.count({ where: { cluster: { uuid } } });

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
  await manager("nodea");
  await manager("nodeb");
  const detected = await team.api.post("/clusters/detect");
  expect(detected.body.clusters_found).toBe(1);
  uuid = detected.body.data[0].uuid;
}, 180_000);
afterAll(async () => {
  for (const a of Object.values(agents)) a.close();
  keys.cleanup();
  await t?.close();
});

describe("GET /clusters/{uuid}/events", () => {
  it("collects from a manager first and answers the events chronologically, exact to the nanosecond", async () => {
    await stale();
    const res = await team.api.get(`/clusters/${uuid}/events`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.map((e: { time_nano: string }) => e.time_nano)).toEqual([at(0), at(1), at(2)]);
    const secs = BASE / 1_000_000_000n;
    const frac = (BASE % 1_000_000_000n).toString().padStart(9, "0");
    expect(res.body.data[0]).toEqual({
      time: `${new Date(Number(secs) * 1000).toISOString().slice(0, 19)}.${frac}Z`,
      time_nano: at(0),
      type: "node",
      action: "update",
      actor_id: "nodeb",
      attributes: { name: "nodeb", "availability.old": "active", "availability.new": "drain" },
    });
    expect(res.body.data[2].attributes).toEqual({ name: "web", "replicas.old": "1", "replicas.new": "3" });
    expect(Date.parse(res.body.collected_at)).toBeGreaterThan(Date.now() - 30_000);
    // The leader's agent was asked, from an hour back (nothing stored yet).
    const first = asked.find((a) => a.server === "nodea")!;
    expect(BigInt((first.job.payload as { since_nano: string }).since_nano)).toBeLessThan(BASE - 3_000_000_000_000n);
  });

  it("stores each event once when it is reported again, by the same manager or by another", async () => {
    expect(await stored()).toBe(3);
    // The same manager again: it answers the last stored event again (the engine's since is inclusive).
    asked.length = 0;
    await stale();
    expect((await team.api.get(`/clusters/${uuid}/events`)).body.data).toHaveLength(3);
    expect(asked.map((a) => [a.server, (a.job.payload as { since_nano: string }).since_nano.replace(/^0+/, "")])).toContainEqual(["nodea", at(2)]);
    expect(await stored()).toBe(3);
    // The leader's agent gone: the other manager reports the same events, and one new one.
    agents.nodea!.close();
    await until(async () => (await team.api.get(`/servers/${serverIds.nodea}`)).body.status !== "reachable", 10_000, "nodea disconnected");
    kept.push({ type: "secret", action: "create", actor_id: "sec1", attributes: { name: "db_password" }, time_nano: at(3) });
    const manyAt = (BASE + 5n).toString();
    kept.push({ type: "config", action: "create", actor_id: "cfg1", attributes: { name: "app.conf" }, time_nano: manyAt });
    asked.length = 0;
    await stale();
    // The GET starts the collection; on a loaded machine it may answer (after its wait) before the outcome is stored.
    await team.api.get(`/clusters/${uuid}/events`);
    await until(async () => (await stored()) >= 5, 30_000, "the second manager's events stored");
    const res = await team.api.get(`/clusters/${uuid}/events`);
    expect(asked.map((a) => a.server)).toContain("nodeb");
    expect(res.body.data.map((e: { type: string }) => e.type)).toEqual(["node", "service", "service", "secret", "config"]);
    expect(await stored()).toBe(5);
    // Every event the second manager sees (not only from since on): still each once.
    await t.instance.services.clusters.eventsEnded({
      id: "x",
      serverId: (await db().server.findFirstOrThrow({ where: { uuid: serverIds.nodeb } })).id,
      type: "swarm.events",
      payload: "{}",
      status: "succeeded",
      attempt: 1,
      deadlineAt: new Date(),
      result: JSON.stringify({ events: kept, until_nano: "1" }),
      error: null,
      finishedAt: new Date(),
    });
    expect(await stored()).toBe(5);
  });

  it("since (RFC 3339 or Unix seconds) is exclusive; limit bounds the answer; without since, the latest", async () => {
    const all = (await team.api.get(`/clusters/${uuid}/events`)).body.data as { time: string; time_nano: string }[];
    expect(all).toHaveLength(5);
    const nanos = (q: string) => team.api.get(`/clusters/${uuid}/events?${q}`).then((r) => {
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      return (r.body.data as { time_nano: string }[]).map((e) => e.time_nano);
    });
    expect(await nanos(`since=${encodeURIComponent(all[1]!.time)}`)).toEqual([at(2), at(3), at(5)]);
    expect(await nanos(`since=${encodeURIComponent(all[1]!.time)}&limit=2`)).toEqual([at(2), at(3)]);
    const unix = `${BigInt(at(3)) / 1_000_000_000n}.${(BigInt(at(3)) % 1_000_000_000n).toString().padStart(9, "0")}`;
    expect(await nanos(`since=${unix}`)).toEqual([at(5)]);
    // Whole seconds before all of them; an offset time is the same instant.
    expect(await nanos(`since=${BASE / 1_000_000_000n - 1n}`)).toHaveLength(5);
    const iso = new Date(Number(BASE / 1_000_000n) - 1000).toISOString().replace("Z", "+00:00");
    expect(await nanos(`since=${encodeURIComponent(iso)}`)).toHaveLength(5);
    expect(await nanos(`since=${BigInt(at(5)) / 1_000_000_000n + 1n}`)).toEqual([]);
    expect(await nanos("limit=2")).toEqual([at(3), at(5)]);
    expect(await nanos("limit=500")).toHaveLength(5);
  });

  it("refuses a bad since or limit with 422", async () => {
    for (const q of ["since=yesterday", "since=2026-13-01T00:00:00Z", "since=2026-02-31T00:00:00Z", "since=2026-01-01T00:00:00", "since=-5", "limit=0", "limit=501", "limit=abc", "limit=2.5"]) {
      const res = await team.api.get(`/clusters/${uuid}/events?${q}`);
      expect(res.status, q).toBe(422);
    }
  });

  it("answers 402 for a team without CLUSTER_MANAGEMENT and 404 for another team's cluster", async () => {
    const unpaid = await t.newTeam();
    await t.instance.admin.setTeamFeatures(unpaid.teamId, { enable: FEATURES.filter((f) => f !== "CLUSTER_MANAGEMENT") });
    const res = await unpaid.api.get(`/clusters/${uuid}/events`);
    expect(res.status).toBe(402);
    expect(res.body.message).toMatch(/CLUSTER_MANAGEMENT/);
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: ["CLUSTER_MANAGEMENT"] });
    expect((await other.api.get(`/clusters/${uuid}/events`)).status).toBe(404);
  });
});

describe("retention", () => {
  it("deletes events older than 7 days and keeps at most the newest 10,000 per cluster, a bounded batch per pass", async () => {
    const cluster = await db().cluster.findFirstOrThrow({ where: { uuid } });
    const row = (i: number, ms: number) => ({
      clusterId: cluster.id,
      timeNano: (BigInt(ms) * 1_000_000n + BigInt(i)).toString().padStart(20, "0"),
      time: new Date(ms),
      type: "node",
      action: "update",
      actorId: "nodeb",
      attributes: "{}",
      dedupeKey: `test-${ms}-${i}`,
    });
    const eightDays = Date.now() - 8 * 24 * 3_600_000;
    await db().clusterEvent.createMany({ data: [0, 1, 2].map((i) => row(i, eightDays)) });
    expect(await stored()).toBe(8);
    await pruneEvents(db());
    expect(await stored()).toBe(5);
    // Over the cap: the oldest go, the newest (the five collected above among them) stay.
    const hourAgo = Date.now() - 3_600_000;
    const extra = EVENTS_KEPT + 2;
    // One row through Prisma (its time stored as Prisma stores it), the rest copied from it in one statement (10,000 single inserts take
    // seconds on a busy machine). Their timeNano values have 19 digits: one leading zero pads them to 20, on both dialects.
    const first = row(0, hourAgo);
    await db().clusterEvent.create({ data: first });
    const nano = BigInt(hourAgo) * 1_000_000n;
    expect(first.timeNano).toBe(`0${nano}`);
    await db().$executeRawUnsafe(
      `INSERT INTO "ClusterEvent" ("clusterId", "timeNano", "time", "type", "action", "actorId", "attributes", "dedupeKey", "createdAt")
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${extra - 1})
        SELECT e."clusterId", '0' || (${nano} + n.i), e."time", e."type", e."action", e."actorId", e."attributes", 'test-bulk-' || n.i, e."createdAt"
        FROM n CROSS JOIN "ClusterEvent" e WHERE e."dedupeKey" = '${first.dedupeKey}'`,
    );
    expect(await stored()).toBe(EVENTS_KEPT + 7);
    await pruneEvents(db());
    expect(await stored()).toBe(EVENTS_KEPT);
    const newest = await db().clusterEvent.findMany({ where: { clusterId: cluster.id }, orderBy: { timeNano: "desc" }, take: 5 });
    expect(newest.map((e) => e.timeNano.replace(/^0+/, ""))).toEqual([at(5), at(3), at(2), at(1), at(0)]);
  });
});
