import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { pino } from "pino";
import pg from "pg";
import { EV, type ServerStatusEvent } from "@capstan/shared";
import { createInstance, type Instance } from "../../control-plane/src/instance.js";
import { client, startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent, connectFleet } from "./support/fake-agent.js";
import { startReplica } from "./support/replica.js";
import { until } from "./support/applications.js";

/**
 * Two control-plane replicas on one PostgreSQL database (the scale-out setup): an agent on
 * one, a dashboard and the API caller on the other.
 */
const pgUrl = process.env.CAPSTAN_TEST_PG_URL;

describe.skipIf(!pgUrl)("two replicas sharing PostgreSQL", () => {
  let a: TestInstance;
  let b: Instance;
  let bServer: Server;
  let bUrl: string;
  let team: TeamFixture;
  const sockets = new Set<Socket>();
  const keys = new KeyFactory();
  const open: { close(): void }[] = [];

  beforeAll(async () => {
    a = await startTestInstance();
    b = await createInstance(a.config, pino({ level: "silent" }));
    bServer = createServer(b.app);
    bServer.on("connection", (s) => {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    });
    await b.attach(bServer);
    await new Promise<void>((r) => bServer.listen(0, "127.0.0.1", r));
    const addr = bServer.address();
    bUrl = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
    team = await a.newTeam();
  });
  afterAll(async () => {
    for (const s of open) s.close();
    for (const s of sockets) s.destroy();
    await new Promise((r) => bServer?.close(r));
    await b?.close();
    await a?.close();
    keys.cleanup();
  });

  it("a dashboard on replica B hears an agent connecting to replica A; a job created on B runs through A", async () => {
    const key = await keys.generate("ed25519");
    const apiB = client(bUrl + "/api/v1", team.token);
    const keyUuid = (await apiB.post("/security/keys", { name: "k", private_key: key.privateKey })).body.uuid;
    const s = (await apiB.post("/servers", { name: "r1", ip: "10.1.1.1", private_key_uuid: keyUuid })).body;

    const fleet = await connectFleet(bUrl, team.token);
    open.push(fleet);
    const heard = new Promise<ServerStatusEvent>((resolve) =>
      fleet.on(EV.serverStatus, (e: ServerStatusEvent) => e.uuid === s.uuid && e.status === "reachable" && resolve(e)),
    );
    const agent = await connectAgent(a.url, s.agent_token);
    open.push(agent);
    await agent.hello();
    expect((await heard).status).toBe("reachable");

    // prepare job, then a validate requested through replica B
    const prepare = await agent.nextJob();
    await agent.outcome({ id: prepare.id, attempt: prepare.attempt, ok: true, result: { created: ["capstan"], existing: [] } });
    const validating = apiB.get(`/servers/${s.uuid}/validate`);
    const job = await agent.nextJob(10_000);
    expect(job.type).toBe("server.validate");
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { docker_version: "20.10.24", api_version: "1.41", compose_version: "1.29.2" } });
    const v = await validating;
    // B does not hold the agent's socket: the job row it wrote is delivered by A's pump.
    expect(v.status).toBe(200);
    const row = await b.database.prisma.job.findUniqueOrThrow({ where: { id: job.id } });
    expect(row.status).toBe("succeeded");
  });

  it("a replica shutting down drops only its own agents and dashboards; those of the other replicas stay connected", async () => {
    const key = await keys.generate("ed25519");
    const apiB = client(bUrl + "/api/v1", team.token);
    const keyUuid = (await apiB.post("/security/keys", { name: "k2", private_key: key.privateKey })).body.uuid;
    const onC = (await apiB.post("/servers", { name: "on-c", ip: "10.1.1.2", private_key_uuid: keyUuid })).body;
    const onB = (await apiB.post("/servers", { name: "on-b", ip: "10.1.1.3", private_key_uuid: keyUuid })).body;

    const c = await startReplica(a);
    const agentC = await connectAgent(c.url, onC.agent_token);
    open.push(agentC);
    const agentB = await connectAgent(bUrl, onB.agent_token);
    open.push(agentB);
    for (const agent of [agentC, agentB]) {
      agent.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: ["capstan"] } }));
      await agent.hello();
    }
    const fleetB = await connectFleet(bUrl, team.token);
    open.push(fleetB);
    const dropped: string[] = [];
    agentB.socket.on("disconnect", (reason) => dropped.push(`agent: ${reason}`));
    fleetB.on("disconnect", (reason) => dropped.push(`fleet: ${reason}`));

    // Replica C shuts down as the server does: its connections first, then the instance.
    const cDropped = new Promise<string>((resolve) => agentC.socket.once("disconnect", resolve));
    c.instance.gateway!.disconnectAll();
    expect(await cDropped).toBe("io server disconnect");
    await c.close();
    // A disconnect broadcast through the cluster adapter would have reached B well within this.
    await new Promise((r) => setTimeout(r, 1500));
    expect(dropped).toEqual([]);
    expect(agentB.socket.connected).toBe(true);
    expect(fleetB.connected).toBe(true);

    // B still delivers jobs to its agent.
    const validating = apiB.get(`/servers/${onB.uuid}/validate`);
    const job = await agentB.nextJob(10_000);
    expect(job.type).toBe("server.validate");
    await agentB.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { docker_version: "20.10.24", api_version: "1.41", compose_version: "1.29.2" } });
    expect((await validating).status).toBe(200);
  });

  it("connections the database ends (an administrator, a restart) do not end a replica: both answer again, with their pools' clients replaced", async () => {
    const url = a.config.database.kind === "postgresql" ? a.config.database.url : "";
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    try {
      const ended = await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()");
      expect(ended.rowCount).toBeGreaterThan(0);
    } finally {
      await admin.end();
    }
    // An "error" event without a listener would have ended this process (vitest reports it).
    const apiB = client(bUrl + "/api/v1", team.token);
    await until(async () => (await apiB.get("/projects")).status === 200 && (await team.api.get("/projects")).status === 200);
  });
});
