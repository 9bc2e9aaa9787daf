/**
 * GET /servers/{uuid}/resources and /domains (issue 15): from the stored records, so they
 * answer with the agent away; every resource on the server with its last known status and a
 * staleness marker; what the engine runs merged in when the agent answers; a member sees only
 * the resources of the environments its grants reach.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ServerList, type ManagedContainer } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { appWorld, connectServerAgent, createImageApp, newServer, ok, placement, until, type AppWorld } from "./support/applications.js";
import { ISO, createDb } from "./support/standalone-databases.js";

let t: TestInstance;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
const prisma = () => t.instance.database.prisma;

beforeAll(async () => {
  t = await startTestInstance();
  t.instance.services.servers.liveViewWaitMs = 1_500;
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

const container = (uuid: string, status: string, domains = ""): ManagedContainer => ({
  id: `c-${uuid}`,
  name: `c-${uuid}`,
  image: "x",
  status,
  labels: { "capstan.managed": "true", "capstan.resource.uuid": uuid, "capstan.domains": domains },
});

/** A world with an app with two domains, an app without, and a database, in production; an app in staging. */
async function world() {
  const w = await appWorld(t, keys);
  await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "env");
  const web = await createImageApp(w, { name: "web", fqdn: "https://web.example.test,https://www.example.test/shop" });
  const worker = await createImageApp(w, { name: "worker" });
  const db = await createDb(w, "redis", { name: "cache" });
  const stage = await createImageApp(w, { ...placement(w, "staging"), name: "stage", fqdn: "http://stage.example.test" });
  await prisma().application.update({ where: { uuid: web.uuid }, data: { status: "running:healthy" } });
  await prisma().standaloneDatabase.update({ where: { uuid: db.uuid }, data: { status: "running:healthy" } });
  return { w, web, worker, db, stage };
}

const resourcesOf = async (w: AppWorld, api = w.api) => {
  const res = await api.get(`/servers/${w.server.uuid}/resources`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { uuid: string; name: string; type: string; status: string; stale: boolean; last_seen_at: string | null; project_uuid: string; environment_name: string }[];
};
const domainsOf = async (w: AppWorld, api = w.api) => {
  const res = await api.get(`/servers/${w.server.uuid}/domains`);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as { domain: string; resource_uuid: string; routed: boolean | null; stale: boolean; last_seen_at: string | null }[];
};

describe("server resources and domains from the stored records", () => {
  it("answer 200 with every resource while no agent has ever connected: last known status, stale, never seen", async () => {
    const { w, web, worker, db, stage } = await world();
    const list = await resourcesOf(w);
    expect(list).toEqual([
      { uuid: web.uuid, name: "web", type: "application", status: "running:healthy", stale: true, last_seen_at: null, project_uuid: w.project.uuid, environment_name: "production" },
      { uuid: worker.uuid, name: "worker", type: "application", status: "exited", stale: true, last_seen_at: null, project_uuid: w.project.uuid, environment_name: "production" },
      { uuid: stage.uuid, name: "stage", type: "application", status: "exited", stale: true, last_seen_at: null, project_uuid: w.project.uuid, environment_name: "staging" },
      { uuid: db.uuid, name: "cache", type: "standalone-redis", status: "running:healthy", stale: true, last_seen_at: null, project_uuid: w.project.uuid, environment_name: "production" },
    ]);
    expect(await domainsOf(w)).toEqual([
      { domain: "web.example.test", resource_uuid: web.uuid, resource_name: "web", resource_type: "application", routed: null, stale: true, last_seen_at: null },
      { domain: "www.example.test", resource_uuid: web.uuid, resource_name: "web", resource_type: "application", routed: null, stale: true, last_seen_at: null },
      { domain: "stage.example.test", resource_uuid: stage.uuid, resource_name: "stage", resource_type: "application", routed: null, stale: true, last_seen_at: null },
    ]);
    // Pagination works on them as on every list.
    const page = await w.api.get(`/servers/${w.server.uuid}/resources`, { page: 2, per_page: 3 });
    expect(page.body).toMatchObject({ data: [{ uuid: db.uuid }], meta: { total: 4, last_page: 2 } });
  });

  it("merge what the engine runs when the agent answers: no container is exited now, routed says which domains a container serves", async () => {
    const { w, web, worker, db, stage } = await world();
    const agent = await connectServerAgent(t, w);
    agents.push(agent);
    // web runs with one of its two domains deployed; the database runs; worker and stage have no container.
    agent.serve("containers.list", () => ({ ok: true, result: { containers: [container(web.uuid, "running:healthy", "web.example.test"), container(db.uuid, "running:healthy"), container("left-behind", "running:unknown", "old.example.test")] } }));
    await prisma().application.update({ where: { uuid: stage.uuid }, data: { status: "running:healthy" } }); // a stale report
    const before = Date.now();
    const list = await resourcesOf(w);
    expect(list.map((r) => [r.name, r.status, r.stale])).toEqual([
      ["web", "running:healthy", false],
      ["worker", "exited", false],
      ["stage", "exited", false],
      ["cache", "running:healthy", false],
    ]);
    for (const r of list) expect(Date.parse(r.last_seen_at!)).toBeGreaterThanOrEqual(before - 1000);
    expect(list.map((r) => r.uuid)).not.toContain("left-behind");
    expect((await domainsOf(w)).map((d) => [d.domain, d.routed, d.stale])).toEqual([
      ["web.example.test", true, false],
      ["www.example.test", false, false],
      ["stage.example.test", false, false],
    ]);

    // The agent does not answer in time: the records, stale, as of the agent's last contact.
    agent.serve("containers.list", () => ({ hold: true }));
    const slow = await resourcesOf(w);
    expect(slow.every((r) => r.stale)).toBe(true);
    expect(slow.find((r) => r.uuid === web.uuid)).toMatchObject({ status: "running:healthy", last_seen_at: expect.stringMatching(ISO) });
    expect((await domainsOf(w)).every((d) => d.routed === null && d.stale)).toBe(true);
  });

  it("after the agent went away: the last reported statuses, stale, last seen when the agent was last in touch", async () => {
    const { w, web } = await world();
    const agent = await connectServerAgent(t, w);
    agent.close();
    await until(async () => (await w.api.get(`/servers/${w.server.uuid}`)).body.status === "unreachable");
    const lastSeen = (await w.api.get(`/servers/${w.server.uuid}`)).body.agent.last_seen_at as string;
    const list = await resourcesOf(w);
    expect(list.find((r) => r.uuid === web.uuid)).toMatchObject({ status: "running:healthy", stale: true, last_seen_at: lastSeen });
    // A resource created after the agent left was never reported: no last_seen_at.
    const late = await createImageApp(w, { name: "late" });
    expect((await resourcesOf(w)).find((r) => r.uuid === late.uuid)).toMatchObject({ status: "exited", stale: true, last_seen_at: null });
  });

  it("a member sees only the resources and domains of the environments its grants reach; another team gets 404", async () => {
    const { w, stage } = await world();
    const member = await t.newMember(w.team.teamId, "member");
    const api = t.api(member.token);
    expect(await resourcesOf(w, api)).toEqual([]);
    expect(await domainsOf(w, api)).toEqual([]);
    const staging = (await w.api.get(`/projects/${w.project.uuid}/staging`)).body.id as number;
    await ok(w.api.post("/permissions/environment", { environment_id: staging, user_id: member.userId, permission_level: "view_only" }), "override");
    expect((await resourcesOf(w, api)).map((r) => r.uuid)).toEqual([stage.uuid]);
    expect((await domainsOf(w, api)).map((d) => d.domain)).toEqual(["stage.example.test"]);
    const viewer = await t.newMember(w.team.teamId, "viewer");
    expect(await resourcesOf(w, t.api(viewer.token))).toHaveLength(4);
    const other = await t.newTeam();
    expect((await other.api.get(`/servers/${w.server.uuid}/resources`)).status).toBe(404);
    expect((await other.api.get(`/servers/${w.server.uuid}/domains`)).status).toBe(404);
  });

  // Fleet (w5 follow-ups): the list carries what the dashboard's Fleet page shows, in one read.
  it("GET /servers carries each server's agent, engine version and resource count, as the caller may see them", async () => {
    const { w, stage } = await world();
    const empty = await newServer(w.api, w.keyUuid, "empty");
    await prisma().server.update({ where: { uuid: w.server.uuid }, data: { agentVersion: "1.2.3", lastSeenAt: new Date("2026-01-02T03:04:05Z"), facts: JSON.stringify({ engine: { version: "27.1.0" } }) } });
    const listed = async (api = w.api) => {
      const body = ServerList.parse((await ok(api.get("/servers"), "server list")) as unknown);
      return Object.fromEntries(body.data.map((s) => [s.uuid, s]));
    };
    const all = await listed();
    expect(all[w.server.uuid]).toMatchObject({ agent: { connected: false, version: "1.2.3", last_seen_at: "2026-01-02T03:04:05.000Z" }, engine_version: "27.1.0", resource_count: 4 });
    expect(all[empty.uuid]).toMatchObject({ agent: { connected: false, version: null, last_seen_at: null }, engine_version: null, resource_count: 0 });
    // The count is of what GET /servers/{uuid}/resources lists for the caller.
    expect(all[w.server.uuid]!.resource_count).toBe((await resourcesOf(w)).length);
    const member = await t.newMember(w.team.teamId, "member");
    expect((await listed(t.api(member.token)))[w.server.uuid]!.resource_count).toBe(0);
    const staging = (await w.api.get(`/projects/${w.project.uuid}/staging`)).body.id as number;
    await ok(w.api.post("/permissions/environment", { environment_id: staging, user_id: member.userId, permission_level: "view_only" }), "override");
    expect((await listed(t.api(member.token)))[w.server.uuid]!.resource_count).toBe(1);
    expect((await resourcesOf(w, t.api(member.token))).map((r) => r.uuid)).toEqual([stage.uuid]);
  });
});
