import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EV, type HostFacts } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent, sampleFacts, type ScriptedAgent } from "./support/fake-agent.js";
import { ok, until } from "./support/applications.js";
import { ownAddress } from "./support/fixtures.js";

/**
 * Issue 15, item 8 (server addresses) and the newcomer without Docker: servers created or
 * changed through the API are never at the control plane's own or the cloud's metadata
 * addresses (unless the instance opts out), install-agent checks again before it connects,
 * validate changes nothing, and an unusable server says why.
 */
let t: TestInstance;
let team: TeamFixture;
let keyUuid: string;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  const key = await keys.generate("ed25519");
  keyUuid = (await ok(team.api.post("/security/keys", { name: "k", private_key: key.privateKey }), "key")).uuid;
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

const db = () => t.instance.database.prisma;
const create = (ip: string, api = team.api) => api.post("/servers", { name: `s-${ip}`, ip, private_key_uuid: keyUuid });

const REFUSED = [
  "127.0.0.1",
  "127.8.9.10",
  "169.254.169.254",
  "169.254.1.1",
  "100.100.100.200",
  "0.0.0.0",
  "224.0.0.251",
  "255.255.255.255",
  "::1",
  "::",
  "::ffff:127.0.0.1",
  "::ffff:169.254.169.254",
  "fe80::1",
  "fd00:ec2::254",
  "ff02::1",
  "localhost",
  "LOCALHOST",
  "db.localhost",
];
const ALLOWED = ["10.0.0.1", "172.16.4.5", "192.168.1.20", "100.64.0.1", "203.0.113.7", "fd12:3456::1", "2001:db8::10", "server-1.example.com"];

describe("server addresses", () => {
  it("POST /servers refuses loopback, link-local, unspecified, multicast and metadata addresses (also IPv6 and IPv4-mapped forms, localhost by name)", async () => {
    const before = await db().server.count();
    for (const ip of REFUSED) {
      const res = await create(ip);
      expect(res.status, ip).toBe(422);
      expect(Object.keys(res.body.errors), ip).toEqual(["ip"]);
      expect(res.body.errors.ip[0], ip).toMatch(/PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
    }
    expect(await db().server.count()).toBe(before);
  });

  it("private LAN ranges, public addresses and names are servers' normal addresses", async () => {
    for (const ip of ALLOWED) expect((await create(ip)).status, ip).toBe(201);
  });

  it("PATCH /servers/{uuid} refuses them too and changes nothing", async () => {
    const s = await ok(create("10.1.2.3"), "server");
    for (const ip of ["169.254.169.254", "::ffff:7f00:1", "localhost"]) {
      const res = await team.api.patch(`/servers/${s.uuid}`, { ip, name: "moved" });
      expect(res.status, ip).toBe(422);
    }
    expect((await team.api.get(`/servers/${s.uuid}`)).body).toMatchObject({ ip: "10.1.2.3", name: "s-10.1.2.3" });
  });

  it("install-agent checks the address again right before connecting: a stored loopback or metadata address, or a name resolving to one, is 422 without any connection", async () => {
    const s = await ok(create("10.9.8.7"), "server");
    // Rows from before the rule (or stored while the instance allowed them).
    for (const ip of ["127.0.0.1", "169.254.169.254", "localhost", "localhost."]) {
      await db().server.update({ where: { uuid: s.uuid }, data: { ip } });
      const res = await team.api.post(`/servers/${s.uuid}/install-agent`);
      expect(res.status, ip).toBe(422);
      expect(res.body.errors.ip[0], ip).toMatch(/loopback|link-local|metadata/);
    }
    // An allowed address is connected to (this machine's own address, port 1: refused at once).
    await db().server.update({ where: { uuid: s.uuid }, data: { ip: ownAddress(), port: 1 } });
    const tried = await team.api.post(`/servers/${s.uuid}/install-agent`);
    expect(tried.status).toBe(502);
    expect(tried.body.message).toMatch(/SSH connection/);
  });

  it("the documented opt-out (PLATFORM_ALLOW_PRIVATE_ENDPOINTS=true) allows them", async () => {
    const open = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
    try {
      const owner = await open.newTeam();
      const key = await keys.generate("ed25519");
      const k = (await ok(owner.api.post("/security/keys", { name: "k", private_key: key.privateKey }), "key")).uuid;
      expect((await owner.api.post("/servers", { name: "this-machine", ip: "127.0.0.1", private_key_uuid: k })).status).toBe(201);
    } finally {
      await open.close();
    }
  });
});

/** A scripted agent for a new server, with the facts it says hello with. */
async function connected(facts: HostFacts) {
  const s = await ok(create(`10.7.${agents.length}.1`), "server");
  const agent = await connectAgent(t.url, s.agent_token);
  agents.push(agent);
  await agent.hello(facts);
  await until(async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "reachable");
  return { uuid: s.uuid as string, agent };
}

const NO_ENGINE = "Docker Engine is not reachable at /var/run/docker.sock (ENOENT): no Docker Engine listens there. Install one...";
const noEngine: HostFacts = { ...sampleFacts, engine: { ...sampleFacts.engine, running: false, version: null, api_version: null, compose_version: null, error: NO_ENGINE } };

describe("usability follows the agent's reports; validate changes nothing", () => {
  it("a server whose agent has no engine says why in GET /servers/{uuid} and in the list, and becomes usable when the engine appears", async () => {
    const { uuid, agent } = await connected(noEngine);
    // Its preparation fails: there is no engine to make the network on.
    const prepare = await agent.nextJob();
    expect(prepare.type).toBe("server.prepare");
    await agent.outcome({ id: prepare.id, attempt: prepare.attempt, ok: false, error: NO_ENGINE });
    const detail = (await team.api.get(`/servers/${uuid}`)).body;
    expect(detail.settings).toEqual({ is_reachable: true, is_usable: false, unusable_reason: NO_ENGINE });
    const listed = (await team.api.get("/servers")).body.data.find((s: { uuid: string }) => s.uuid === uuid);
    expect(listed.settings.unusable_reason).toBe(NO_ENGINE);
    // The engine was installed: the agent's next facts make the server usable.
    agent.socket.emit(EV.facts, { facts: sampleFacts });
    await until(async () => (await team.api.get(`/servers/${uuid}`)).body.settings.is_usable === true);
    expect((await team.api.get(`/servers/${uuid}`)).body.settings.unusable_reason).toBeNull();
    // ...and its failed preparation runs again, now that there is an engine.
    const again = await agent.nextJob();
    expect(again).toMatchObject({ type: "server.prepare", payload: { networks: ["capstan"] } });
    await agent.outcome({ id: again.id, attempt: again.attempt, ok: true, result: { created: ["capstan"], existing: [] } });
    // Later facts do not queue it again.
    agent.socket.emit(EV.facts, { facts: sampleFacts });
    await new Promise((r) => setTimeout(r, 300));
    expect(await db().job.count({ where: { server: { uuid }, type: "server.prepare" } })).toBe(2);
  });

  it("no compose: unusable, with the reason", async () => {
    const { uuid } = await connected({ ...sampleFacts, engine: { ...sampleFacts.engine, compose_version: null } });
    expect((await team.api.get(`/servers/${uuid}`)).body.settings).toMatchObject({ is_usable: false, unusable_reason: expect.stringMatching(/Docker Compose is not available/) });
  });

  it("GET /servers/{uuid}/validate answers the reason and writes nothing, failed or not", async () => {
    const { uuid, agent } = await connected(sampleFacts);
    const before = await db().server.findUniqueOrThrow({ where: { uuid } });
    expect(before.isUsable).toBe(true);
    const validating = team.api.get(`/servers/${uuid}/validate`);
    let job = await agent.nextJob();
    while (job.type !== "server.validate") job = await agent.nextJob();
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: NO_ENGINE });
    const v = await validating;
    expect(v.status).toBe(503);
    expect(v.body.message).toContain(NO_ENGINE);
    const after = await db().server.findUniqueOrThrow({ where: { uuid } });
    expect(after.isUsable).toBe(true);
    expect(after.updatedAt).toEqual(before.updatedAt);

    agent.close();
    await until(async () => (await team.api.get(`/servers/${uuid}`)).body.status === "unreachable");
    const gone = await db().server.findUniqueOrThrow({ where: { uuid } });
    expect((await team.api.get(`/servers/${uuid}/validate`)).status).toBe(503);
    expect((await db().server.findUniqueOrThrow({ where: { uuid } })).updatedAt).toEqual(gone.updatedAt);
  });
});
