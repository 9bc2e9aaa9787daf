import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConnectivityHistory } from "@capstan/shared";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";
import { appWorld, connectServerAgent, newServer, until, type AppWorld } from "./support/applications.js";

/**
 * GET /servers/{uuid}/connectivity (dashboard, issue 22; beyond the spec, docs/decisions.md):
 * every connect and disconnect of a server's agent is one row, written by the trigger on the
 * server's status; the history lists periods newest first with their durations.
 */
let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];

const history = async (uuid: string, query = "") => {
  const res = await w.api.get(`/servers/${uuid}/connectivity${query}`);
  expect(res.status).toBe(200);
  return ConnectivityHistory.parse(res.body).data;
};
const status = async (uuid: string) => (await w.api.get(`/servers/${uuid}`)).body.status as string;
const rowsOf = (serverUuid: string) => t.instance.database.prisma.serverConnectivity.count({ where: { server: { uuid: serverUuid } } });

beforeAll(async () => {
  t = await startTestInstance();
  w = await appWorld(t, keys);
}, 60_000);

afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

describe("server connectivity history", () => {
  it("a server never seen has no history", async () => {
    expect(await history(w.server.uuid)).toEqual([]);
  });

  it("connect, drop, connect again: three periods newest first, the drop with its duration", async () => {
    const first = await connectServerAgent(t, w);
    agents.push(first);
    // A second hello on the same connection changes no state: no row.
    await first.hello();
    expect(await rowsOf(w.server.uuid)).toBe(1);
    first.close();
    await until(async () => (await status(w.server.uuid)) === "unreachable");
    const down = Date.now();
    await until(async () => Date.now() - down > 1100, 5000);
    const again = await connectAgent(t.url, w.server.agentToken);
    agents.push(again);
    await again.hello();
    await until(async () => (await status(w.server.uuid)) === "reachable");

    const periods = await history(w.server.uuid);
    expect(periods.map((p) => p.state)).toEqual(["reachable", "unreachable", "reachable"]);
    const [now, drop, before] = periods as [ (typeof periods)[0], (typeof periods)[0], (typeof periods)[0] ];
    expect(now.until).toBeNull();
    expect(drop.until).toBe(now.since);
    expect(before.until).toBe(drop.since);
    const dropped = (Date.parse(drop.until!) - Date.parse(drop.since)) / 1000;
    expect(dropped).toBeGreaterThanOrEqual(1);
    expect(drop.duration_seconds).toBe(Math.floor(dropped));
    expect(before.duration_seconds).toBe(Math.floor((Date.parse(before.until!) - Date.parse(before.since)) / 1000));
    expect(now.duration_seconds).toBeGreaterThanOrEqual(0);

    expect((await history(w.server.uuid, "?limit=1")).map((p) => p.state)).toEqual(["reachable"]);
    expect(await history(w.server.uuid, "?limit=2")).toEqual(periods.slice(0, 2).map((p, i) => (i === 0 ? { ...p, duration_seconds: expect.any(Number) } : p)));
  });

  it("limit outside 1..200 is a 422 and other servers' histories stay apart", async () => {
    for (const q of ["?limit=0", "?limit=201", "?limit=x"]) expect((await w.api.get(`/servers/${w.server.uuid}/connectivity${q}`)).status).toBe(422);
    const other = await newServer(w.api, w.keyUuid, "quiet");
    expect(await history(other.uuid)).toEqual([]);
    expect((await w.api.get(`/servers/00000000-0000-4000-8000-000000000000/connectivity`)).status).toBe(404);
  });

  it("any writer of the status is recorded (the heartbeat's stale sweep too); the newest 200 per server are kept", async () => {
    const s = await newServer(w.api, w.keyUuid, "flappy");
    const prisma = t.instance.database.prisma;
    // A server that was never seen (no lastSeenAt) records nothing.
    await prisma.server.update({ where: { uuid: s.uuid }, data: { status: "unreachable" } });
    expect(await rowsOf(s.uuid)).toBe(0);
    // Stamps ahead of now (whole minutes): the heartbeat's stale sweep takes a reachable row with
    // no replica and an old lastSeenAt for a lost agent, and would write a period of its own here.
    const start = Math.ceil(Date.now() / 60_000) * 60_000 + 24 * 3_600_000;
    for (let i = 0; i < 205; i++) {
      await prisma.server.update({ where: { uuid: s.uuid }, data: { status: i % 2 ? "unreachable" : "reachable", lastSeenAt: new Date(start + i * 60_000) } });
    }
    // Unchanged status (the heartbeat's lastSeenAt stamps): nothing recorded.
    await prisma.server.update({ where: { uuid: s.uuid }, data: { lastSeenAt: new Date(start + 300 * 60_000) } });
    expect(await rowsOf(s.uuid)).toBe(200);
    const all = await history(s.uuid, "?limit=200");
    expect(all).toHaveLength(200);
    expect(all[0]).toMatchObject({ state: "reachable", since: new Date(start + 204 * 60_000).toISOString(), until: null });
    expect(all[1]).toMatchObject({ state: "unreachable", since: new Date(start + 203 * 60_000).toISOString(), duration_seconds: 60 });
    expect(all[199]!.since).toBe(new Date(start + 5 * 60_000).toISOString());
    expect(await history(s.uuid)).toHaveLength(50);
    // The server's rows go with it.
    expect((await w.api.delete(`/servers/${s.uuid}`)).status).toBe(200);
    expect(await prisma.serverConnectivity.count({ where: { serverId: { notIn: (await prisma.server.findMany({ select: { id: true } })).map((x) => x.id) } } })).toBe(0);
  });
});

describe("liveness by replica lease (agents/replica-lease.ts)", () => {
  it("a connected server is seen until its replica's last beat; its row is not stamped by the heartbeat", async () => {
    const world = await appWorld(t, keys);
    agents.push(await connectServerAgent(t, world));
    const prisma = t.instance.database.prisma;
    const row = await prisma.server.findUniqueOrThrow({ where: { uuid: world.server.uuid } });
    expect(row.gatewayReplica).toEqual(expect.any(String));
    const lease = await prisma.gatewayReplica.findUniqueOrThrow({ where: { id: row.gatewayReplica! } });
    // A beat later than the hello: the server's last_seen_at follows it, in the list and the detail.
    const beat = new Date(Math.max(Date.now(), lease.beatAt.getTime()) + 5_000);
    await prisma.gatewayReplica.update({ where: { id: lease.id }, data: { beatAt: beat } });
    const detail = (await world.api.get(`/servers/${world.server.uuid}`)).body;
    expect(detail.agent.last_seen_at).toBe(beat.toISOString());
    const listed = (await world.api.get(`/servers`)).body.data.find((x: { uuid: string }) => x.uuid === world.server.uuid);
    expect(listed.agent.last_seen_at).toBe(beat.toISOString());
    expect((await prisma.server.findUniqueOrThrow({ where: { uuid: world.server.uuid } })).lastSeenAt).toEqual(row.lastSeenAt);
  });

  it("a replica whose lease lapsed: its servers become unreachable, seen last at its last beat, and its row goes", async () => {
    const s = await newServer(w.api, w.keyUuid, "orphaned");
    const prisma = t.instance.database.prisma;
    const lastBeat = new Date(Date.now() - 60_000);
    await prisma.gatewayReplica.create({ data: { id: "replica-that-died", beatAt: lastBeat } });
    await prisma.server.update({ where: { uuid: s.uuid }, data: { status: "reachable", isUsable: true, lastSeenAt: new Date(Date.now() - 120_000), gatewayReplica: "replica-that-died", agentConnection: "gone" } });
    // The next heartbeat of the running replica (every 10 s) sweeps it.
    await until(async () => (await status(s.uuid)) === "unreachable", 25_000);
    const after = await prisma.server.findUniqueOrThrow({ where: { uuid: s.uuid } });
    expect(after).toMatchObject({ isUsable: false, agentConnection: null, gatewayReplica: null, lastSeenAt: lastBeat });
    expect(await prisma.gatewayReplica.count({ where: { id: "replica-that-died" } })).toBe(0);
    expect((await history(s.uuid))[0]).toMatchObject({ state: "unreachable", since: lastBeat.toISOString(), until: null });
  }, 40_000);
});
