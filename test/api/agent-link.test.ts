import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EV, type ServerStatusEvent } from "@capstan/shared";
import { ANSWER_WITHIN_MS } from "../../control-plane/src/jobs/queue.js";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent, connectFleet, sampleFacts, type ScriptedAgent } from "./support/fake-agent.js";

let t: TestInstance;
let team: TeamFixture;
let keyUuid: string;
const keys = new KeyFactory();
const open: { close(): void }[] = [];

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  const key = await keys.generate("ed25519");
  keyUuid = (await team.api.post("/security/keys", { name: "k", private_key: key.privateKey })).body.uuid;
});
afterAll(async () => {
  for (const s of open) s.close();
  await t?.close();
  keys.cleanup();
});

async function newServer(api = team.api, key = keyUuid, name = "web-1") {
  const res = await api.post("/servers", { name, ip: "10.0.0.5", private_key_uuid: key });
  expect(res.status).toBe(201);
  return res.body as { uuid: string; name: string; ip: string; agent_token: string; join_command: string };
}

async function agent(token: string, opts?: Parameters<typeof connectAgent>[2]): Promise<ScriptedAgent> {
  const a = await connectAgent(t.url, token, opts);
  open.push(a);
  return a;
}

const jobStatus = async (id: string) => (await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id } })).status;
const until = async (fn: () => Promise<boolean>, ms = 10_000) => {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("condition not met in time");
};

describe("servers API (4.3) with an agent link", () => {
  it("creates a server with a default destination, agent token and join command", async () => {
    const s = await newServer();
    expect(s).toMatchObject({ name: "web-1", ip: "10.0.0.5" });
    expect(s.agent_token).toMatch(/^capa_[0-9a-f]{48}$/);
    expect(s.join_command).toContain(s.agent_token);
    expect(s.join_command).toContain("/var/run/docker.sock");
    const got = await team.api.get(`/servers/${s.uuid}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      uuid: s.uuid,
      port: 22,
      user: "root",
      status: "pending",
      settings: { is_reachable: false, is_usable: false, unusable_reason: "The agent is not connected." },
      private_key_uuid: keyUuid,
      agent: { connected: false, version: null },
      destinations: [{ name: "default", network: "capstan" }],
    });
    expect(JSON.stringify(got.body)).not.toContain(s.agent_token);
  });

  it("refuses a key of another team and bad addresses", async () => {
    const other = await t.newTeam();
    expect((await other.api.post("/servers", { name: "x", ip: "10.0.0.1", private_key_uuid: keyUuid })).status).toBe(404);
    const bad = await team.api.post("/servers", { name: "x", ip: "1.2.3.4; rm -rf /", private_key_uuid: keyUuid, user: "root;id" });
    expect(bad.status).toBe(422);
    expect(Object.keys(bad.body.errors)).toEqual(expect.arrayContaining(["ip", "user"]));
    expect((await team.api.get("/servers")).body.data.every((x: { name: string }) => x.name !== "x")).toBe(true);
  });

  it("an agent connects, reports facts, becomes reachable, gets its prepare job, validates", async () => {
    const s = await newServer(team.api, keyUuid, "web-2");
    const fleet = await connectFleet(t.url, team.token);
    open.push(fleet);
    const events: ServerStatusEvent[] = [];
    fleet.on(EV.serverStatus, (e: ServerStatusEvent) => events.push(e));

    const a = await agent(s.agent_token);
    await a.hello();
    const prepare = await a.nextJob();
    expect(prepare).toMatchObject({ type: "server.prepare", attempt: 1, payload: { networks: ["capstan"] } });
    await a.outcome({ id: prepare.id, attempt: 1, ok: true, result: { created: ["capstan"], existing: [] } });

    const got = await team.api.get(`/servers/${s.uuid}`);
    expect(got.body).toMatchObject({
      status: "reachable",
      settings: { is_reachable: true },
      engine: { version: sampleFacts.engine.version, compose_version: "2.20.0" },
      agent: { connected: true, version: "test-0.0.1" },
      host: { hostname: "test-host", cpu_cores: 2 },
    });
    await until(async () => events.some((e) => e.uuid === s.uuid && e.status === "reachable"));

    const validating = team.api.get(`/servers/${s.uuid}/validate`);
    const job = await a.nextJob();
    expect(job.type).toBe("server.validate");
    await a.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { docker_version: "20.10.24", api_version: "1.41", compose_version: "2.20.0" } });
    const v = await validating;
    expect(v.status).toBe(200);
    expect(v.body).toEqual({ message: "Server is reachable and usable.", docker_version: "20.10.24" });
    expect((await team.api.get(`/servers/${s.uuid}`)).body.settings).toEqual({ is_reachable: true, is_usable: true, unusable_reason: null });

    a.close();
    await until(async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "unreachable");
    expect((await team.api.get(`/servers/${s.uuid}`)).body.settings).toEqual({ is_reachable: false, is_usable: false, unusable_reason: "The agent is not connected." });
    await until(async () => events.some((e) => e.uuid === s.uuid && e.status === "unreachable"));
    // Not usable is not a validation error: 503 with the reason, no field errors (a client can
    // tell it apart from a 422 on bad input).
    const v2 = await team.api.get(`/servers/${s.uuid}/validate`);
    expect(v2.status).toBe(503);
    expect(v2.body).toEqual({ message: "Server web-2 is not usable: its agent is not connected." });
  });

  it("validate reports the agent's failure reason", async () => {
    const s = await newServer(team.api, keyUuid, "web-3");
    const a = await agent(s.agent_token);
    await a.hello();
    await a.nextJob(); // prepare
    const validating = team.api.get(`/servers/${s.uuid}/validate`);
    const job = await a.nextJob();
    await a.outcome({ id: job.id, attempt: job.attempt, ok: false, error: "Cannot connect to the Docker daemon" });
    const v = await validating;
    expect(v.status).toBe(503);
    expect(v.body.errors).toBeUndefined();
    expect(v.body.message).toContain("Cannot connect to the Docker daemon");
    // A GET changes nothing: is_usable follows the facts the agent reports (these say usable).
    expect((await team.api.get(`/servers/${s.uuid}`)).body.settings.is_usable).toBe(true);
  });

  it("the detail shows the proxy the agent reported (kind, version, status, routes) and the isolation phase; unknown until a report", async () => {
    const s = await newServer(team.api, keyUuid, "web-proxy");
    const none = (await team.api.get(`/servers/${s.uuid}`)).body.proxy;
    expect(none).toEqual({
      kind: "caddy",
      name: "capstan-proxy",
      image: null,
      version: null,
      status: "unknown",
      routes: null,
      isolation: { enabled: false, phase: "none" },
      reported_at: null,
    });
    const a = await agent(s.agent_token);
    // An agent from before the proxy report: still unknown.
    await a.hello();
    expect((await team.api.get(`/servers/${s.uuid}`)).body.proxy.status).toBe("unknown");
    const proxy = { kind: "caddy" as const, name: "capstan-proxy", image: "capstan/caddy:2.6", version: "v2.6.2", status: "running", routes: 3 };
    await a.hello({ ...sampleFacts, proxy });
    const got = (await team.api.get(`/servers/${s.uuid}`)).body;
    expect(got.proxy).toEqual({ ...proxy, isolation: { enabled: false, phase: "none" }, reported_at: got.agent.last_seen_at });
    // The periodic report replaces it (the proxy stopped), and the phase is the server's.
    a.socket.emit(EV.facts, { facts: { ...sampleFacts, proxy: { ...proxy, status: "exited", version: null } } });
    await until(async () => (await team.api.get(`/servers/${s.uuid}`)).body.proxy.status === "exited");
    await t.instance.database.prisma.server.update({ where: { uuid: s.uuid }, data: { proxyIsolation: "migrated" } });
    expect((await team.api.get(`/servers/${s.uuid}`)).body.proxy).toMatchObject({ status: "exited", version: null, routes: 3, isolation: { phase: "migrated" } });
    // Kept after the agent leaves: the last report, with its time.
    a.close();
    await until(async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "unreachable");
    expect((await team.api.get(`/servers/${s.uuid}`)).body.proxy).toMatchObject({ status: "exited", reported_at: expect.any(String) });
  });

  it("rejects bad tokens and other protocol versions", async () => {
    await expect(connectAgent(t.url, "capa_" + "0".repeat(48))).rejects.toThrow(/invalid agent token/);
    await expect(connectAgent(t.url, "nope")).rejects.toThrow(/invalid agent token/);
    const s = await newServer(team.api, keyUuid, "web-4");
    await expect(connectAgent(t.url, s.agent_token, { protocolVersion: 999 })).rejects.toThrow(/protocol version/);
  });
});

describe("durable jobs", () => {
  it("redelivers an unfinished job on reconnect with a new attempt; a stale attempt cannot finish it", async () => {
    const s = await newServer(team.api, keyUuid, "dur-1");
    const first = await agent(s.agent_token);
    await first.hello();
    const j1 = await first.nextJob();
    first.close();
    const second = await agent(s.agent_token);
    await second.hello();
    const j2 = await second.nextJob();
    expect(j2.id).toBe(j1.id);
    expect(j2.attempt).toBe(j1.attempt + 1);
    await second.outcome({ id: j1.id, attempt: j1.attempt, ok: false, error: "stale attempt" }, { asGiven: true });
    let row = await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id: j1.id } });
    expect(row).toMatchObject({ status: expect.stringMatching(/^(dispatched|running)$/), attempt: j2.attempt });
    // Still open after the stale outcome, so the ack is recorded (RUNNING_MARK_DELAY_MS after it).
    await until(async () => (await jobStatus(j1.id)) === "running");
    await second.outcome({ id: j2.id, attempt: j2.attempt, ok: true, result: { created: [], existing: ["capstan"] } });
    row = await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id: j1.id } });
    expect(row.status).toBe("succeeded");
    expect(JSON.parse(row.result!)).toEqual({ created: [], existing: ["capstan"] });
    // A late duplicate changes nothing.
    await second.outcome({ id: j2.id, attempt: j2.attempt, ok: false, error: "late" }, { asGiven: true });
    expect((await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id: j1.id } })).status).toBe("succeeded");
  });

  it("jobs wait for the agent's hello, then arrive once: the delivery pump does not race the hello's redelivery", async () => {
    const s = await newServer(team.api, keyUuid, "dur-hello");
    const a = await agent(s.agent_token);
    const server = await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: s.uuid } });
    const id = await t.instance.jobs.enqueue(t.instance.database.prisma, server.id, "containers.list", {}, 60_000);
    // Delivery pump passes (its timer runs them every second too): before the hello nothing may be delivered.
    for (let pass = 0; pass < 3; pass++) await t.instance.jobs.tick();
    expect(a.jobs.filter((j) => j.id === id)).toEqual([]);
    expect(a.jobs).toEqual([]); // the server's own first job waits too
    await a.hello();
    await until(async () => a.jobs.some((j) => j.id === id));
    for (let pass = 0; pass < 3; pass++) await t.instance.jobs.tick();
    expect(a.jobs.filter((j) => j.id === id).map((j) => j.attempt)).toEqual([1]);
  });

  it("fails a job with a reason when its deadline passes", async () => {
    const s = await newServer(team.api, keyUuid, "dur-2");
    const server = await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: s.uuid } });
    const id = await t.instance.jobs.enqueue(t.instance.database.prisma, server.id, "containers.list", {}, 1500);
    const done = await t.instance.jobs.wait(id);
    expect(done).toMatchObject({ status: "failed", error: expect.stringMatching(/deadline exceeded.*not connected/) });
  });

  it("an agent of server A cannot finish the jobs of server B", async () => {
    const a = await newServer(team.api, keyUuid, "iso-a");
    const b = await newServer(team.api, keyUuid, "iso-b");
    const agentB = await agent(b.agent_token);
    await agentB.hello();
    const jobB = await agentB.nextJob();
    const agentA = await agent(a.agent_token);
    await agentA.hello();
    await agentA.outcome({ id: jobB.id, attempt: jobB.attempt, ok: false, error: "forged" }, { asGiven: true });
    expect(await jobStatus(jobB.id)).toMatch(/^(dispatched|running)$/);
    await until(async () => (await jobStatus(jobB.id)) === "running");
    const onlyA = await agentA.nextJob();
    expect(onlyA.id).not.toBe(jobB.id);
  });
});

describe("outcomes answered in the delivery's ack", () => {
  const serverIdOf = async (uuid: string) => (await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid } })).id;

  it("the envelope offers the window; a job answered in its ack ends with that outcome, failures included", async () => {
    const s = await newServer(team.api, keyUuid, "ans-1");
    const a = await agent(s.agent_token, { answerInAck: true });
    let fail = false;
    a.serve("containers.list", () => (fail ? { ok: false, error: "engine said no" } : { ok: true, result: { containers: [] } }));
    await a.hello();
    const id = await serverIdOf(s.uuid);
    const done = await t.instance.jobs.run(id, "containers.list", {});
    expect(done).toMatchObject({ status: "succeeded", result: { containers: [] } });
    expect(a.jobs.find((j) => j.id === done.id)?.answer_within_ms).toBe(ANSWER_WITHIN_MS);
    fail = true;
    const failed = await t.instance.jobs.run(id, "containers.list", {});
    expect(failed).toMatchObject({ status: "failed", error: "engine said no" });
    const rows = await t.instance.database.prisma.job.findMany({ where: { id: { in: [done.id, failed.id] } }, orderBy: { createdAt: "asc" } });
    expect(rows.map((r) => [r.status, r.attempt])).toEqual([["succeeded", 1], ["failed", 1]]);
  });

  it("job times are stored in UTC whatever the process's time zone (the grouped writes' dates)", async () => {
    const s = await newServer(team.api, keyUuid, "ans-tz");
    const a = await agent(s.agent_token, { answerInAck: true });
    a.serve("containers.list", () => ({ ok: true, result: { containers: [] } }));
    await a.hello();
    const zone = process.env.TZ;
    process.env.TZ = "America/New_York";
    try {
      expect(new Date(Date.UTC(2026, 0, 1)).getTimezoneOffset()).toBe(300); // the zone is in force
      const done = await t.instance.jobs.run(await serverIdOf(s.uuid), "containers.list", {});
      const row = await t.instance.database.prisma.job.findUniqueOrThrow({ where: { id: done.id } });
      for (const at of [row.createdAt, row.finishedAt!, row.deadlineAt]) expect(Math.abs(at.getTime() - Date.now())).toBeLessThan(10 * 60_000);
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  it("an answer that is not this delivery's outcome is not stored: the job stays dispatched and is delivered again", async () => {
    const s = await newServer(team.api, keyUuid, "ans-2");
    const a = await agent(s.agent_token, { autoAck: false });
    // It answers attempt 1 of a containers.list with an outcome of another attempt, attempt 2 with its own.
    a.socket.on(EV.job, (envelope: { id: string; type: string; attempt: number }, ack: (r: unknown) => void) => {
      if (envelope.type !== "containers.list") return ack({ accepted: true });
      const attempt = envelope.attempt === 1 ? 7 : envelope.attempt;
      ack({ accepted: true, outcome: { id: envelope.id, attempt, ok: true, result: { containers: [] } } });
    });
    await a.hello();
    const run = t.instance.jobs.run(await serverIdOf(s.uuid), "containers.list", {});
    const listed = () => a.jobs.filter((j) => j.type === "containers.list");
    await until(async () => listed().length === 1);
    expect(listed()[0]).toMatchObject({ attempt: 1 });
    expect(await jobStatus(listed()[0]!.id)).toBe("dispatched");
    // The pump re-sends a dispatched job 10 s after its delivery.
    await until(async () => listed().length === 2, 15_000);
    expect(listed()[1]).toMatchObject({ id: listed()[0]!.id, attempt: 2 });
    expect(await run).toMatchObject({ id: listed()[0]!.id, status: "succeeded", result: { containers: [] } });
  }, 30_000);
});

describe("agent credentials and stand-down", () => {
  it("rotating the token drops the old agent and refuses its token", async () => {
    const s = await newServer(team.api, keyUuid, "rot-1");
    const a = await agent(s.agent_token);
    const dropped = new Promise((r) => a.socket.once("disconnect", r));
    const rot = await team.api.post(`/servers/${s.uuid}/agent-token`);
    expect(rot.status).toBe(200);
    expect(rot.body.data.agent_token).not.toBe(s.agent_token);
    await dropped;
    await expect(connectAgent(t.url, s.agent_token)).rejects.toThrow(/invalid agent token/);
    const b = await agent(rot.body.data.agent_token);
    expect(b.socket.connected).toBe(true);
  });

  it("deleting a server tells its agent to stand down and leaves nothing behind", async () => {
    const s = await newServer(team.api, keyUuid, "del-1");
    const a = await agent(s.agent_token);
    await a.hello();
    const told = new Promise<{ reason: string }>((r) => a.socket.once(EV.standDown, r));
    expect((await team.api.delete(`/servers/${s.uuid}`)).status).toBe(200);
    expect((await told).reason).toMatch(/removed/);
    expect((await team.api.get(`/servers/${s.uuid}`)).status).toBe(404);
    await expect(connectAgent(t.url, s.agent_token)).rejects.toThrow(/invalid agent token/);
  });

  it("a key in use by a server cannot be deleted", async () => {
    const res = await team.api.delete(`/security/keys/${keyUuid}`);
    expect(res.status).toBe(409);
  });
});

describe("fleet stream is scoped to the token's team", () => {
  it("team B hears nothing of team A's servers and a bad token is refused", async () => {
    const other = await t.newTeam();
    const fleetB = await connectFleet(t.url, other.token);
    open.push(fleetB);
    const heard: ServerStatusEvent[] = [];
    fleetB.on(EV.serverStatus, (e: ServerStatusEvent) => heard.push(e));
    const s = await newServer(team.api, keyUuid, "scope-1");
    const a = await agent(s.agent_token);
    await a.hello();
    a.close();
    await until(async () => (await team.api.get(`/servers/${s.uuid}`)).body.status === "unreachable");
    await new Promise((r) => setTimeout(r, 300));
    expect(heard).toEqual([]);
    await expect(connectFleet(t.url, "cap_" + "x".repeat(40))).rejects.toThrow(/Unauthenticated/);
  });
});

describe("fleet-sized id lists", () => {
  it("the job pump works with more connected servers than SQLite binds values", async () => {
    const { JobQueue } = await import("../../control-plane/src/jobs/queue.js");
    const { pino } = await import("pino");
    const db = t.instance.database.prisma;
    const key = await db.privateKey.findFirstOrThrow({ where: { uuid: keyUuid } });
    const rows = Array.from({ length: 1200 }, (_, i) => ({
      uuid: `bulk-${i}-${Date.now()}`,
      teamId: team.teamId,
      name: `bulk-${i}`,
      ip: "10.9.0.1",
      privateKeyId: key.id,
      agentTokenHash: `bulk-${i}-${Math.random()}`,
    }));
    for (let i = 0; i < rows.length; i += 400) await db.server.createMany({ data: rows.slice(i, i + 400) });
    const ids = (await db.server.findMany({ where: { name: { startsWith: "bulk-" } }, select: { id: true } })).map((s) => s.id);
    expect(ids.length).toBe(1200);
    const last = ids[ids.length - 1]!;
    const jobId = await t.instance.jobs.enqueue(db, last, "containers.list", {});
    const delivered: string[] = [];
    const queue = new JobQueue(db, pino({ level: "silent" }), { box: t.instance.box, dialect: t.instance.database.kind });
    const here = new Set(ids);
    queue.attachDispatcher({
      canDeliver: (id) => here.has(id),
      deliverable: () => ids,
      deliver: async (_serverId, envelope) => {
        delivered.push(envelope.id);
        return { accepted: true };
      },
      cancel: () => {},
    });
    await queue.tick();
    expect(delivered).toContain(jobId);
  });
});

// proxy labels (issue 17): the agent's reasons for leaving labels out reach the server detail
describe("proxy warnings in the server detail", () => {
  it("shows the warnings of the agent's last proxy sync, and none when the agent does not send them", async () => {
    const s = await newServer(team.api, keyUuid, "web-proxy-warnings");
    const a = await agent(s.agent_token);
    const proxy = { kind: "caddy" as const, name: "capstan-proxy", image: "capstan/caddy:2.6", version: "v2.6.2", status: "running", routes: 1 };
    await a.hello({ ...sampleFacts, proxy });
    expect((await team.api.get(`/servers/${s.uuid}`)).body.proxy).not.toHaveProperty("warnings");
    const warnings = ["container app-1: label proxy.basic_auth.alice: not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters); a plain password is refused (docs/proxy-labels.md); ignored"];
    a.socket.emit(EV.facts, { facts: { ...sampleFacts, proxy: { ...proxy, warnings } } });
    await until(async () => ((await team.api.get(`/servers/${s.uuid}`)).body.proxy.warnings ?? []).length === 1);
    expect((await team.api.get(`/servers/${s.uuid}`)).body.proxy.warnings).toEqual(warnings);
    a.socket.emit(EV.facts, { facts: { ...sampleFacts, proxy: { ...proxy, warnings: [] } } });
    await until(async () => ((await team.api.get(`/servers/${s.uuid}`)).body.proxy.warnings ?? [1]).length === 0);
  });
});
