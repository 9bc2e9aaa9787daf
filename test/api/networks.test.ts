/**
 * Networks API (spec 4.8) against a real control plane and database, with scripted agents:
 * shared networks, detail with inspection, delete, sync, resource attach/detach, the limit,
 * scopes and permissions. Deploy payloads per mode and proxy migration: networks-deploy.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EngineNetwork, type JobEnvelope, NetworkList, NetworkSpec } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { DeployWorld, until, type ServerFixture } from "./support/deployments.js";
import { sampleFacts, type ScriptedAgent } from "./support/fake-agent.js";

let t: TestInstance;
let team: TeamFixture;
let world: DeployWorld;
const db = () => t.instance.database.prisma;

beforeAll(async () => {
  t = await startTestInstance({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_MAX_NETWORKS: "3", PLATFORM_OVERLAY_ENCRYPTION: "true" });
  team = await t.newTeam();
  world = await new DeployWorld(t, team).init();
});
afterAll(async () => {
  world?.close();
  await t?.close();
});

/** What the engine reports for a network the agent created from a spec. */
function engineNetwork(name: string, over: Partial<EngineNetwork> = {}): EngineNetwork {
  return {
    id: `id-${name}`,
    name,
    driver: "bridge",
    scope: "local",
    internal: false,
    encrypted: false,
    labels: { "capstan.managed": "true" },
    subnet: "172.30.0.0/16",
    gateway: "172.30.0.1",
    containers: [],
    ...over,
  };
}

/** Answers network.ensure jobs as the agent would (records them). */
function ensureServed(agent: ScriptedAgent, answer: (job: JobEnvelope) => { ok: true } | { ok: false; error: string } = () => ({ ok: true })) {
  const jobs: JobEnvelope[] = [];
  agent.serve("network.ensure", (job) => {
    jobs.push(job);
    const a = answer(job);
    if (!a.ok) return a;
    const specs = (job.payload as { networks: NetworkSpec[] }).networks;
    return { ok: true, result: { networks: specs.map((s) => engineNetwork(s.name, { driver: s.driver, encrypted: s.encrypted, labels: { ...s.labels, "capstan.managed": "true" } })) } };
  });
  return jobs;
}

async function serverWithAgent(name: string, facts = sampleFacts): Promise<{ server: ServerFixture; agent: ScriptedAgent }> {
  const server = await world.server(name);
  const agent = await world.agent(server);
  if (facts !== sampleFacts) await agent.hello(facts);
  return { server, agent };
}

const rowsOf = (serverId: number) => db().network.findMany({ where: { serverId }, orderBy: { id: "asc" } });

describe("shared networks: create", () => {
  let server: ServerFixture;
  let agent: ScriptedAgent;
  let ensures: JobEnvelope[];
  beforeAll(async () => {
    ({ server, agent } = await serverWithAgent("create"));
    ensures = ensureServed(agent, (job) =>
      (job.payload as { networks: NetworkSpec[] }).networks[0]!.name === "doomed" ? { ok: false, error: "engine: pool overlaps with other one on this address space" } : { ok: true },
    );
  });

  it("201 with the spec's fields; the agent creates it and the record becomes active with the engine's id", async () => {
    const r = await team.api.post(`/networks/${server.uuid}`, { name: "backend-shared" });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toEqual({
      message: expect.stringContaining("backend-shared"),
      data: { uuid: expect.any(String), container_network_name: "backend-shared", scope: "shared", driver: "bridge", status: "pending" },
    });
    await until(async () => ensures.length === 1);
    // Standalone engine: a bridge, never encrypted (encryption is for overlays only).
    expect(NetworkSpec.parse((ensures[0]!.payload as { networks: unknown[] }).networks[0])).toEqual({
      name: "backend-shared",
      driver: "bridge",
      encrypted: false,
      attachable: true,
      labels: { "capstan.network.scope": "shared" },
    });
    await until(async () => (await team.api.get(`/networks/${server.uuid}`)).body.data[0]?.status === "active");
    const list = await team.api.get(`/networks/${server.uuid}`);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([
      {
        uuid: r.body.data.uuid,
        container_network_name: "backend-shared",
        scope: "shared",
        driver: "bridge",
        status: "active",
        deleting: false,
        server_id: server.id,
        environment_id: null,
        container_engine_id: "id-backend-shared",
        is_proxy_network: false,
        resource_count: 0,
        encrypted: false,
        reason: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      },
    ]);
  });

  it("a failed creation leaves the record failed with the agent's reason; the name can be used again", async () => {
    const r = await team.api.post(`/networks/${server.uuid}`, { name: "doomed" });
    expect(r.status).toBe(201);
    await until(async () => (await db().network.findUnique({ where: { uuid: r.body.data.uuid } }))?.status === "failed");
    const row = await db().network.findUniqueOrThrow({ where: { uuid: r.body.data.uuid } });
    expect(row.reason).toContain("pool overlaps");
    // The failed record gives way to a new request of the same name.
    const again = await team.api.post(`/networks/${server.uuid}`, { name: "doomed" });
    expect(again.status).toBe(201);
    expect(again.body.data.uuid).not.toBe(r.body.data.uuid);
    expect(await db().network.count({ where: { serverId: server.id, name: "doomed" } })).toBe(1);
    // Its creation fails too: wait for it, so later tests of this server see settled records.
    await until(async () => (await db().network.findUnique({ where: { uuid: again.body.data.uuid } }))?.status === "failed");
  });

  it("409 for a name the server already has", async () => {
    const r = await team.api.post(`/networks/${server.uuid}`, { name: "backend-shared" });
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/already has a network named backend-shared/);
  });

  it("422 for bad names and drivers; nothing is created", async () => {
    const before = await rowsOf(server.id);
    const jobsBefore = await db().job.count({ where: { serverId: server.id } });
    const bad: [unknown, string][] = [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: "two words" }, "name"],
      [{ name: "-dash-first" }, "name"],
      [{ name: "../../etc" }, "name"],
      [{ name: "x".repeat(65) }, "name"],
      [{ name: "capstan-env-mine" }, "name"],
      [{ name: "capstan" }, "name"],
      [{ name: "bridge" }, "name"],
      [{ name: "HOST" }, "name"],
      [{ name: "n;rm -rf /" }, "name"],
      [{ name: 42 }, "name"],
      [{ name: "fine", driver: "macvlan" }, "driver"],
      [{ name: "fine", driver: "overlay" }, "driver"], // standalone engine (swarm_role inactive below)
    ];
    await agent.hello({ ...sampleFacts, engine: { ...sampleFacts.engine, swarm_role: "inactive" } });
    for (const [body, field] of bad) {
      const r = await team.api.post(`/networks/${server.uuid}`, body);
      expect(r.status, JSON.stringify(body)).toBe(422);
      expect(r.body.errors?.[field], `${JSON.stringify(body)} -> ${JSON.stringify(r.body)}`).toBeDefined();
    }
    expect(await rowsOf(server.id)).toEqual(before);
    expect(await db().job.count({ where: { serverId: server.id } })).toBe(jobsBefore);
  });

  it("the driver is detected from the server's facts: overlay (encrypted here) on a swarm manager", async () => {
    const { server: manager, agent: managerAgent } = await serverWithAgent("manager", { ...sampleFacts, engine: { ...sampleFacts.engine, swarm: "active", swarm_role: "manager" } });
    const jobs = ensureServed(managerAgent);
    const r = await team.api.post(`/networks/${manager.uuid}`, { name: "mesh" });
    expect(r.status).toBe(201);
    expect(r.body.data.driver).toBe("overlay");
    await until(async () => jobs.length === 1);
    expect((jobs[0]!.payload as { networks: NetworkSpec[] }).networks[0]).toMatchObject({ name: "mesh", driver: "overlay", encrypted: true, attachable: true });
    // An explicit bridge on a manager is the user's choice.
    const bridge = await team.api.post(`/networks/${manager.uuid}`, { name: "local-only", driver: "bridge" });
    expect(bridge.body.data.driver).toBe("bridge");
  });

  it("at PLATFORM_MAX_NETWORKS (3 here) the next create is refused with 422 and nothing is created", async () => {
    const { server: full, agent: fullAgent } = await serverWithAgent("full");
    ensureServed(fullAgent);
    for (const name of ["one", "two", "three"]) expect((await team.api.post(`/networks/${full.uuid}`, { name })).status).toBe(201);
    await until(async () => (await rowsOf(full.id)).every((n) => n.status === "active"));
    const before = await rowsOf(full.id);
    const jobsBefore = await db().job.count({ where: { serverId: full.id } });
    const r = await team.api.post(`/networks/${full.uuid}`, { name: "four" });
    expect(r.status).toBe(422);
    expect(r.body.message).toMatch(/reached its limit of 3 networks \(PLATFORM_MAX_NETWORKS\)/);
    expect(await rowsOf(full.id)).toEqual(before);
    expect(await db().job.count({ where: { serverId: full.id } })).toBe(jobsBefore);
    // A deleted network no longer counts.
    const three = before.find((n) => n.name === "three")!;
    fullAgent.serve("network.remove", () => ({ ok: true, result: { removed: true, disconnected: [] } }));
    expect((await team.api.delete(`/networks/${full.uuid}/${three.uuid}`)).status).toBe(200);
    expect((await team.api.post(`/networks/${full.uuid}`, { name: "four" })).status).toBe(201);
  });

  it("pages like the other lists", async () => {
    const page = await team.api.get(`/networks/${server.uuid}`, { page: 1, per_page: 1 });
    expect(page.status).toBe(200);
    expect(page.body.data).toHaveLength(1);
    expect(page.body.meta).toEqual({ current_page: 1, per_page: 1, total: 2, last_page: 2 });
    expect(page.body.proxy_isolation).toEqual({ enabled: false, phase: "none" });
  });
});

describe("GET /networks/{serverUuid}: proxy_isolation", () => {
  it("says whether proxy isolation is in effect (the instance's setting, off here) and the server's recorded phase, in the documented shape", async () => {
    const { server } = await serverWithAgent("phase-shown");
    const r = await team.api.get(`/networks/${server.uuid}`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ data: [], proxy_isolation: { enabled: false, phase: "none" } });
    expect(NetworkList.parse(r.body)).toEqual(r.body);
    await db().server.update({ where: { id: server.id }, data: { proxyIsolation: "migrated" } });
    expect((await team.api.get(`/networks/${server.uuid}`)).body.proxy_isolation).toEqual({ enabled: false, phase: "migrated" });
    // Paged lists carry it too.
    expect((await team.api.get(`/networks/${server.uuid}`, { page: 1, per_page: 5 })).body).toMatchObject({ data: [], meta: { total: 0 }, proxy_isolation: { phase: "migrated" } });
    // The OpenAPI document (generated from the route table) describes it with the shared schema.
    const doc = (await (await fetch(`${t.url}/api/v1/openapi.json`)).json()) as any;
    const listed = doc.paths["/networks/{serverUuid}"].get.responses["200"].content["application/json"].schema;
    expect(listed.required).toEqual(expect.arrayContaining(["data", "proxy_isolation"]));
    expect(listed.properties.proxy_isolation).toEqual({ $ref: "#/components/schemas/ProxyIsolationState" });
    expect(doc.components.schemas.ProxyIsolationState).toMatchObject({
      required: ["enabled", "phase"],
      properties: { enabled: { type: "boolean" }, phase: { enum: ["none", "migrated", "cleaned"] } },
    });
    // Another team's server is not found, and its phase is not shown.
    const other = await t.newTeam();
    const foreign = await other.api.get(`/networks/${server.uuid}`);
    expect(foreign.status).toBe(404);
    expect(foreign.body).toEqual({ message: "Server not found." });
  });
});

describe("resource_count without proxy isolation", () => {
  it("an environment network counts its environment's applications and databases on the server; a proxy network left from before counts none", async () => {
    const { server } = await serverWithAgent("counts-plain");
    const env = await db().environment.findFirstOrThrow({ where: { project: { uuid: world.projectUuid }, name: "production" } });
    await world.imageApp(server, "count-public", { fqdn: "https://count.example.test" });
    await world.imageApp(server, "count-internal");
    const make = (name: string, scope: string, extra: object = {}) =>
      db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name, scope, driver: "bridge", status: "active", ...extra } });
    await make(`capstan-env-${env.uuid}`, "environment", { environmentId: env.id });
    await make("capstan-proxy-net", "proxy", { isProxyNetwork: true });
    const counts = Object.fromEntries((await team.api.get(`/networks/${server.uuid}`)).body.data.map((n: any) => [n.scope, n.resource_count]));
    expect(counts).toEqual({ environment: 2, proxy: 0 });
  });
});

describe("detail with inspection data", () => {
  let server: ServerFixture;
  let agent: ScriptedAgent;
  let uuid: string;
  const engine: EngineNetwork[] = [];
  beforeAll(async () => {
    ({ server, agent } = await serverWithAgent("detail"));
    ensureServed(agent);
    agent.serve("networks.list", (job) => {
      const names = (job.payload as { names?: string[] }).names;
      return { ok: true, result: { networks: engine.filter((n) => !names || names.includes(n.name)) } };
    });
    uuid = (await team.api.post(`/networks/${server.uuid}`, { name: "inspected" })).body.data.uuid;
  });

  it("subnet, gateway and connected containers (name, IPv4 without prefix) as the engine reports them now", async () => {
    engine.push(
      engineNetwork("inspected", {
        containers: [
          { id: "c2", name: "web-2", ipv4: "172.30.0.3/16" },
          { id: "c1", name: "api-1", ipv4: "172.30.0.2/16" },
          { id: "c3", name: "no-ip", ipv4: null },
        ],
      }),
    );
    const r = await team.api.get(`/networks/${server.uuid}/${uuid}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ uuid, container_network_name: "inspected", scope: "shared" });
    expect(r.body.inspection).toEqual({
      subnet: "172.30.0.0/16",
      gateway: "172.30.0.1",
      engine_scope: "local",
      internal: false,
      encrypted: false,
      labels: { "capstan.managed": "true" },
      containers: [
        { name: "api-1", ipv4: "172.30.0.2" },
        { name: "no-ip", ipv4: null },
        { name: "web-2", ipv4: "172.30.0.3" },
      ],
    });
    // The inspection asked for this network only.
    const list = agent.jobs.filter((j) => j.type === "networks.list").at(-1)!;
    expect(list.payload).toEqual({ names: ["inspected"] });
  });

  it("inspection is null when the network is not on the server", async () => {
    engine.splice(0);
    const r = await team.api.get(`/networks/${server.uuid}/${uuid}`);
    expect(r.status).toBe(200);
    expect(r.body.inspection).toBeNull();
    expect(r.body.inspection_reason).toBe("The network is not on the server.");
  });

  it("the stored record with inspection null and the reason when the server's agent is not connected (not a 503); 404 for an unknown network", async () => {
    const away = await world.server("away");
    const row = await db().network.create({
      data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: away.id, name: "x", scope: "shared", driver: "bridge", status: "active", containerEngineId: "id-x" },
    });
    const r = await team.api.get(`/networks/${away.uuid}/${row.uuid}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toMatchObject({ uuid: row.uuid, container_network_name: "x", status: "active", container_engine_id: "id-x", deleting: false, inspection: null });
    expect(r.body.inspection_reason).toMatch(/agent is not connected/);
    expect((await team.api.get(`/networks/${server.uuid}/${row.uuid}`)).status).toBe(404);
    expect((await team.api.get(`/networks/${server.uuid}/no-such-network`)).status).toBe(404);
  });
});

describe("delete", () => {
  let server: ServerFixture;
  let agent: ScriptedAgent;
  const removals: JobEnvelope[] = [];
  beforeAll(async () => {
    ({ server, agent } = await serverWithAgent("delete"));
    ensureServed(agent);
    agent.serve("network.remove", (job) => {
      removals.push(job);
      return (job.payload as { name: string }).name === "stuck"
        ? { ok: false, error: "network stuck has active endpoints" }
        : { ok: true, result: { removed: true, disconnected: ["app-1"] } };
    });
  });

  it("detaches every resource, marks it deleted and has the agent disconnect its containers and remove it", async () => {
    const net = (await team.api.post(`/networks/${server.uuid}`, { name: "doomed-shared" })).body.data;
    const app = await world.imageApp(server, "attached-app");
    expect((await team.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: net.uuid })).status).toBe(200);
    expect((await team.api.get(`/networks/${server.uuid}`)).body.data.find((n: any) => n.uuid === net.uuid).resource_count).toBe(1);

    const r = await team.api.delete(`/networks/${server.uuid}/${net.uuid}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.message).toMatch(/doomed-shared is being deleted: 1 resource\(s\) detached/);
    await until(async () => removals.some((j) => (j.payload as { name: string }).name === "doomed-shared"));
    // Deleted once the agent confirmed it.
    await until(async () => (await team.api.get(`/networks/${server.uuid}/${net.uuid}`)).body.status === "deleted");
    const row = await db().network.findUniqueOrThrow({ where: { uuid: net.uuid } });
    expect(row.status).toBe("deleted");
    expect((await team.api.get(`/networks/${server.uuid}/${net.uuid}`)).body).toMatchObject({ status: "deleted", deleting: false, inspection: null });
    expect(await db().networkAttachment.count({ where: { networkId: row.id } })).toBe(0);
    expect((await team.api.get(`/networks/resource/application/${app}`)).body.data.map((n: any) => n.role)).toEqual(["primary"]);

    const again = await team.api.delete(`/networks/${server.uuid}/${net.uuid}`);
    expect(again.status).toBe(409);
    expect(again.body.message).toMatch(/already deleted/);
  });

  it("while the agent is away a deleted network stays pending (deleting) until the agent confirms the removal, then deleted", async () => {
    const away = await world.server("delete-away");
    const row = await db().network.create({
      data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: away.id, name: "later-gone", scope: "shared", driver: "bridge", status: "active", containerEngineId: "id-lg" },
    });
    const r = await team.api.delete(`/networks/${away.uuid}/${row.uuid}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const shown = async () => (await team.api.get(`/networks/${away.uuid}`)).body.data.find((n: any) => n.uuid === row.uuid);
    expect(await shown()).toMatchObject({ status: "pending", deleting: true });
    const detail = await team.api.get(`/networks/${away.uuid}/${row.uuid}`);
    expect(detail.body).toMatchObject({ status: "pending", deleting: true, inspection: null });
    expect(detail.body.inspection_reason).toMatch(/not confirmed/);
    // A second DELETE says it is under way.
    const again = await team.api.delete(`/networks/${away.uuid}/${row.uuid}`);
    expect(again.status).toBe(409);
    expect(again.body.message).toMatch(/already being deleted/);
    // Still pending a while later: nothing but the agent's answer makes it deleted.
    await new Promise((res) => setTimeout(res, 1500));
    expect(await shown()).toMatchObject({ status: "pending", deleting: true });

    const agentBack = await world.agent(away);
    const seen: JobEnvelope[] = [];
    agentBack.serve("network.remove", (job) => (seen.push(job), { ok: true, result: { removed: true, disconnected: [] } }));
    await until(async () => (await shown()).status === "deleted");
    expect(seen.map((j) => j.payload)).toEqual([{ name: "later-gone" }]);
    expect(await shown()).toMatchObject({ status: "deleted", deleting: false, reason: null });
  });

  it("a removal the agent could not do leaves the record failed with the reason", async () => {
    const net = (await team.api.post(`/networks/${server.uuid}`, { name: "stuck" })).body.data;
    expect((await team.api.delete(`/networks/${server.uuid}/${net.uuid}`)).status).toBe(200);
    await until(async () => (await db().network.findUniqueOrThrow({ where: { uuid: net.uuid } })).status === "failed");
    expect((await db().network.findUniqueOrThrow({ where: { uuid: net.uuid } })).reason).toBe("removal failed: network stuck has active endpoints");
    // The network is still on the server: the record's page shows the engine's view, with the container still attached.
    const onEngine = engineNetwork("stuck", { containers: [{ id: "c-left-behind", name: "left-behind", ipv4: "172.30.0.5/16" }] });
    agent.serve("networks.list", (job) => ({ ok: true, result: { networks: (job.payload as { names: string[] }).names.includes("stuck") ? [onEngine] : [] } }));
    const shown = await team.api.get(`/networks/${server.uuid}/${net.uuid}`);
    expect(shown.body).toMatchObject({ status: "failed", deleting: false, reason: "removal failed: network stuck has active endpoints", inspection_reason: null });
    expect(shown.body.inspection.containers).toEqual([{ name: "left-behind", ipv4: "172.30.0.5" }]);
  });

  it("environment, proxy and system networks are not deleted through the API (409)", async () => {
    const env = await db().environment.findFirstOrThrow({ where: { project: { uuid: world.projectUuid } } });
    const make = (name: string, scope: string, extra: object = {}) =>
      db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name, scope, driver: "bridge", status: "active", ...extra } });
    const cases = [
      [await make(`capstan-env-${env.uuid}`, "environment", { environmentId: env.id }), /removed when the environment is deleted/],
      [await make("capstan-proxy-net", "proxy", { isProxyNetwork: true }), /dedicated proxy network/],
      [await make("bridge", "system"), /not created by the platform/],
    ] as const;
    for (const [row, why] of cases) {
      const r = await team.api.delete(`/networks/${server.uuid}/${row.uuid}`);
      expect(r.status).toBe(409);
      expect(r.body.message).toMatch(why);
      expect((await db().network.findUniqueOrThrow({ where: { id: row.id } })).status).toBe("active");
    }
  });
});

describe("sync", () => {
  it("records networks found behind the platform's back, verifies recorded ones, marks missing ones deleted or failed", async () => {
    const { server, agent } = await serverWithAgent("sync");
    const env = await db().environment.findFirstOrThrow({ where: { project: { uuid: world.projectUuid }, name: "production" } });
    const make = (name: string, status: string) =>
      db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name, scope: "shared", driver: "bridge", status } });
    const kept = await make("kept", "pending");
    const gone = await make("gone", "active");
    const neverMade = await make("never-made", "pending");
    const engine = [
      engineNetwork("kept", { id: "engine-kept", labels: { "capstan.managed": "true", "capstan.network.scope": "shared" } }),
      engineNetwork("bridge", { id: "engine-bridge", labels: {} }),
      engineNetwork("capstan", { id: "engine-capstan" }),
      engineNetwork("hand-made", { id: "engine-hand", labels: { owner: "ops" } }),
      engineNetwork("old-shared", { id: "engine-old", labels: { "capstan.managed": "true", "capstan.network.scope": "shared" } }),
      engineNetwork(`capstan-env-${env.uuid}`, { id: "engine-env", labels: { "capstan.managed": "true", "capstan.network.scope": "environment" } }),
      engineNetwork("mesh", { id: "engine-mesh", driver: "overlay", scope: "swarm", encrypted: true, labels: {} }),
    ];
    agent.serve("networks.list", () => ({ ok: true, result: { networks: engine } }));
    const r = await team.api.post(`/networks/${server.uuid}/sync`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({
      message: "Networks synced: 6 discovered, 1 verified, 1 marked deleted, 1 marked failed.",
      data: { total: 7, discovered: 6, verified: 1, deleted: 1, failed: 1 },
    });
    const rows = new Map((await rowsOf(server.id)).map((n) => [n.name, n]));
    expect(rows.get("kept")).toMatchObject({ id: kept.id, status: "active", containerEngineId: "engine-kept", scope: "shared" });
    expect(rows.get("gone")).toMatchObject({ id: gone.id, status: "deleted", reason: "not found on the server by sync" });
    expect(rows.get("never-made")).toMatchObject({ id: neverMade.id, status: "failed" });
    expect(rows.get("bridge")).toMatchObject({ scope: "system", status: "active", containerEngineId: "engine-bridge" });
    // The destination network is the platform's, but not a shared one.
    expect(rows.get("capstan")).toMatchObject({ scope: "system" });
    expect(rows.get("hand-made")).toMatchObject({ scope: "system", driver: "bridge" });
    expect(rows.get("old-shared")).toMatchObject({ scope: "shared" });
    expect(rows.get(`capstan-env-${env.uuid}`)).toMatchObject({ scope: "environment", environmentId: env.id });
    expect(rows.get("mesh")).toMatchObject({ scope: "system", driver: "overlay", encrypted: true });

    // Again: nothing new; a network removed meanwhile is marked deleted.
    engine.splice(engine.findIndex((n) => n.name === "hand-made"), 1);
    const second = await team.api.post(`/networks/${server.uuid}/sync`);
    expect(second.body.data).toEqual({ total: 6, discovered: 0, verified: 6, deleted: 1, failed: 0 });
    expect((await db().network.findFirstOrThrow({ where: { serverId: server.id, name: "hand-made" } })).status).toBe("deleted");
    // ...and one that comes back is active again.
    engine.push(engineNetwork("hand-made", { id: "engine-hand-2", labels: {} }));
    expect((await team.api.post(`/networks/${server.uuid}/sync`)).body.data).toMatchObject({ discovered: 0, verified: 7 });
    expect(await db().network.findFirstOrThrow({ where: { serverId: server.id, name: "hand-made" } })).toMatchObject({ status: "active", containerEngineId: "engine-hand-2" });
  });

  it("a record whose name a network not made by the platform holds becomes failed with the reason, never active; it cannot be attached", async () => {
    const { server, agent } = await serverWithAgent("sync-foreign");
    const env = await db().environment.findFirstOrThrow({ where: { project: { uuid: world.projectUuid }, name: "production" } });
    const make = (name: string, scope: string, status: string, extra: object = {}) =>
      db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name, scope, driver: "bridge", status, ...extra } });
    const handShared = await make("bus-by-hand", "shared", "active", { containerEngineId: "engine-old-bus" });
    const envNet = await make(`capstan-env-${env.uuid}`, "environment", "pending", { environmentId: env.id });
    const proxyNet = await make("capstan-proxy-net", "proxy", "pending", { isProxyNetwork: true });
    const otherScope = await make("scoped-elsewhere", "shared", "failed", { reason: "creation failed" });
    const deleted = await make("long-gone", "shared", "deleted");
    const system = await make("ops-net", "system", "active");
    const engine = [
      engineNetwork("bus-by-hand", { id: "engine-hand-bus", labels: {} }),
      engineNetwork(`capstan-env-${env.uuid}`, { id: "engine-hand-env", labels: { owner: "ops" } }),
      engineNetwork("capstan-proxy-net", { id: "engine-hand-proxy", labels: { "capstan.managed": "true" } }),
      engineNetwork("scoped-elsewhere", { id: "engine-env-scoped", labels: { "capstan.managed": "true", "capstan.network.scope": "environment" } }),
      engineNetwork("long-gone", { id: "engine-hand-gone", labels: {} }),
      engineNetwork("ops-net", { id: "engine-ops", labels: {} }),
    ];
    agent.serve("networks.list", () => ({ ok: true, result: { networks: engine } }));
    const r = await team.api.post(`/networks/${server.uuid}/sync`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    // Only the system record is verified; three records become failed (the fourth was failed already and gets the reason).
    expect(r.body.data).toEqual({ total: 6, discovered: 0, verified: 1, deleted: 0, failed: 3 });
    const row = (id: number) => db().network.findUniqueOrThrow({ where: { id } });
    expect(await row(handShared.id)).toMatchObject({
      status: "failed",
      containerEngineId: null,
      reason: "a network named bus-by-hand exists on the server that the platform did not create (no capstan.managed=true label); remove or rename it",
    });
    expect(await row(envNet.id)).toMatchObject({ status: "failed", containerEngineId: null, reason: expect.stringMatching(/^a network named capstan-env-.* that the platform did not create/) });
    expect(await row(proxyNet.id)).toMatchObject({ status: "failed", reason: expect.stringMatching(/did not create as its proxy network \(capstan.network.scope is not set\); remove or rename it/) });
    expect(await row(otherScope.id)).toMatchObject({ status: "failed", reason: expect.stringMatching(/did not create as its shared network \(capstan.network.scope is environment\)/) });
    // Deleted stays deleted: the platform's network of that name is gone.
    expect(await row(deleted.id)).toMatchObject({ status: "deleted", reason: null });
    // System records describe what was found: unaffected.
    expect(await row(system.id)).toMatchObject({ status: "active", containerEngineId: "engine-ops" });

    const app = await world.imageApp(server, "foreign-user");
    const attach = await team.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: handShared.uuid });
    expect(attach.status).toBe(422);
    expect(attach.body.errors.network_uuid).toEqual(["Network bus-by-hand is failed; create it again first."]);

    // Again: nothing changes, nothing is counted twice.
    const before = await rowsOf(server.id);
    expect((await team.api.post(`/networks/${server.uuid}/sync`)).body.data).toEqual({ total: 6, discovered: 0, verified: 1, deleted: 0, failed: 0 });
    expect(await rowsOf(server.id)).toEqual(before);

    // The hand-made network replaced by the platform's own: active again.
    engine[0] = engineNetwork("bus-by-hand", { id: "engine-new-bus", labels: { "capstan.managed": "true", "capstan.network.scope": "shared" } });
    expect((await team.api.post(`/networks/${server.uuid}/sync`)).body.data).toMatchObject({ verified: 2, failed: 0 });
    expect(await row(handShared.id)).toMatchObject({ status: "active", containerEngineId: "engine-new-bus", reason: null });
  });

  it("a capstan-proxy-net without the proxy scope label is not recorded as the proxy network", async () => {
    const { server, agent } = await serverWithAgent("sync-proxy-unlabelled");
    agent.serve("networks.list", () => ({ ok: true, result: { networks: [engineNetwork("capstan-proxy-net", { labels: { "capstan.managed": "true" } })] } }));
    expect((await team.api.post(`/networks/${server.uuid}/sync`)).body.data.discovered).toBe(1);
    expect(await db().network.findFirstOrThrow({ where: { serverId: server.id, name: "capstan-proxy-net" } })).toMatchObject({ scope: "system", isProxyNetwork: false, status: "active" });
    const labelled = await serverWithAgent("sync-proxy-labelled");
    labelled.agent.serve("networks.list", () => ({
      ok: true,
      result: { networks: [engineNetwork("capstan-proxy-net", { labels: { "capstan.managed": "true", "capstan.network.scope": "proxy" } })] },
    }));
    expect((await team.api.post(`/networks/${labelled.server.uuid}/sync`)).status).toBe(200);
    expect(await db().network.findFirstOrThrow({ where: { serverId: labelled.server.id, name: "capstan-proxy-net" } })).toMatchObject({ scope: "proxy", isProxyNetwork: true });
  });

  it("503 when the agent is away or fails, and nothing changes", async () => {
    const away = await world.server("sync-away");
    const r = await team.api.post(`/networks/${away.uuid}/sync`);
    expect(r.status).toBe(503);
    const { server, agent } = await serverWithAgent("sync-broken");
    agent.serve("networks.list", () => ({ ok: false, error: "engine: permission denied" }));
    const broken = await team.api.post(`/networks/${server.uuid}/sync`);
    expect(broken.status).toBe(503);
    expect(broken.body.message).toMatch(/permission denied/);
    expect(await rowsOf(server.id)).toEqual([]);
  });
});

describe("networks of a resource: list, attach, detach", () => {
  let server: ServerFixture;
  let other: ServerFixture;
  let app: string;
  let shared: string;
  beforeAll(async () => {
    let agent: ScriptedAgent;
    ({ server, agent } = await serverWithAgent("res"));
    ensureServed(agent);
    let otherAgent: ScriptedAgent;
    ({ server: other, agent: otherAgent } = await serverWithAgent("res-other"));
    ensureServed(otherAgent);
    app = await world.imageApp(server, "res-app", { fqdn: "https://res.example.test" });
    shared = (await team.api.post(`/networks/${server.uuid}`, { name: "res-shared" })).body.data.uuid;
  });

  it("lists the primary network (the environment's here) before anything is attached", async () => {
    const env = await db().environment.findFirstOrThrow({ where: { project: { uuid: world.projectUuid }, name: "production" } });
    const r = await team.api.get(`/networks/resource/application/${app}`);
    expect(r.status).toBe(200);
    expect(r.body.data).toEqual([
      // Not recorded until its first deployment asks for it.
      { uuid: null, container_network_name: `capstan-env-${env.uuid}`, role: "primary", scope: null, status: null, attached_at: null },
    ]);
    // Listing writes nothing.
    expect(await db().network.count({ where: { serverId: server.id, name: `capstan-env-${env.uuid}` } })).toBe(0);
  });

  it("attach: 200, effective on the next deployment; listed with its time; 409 the second time", async () => {
    const r = await team.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: shared });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ message: "Network res-shared attached to application res-app; it takes effect on the application's next deployment." });
    const list = await team.api.get(`/networks/resource/application/${app}`);
    expect(list.body.data[1]).toEqual({ uuid: shared, container_network_name: "res-shared", role: "attached", scope: "shared", status: expect.any(String), attached_at: expect.any(String) });
    const again = await team.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: shared });
    expect(again.status).toBe(409);
  });

  it("attach refuses networks of another server, other scopes, deleted ones, unknown ids and bad bodies; nothing changes", async () => {
    const before = await db().networkAttachment.count();
    const elsewhere = (await team.api.post(`/networks/${other.uuid}`, { name: "far-shared" })).body.data.uuid;
    const env = await db().environment.findFirstOrThrow({ where: { project: { uuid: world.projectUuid }, name: "production" } });
    const envNet = await db().network.create({
      data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name: `capstan-env-${env.uuid}-x`, scope: "environment", environmentId: env.id, driver: "bridge", status: "active" },
    });
    const dead = await db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name: "dead", scope: "shared", driver: "bridge", status: "deleted" } });
    const cases: [unknown, number, RegExp][] = [
      [{ network_uuid: elsewhere }, 422, /on another server/],
      [{ network_uuid: envNet.uuid }, 422, /Only shared networks can be attached/],
      [{ network_uuid: dead.uuid }, 422, /is deleted/],
      [{ network_uuid: "no-such-network" }, 404, /Network not found/],
      [{}, 422, /invalid/],
      [{ network_uuid: 7 }, 422, /invalid/],
    ];
    for (const [body, status, message] of cases) {
      const r = await team.api.post(`/networks/resource/application/${app}/attach`, body);
      expect(r.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(r.body)).toMatch(message);
    }
    expect(await db().networkAttachment.count()).toBe(before);
  });

  it("type service with an application's uuid: 404; an unknown type: 422; an unknown resource: 404", async () => {
    // Services exist since issue 17 (test/api/services.test.ts): an application's uuid names none.
    const s = await team.api.get(`/networks/resource/service/${app}`);
    expect(s.status).toBe(404);
    expect(s.body.message).toBe("Service not found.");
    expect((await team.api.post(`/networks/resource/service/${app}/attach`, { network_uuid: shared })).status).toBe(404);
    const bad = await team.api.get(`/networks/resource/widget/${app}`);
    expect(bad.status).toBe(422);
    expect(bad.body.errors.type).toBeDefined();
    expect((await team.api.get(`/networks/resource/application/no-such-app`)).status).toBe(404);
    expect((await team.api.get(`/networks/resource/database/${app}`)).body.message).toBe("Database not found.");
  });

  it("detach: 200, effective on the next deployment; 404 when not attached", async () => {
    const r = await team.api.delete(`/networks/resource/application/${app}/${shared}`);
    expect(r.status).toBe(200);
    expect(r.body.message).toBe("Network res-shared detached from application res-app; it takes effect on the application's next deployment.");
    const again = await team.api.delete(`/networks/resource/application/${app}/${shared}`);
    expect(again.status).toBe(404);
    expect(again.body.message).toMatch(/Attachment of network res-shared/);
  });

  it("deleting the application removes its attachments", async () => {
    const doomed = await world.imageApp(server, "res-doomed");
    expect((await team.api.post(`/networks/resource/application/${doomed}/attach`, { network_uuid: shared })).status).toBe(200);
    const id = (await db().application.findUniqueOrThrow({ where: { uuid: doomed } })).id;
    expect(await db().networkAttachment.count({ where: { resourceType: "application", resourceId: id } })).toBe(1);
    expect((await team.api.delete(`/applications/${doomed}?delete_configurations=false`)).status).toBe(200);
    expect(await db().networkAttachment.count({ where: { resourceType: "application", resourceId: id } })).toBe(0);
  });
});

describe("scopes and permissions", () => {
  let server: ServerFixture;
  let net: string;
  let app: string;
  beforeAll(async () => {
    const s = await serverWithAgent("perm");
    server = s.server;
    ensureServed(s.agent);
    net = (await team.api.post(`/networks/${server.uuid}`, { name: "perm-shared" })).body.data.uuid;
    app = await world.imageApp(server, "perm-app");
  });

  it("a token without write scope reads but changes nothing (403 Invalid ability provided)", async () => {
    const reader = t.api((await t.newMember(team.teamId, "owner", ["read"])).token);
    expect((await reader.get(`/networks/${server.uuid}`)).status).toBe(200);
    expect((await reader.get(`/networks/resource/application/${app}`)).status).toBe(200);
    for (const r of [
      await reader.post(`/networks/${server.uuid}`, { name: "sneaky" }),
      await reader.post(`/networks/${server.uuid}/sync`),
      await reader.post(`/networks/${server.uuid}/proxy/migrate`),
      await reader.delete(`/networks/${server.uuid}/${net}`),
      await reader.post(`/networks/resource/application/${app}/attach`, { network_uuid: net }),
    ]) {
      expect(r.status).toBe(403);
      expect(r.body.message).toBe("Invalid ability provided.");
    }
    const writer = t.api((await t.newMember(team.teamId, "owner", ["write"])).token);
    expect((await writer.get(`/networks/${server.uuid}`)).status).toBe(403);
  });

  it("members and viewers see the server's networks; only owners and admins change them", async () => {
    const member = t.api((await t.newMember(team.teamId, "member")).token);
    const viewer = t.api((await t.newMember(team.teamId, "viewer")).token);
    const admin = t.api((await t.newMember(team.teamId, "admin")).token);
    for (const who of [member, viewer]) {
      expect((await who.get(`/networks/${server.uuid}`)).status).toBe(200);
      for (const r of [
        await who.post(`/networks/${server.uuid}`, { name: "sneaky" }),
        await who.post(`/networks/${server.uuid}/sync`),
        await who.post(`/networks/${server.uuid}/proxy/cleanup`),
        await who.delete(`/networks/${server.uuid}/${net}`),
      ]) {
        expect(r.status).toBe(403);
        expect(r.body.message).toBe("Only team owners and admins can manage networks.");
      }
    }
    expect((await admin.post(`/networks/${server.uuid}`, { name: "by-admin" })).status).toBe(201);
    expect(await db().network.count({ where: { serverId: server.id, name: "sneaky" } })).toBe(0);
  });

  it("attach and detach need full access on the resource's environment; without a grant the resource is not found", async () => {
    const member = await t.newMember(team.teamId, "member");
    const api = t.api(member.token);
    expect((await api.get(`/networks/resource/application/${app}`)).status).toBe(404);
    expect((await api.post(`/networks/resource/application/${app}/attach`, { network_uuid: net })).status).toBe(404);
    const grant = (level: string) => team.api.post("/permissions/project", { project_uuid: world.projectUuid, user_id: member.userId, permission_level: level });
    expect((await grant("deploy")).status).toBeLessThan(300);
    expect((await api.get(`/networks/resource/application/${app}`)).status).toBe(200);
    expect((await api.post(`/networks/resource/application/${app}/attach`, { network_uuid: net })).status).toBe(403);
    const perm = await db().projectPermission.findFirstOrThrow({ where: { userId: member.userId } });
    expect((await team.api.put(`/permissions/project/${perm.id}`, { permission_level: "full_access" })).status).toBeLessThan(300);
    expect((await api.post(`/networks/resource/application/${app}/attach`, { network_uuid: net })).status).toBe(200);
    expect((await api.delete(`/networks/resource/application/${app}/${net}`)).status).toBe(200);
  });
});

describe("with network management off", () => {
  let off: TestInstance;
  afterAll(async () => off?.close());

  it("lists and syncs, but refuses to create, attach or migrate (409 naming the setting)", async () => {
    off = await startTestInstance();
    const offTeam = await off.newTeam();
    const offWorld = await new DeployWorld(off, offTeam).init();
    try {
      const server = await offWorld.server("off");
      const agent = await offWorld.agent(server);
      agent.serve("networks.list", () => ({ ok: true, result: { networks: [engineNetwork("capstan")] } }));
      expect((await offTeam.api.get(`/networks/${server.uuid}`)).body).toEqual({ data: [], proxy_isolation: { enabled: false, phase: "none" } });
      expect((await offTeam.api.post(`/networks/${server.uuid}/sync`)).body.data.discovered).toBe(1);
      const create = await offTeam.api.post(`/networks/${server.uuid}`, { name: "nope" });
      expect(create.status).toBe(409);
      expect(create.body.message).toMatch(/PLATFORM_NETWORK_MANAGEMENT=false/);
      const migrate = await offTeam.api.post(`/networks/${server.uuid}/proxy/migrate`);
      expect(migrate.status).toBe(409);
      const app = await offWorld.imageApp(server, "off-app");
      const sys = (await offTeam.api.get(`/networks/${server.uuid}`)).body.data[0].uuid;
      const attach = await offTeam.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: sys });
      expect(attach.status).toBe(409);
      expect(await off.instance.database.prisma.networkAttachment.count()).toBe(0);
    } finally {
      offWorld.close();
    }
  });
});

describe("sync: only networks labelled shared are shared", () => {
  it("a compose application's own network (capstan.managed, no scope label) is recorded system: it cannot be attached or deleted", async () => {
    const { server, agent } = await serverWithAgent("sync-scope");
    const app = await world.imageApp(server, "scope-app");
    const engine = [
      // rewriteCompose labels the application's network capstan.managed=true and capstan.resource.uuid, no scope.
      engineNetwork(`capstan-${app}`, { id: "engine-app-net", labels: { "capstan.managed": "true", "capstan.resource.uuid": app } }),
      engineNetwork("made-shared", { id: "engine-shared", labels: { "capstan.managed": "true", "capstan.network.scope": "shared" } }),
    ];
    agent.serve("networks.list", () => ({ ok: true, result: { networks: engine } }));
    const removals: JobEnvelope[] = [];
    agent.serve("network.remove", (job) => {
      removals.push(job);
      return { ok: true, result: { removed: true, disconnected: [] } };
    });
    const r = await team.api.post(`/networks/${server.uuid}/sync`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const rows = new Map((await rowsOf(server.id)).map((n) => [n.name, n]));
    expect(rows.get(`capstan-${app}`)).toMatchObject({ scope: "system", status: "active" });
    expect(rows.get("made-shared")).toMatchObject({ scope: "shared", status: "active" });

    const appNet = rows.get(`capstan-${app}`)!;
    const other = await world.imageApp(server, "scope-intruder");
    const attach = await team.api.post(`/networks/resource/application/${other}/attach`, { network_uuid: appNet.uuid });
    expect(attach.status).toBe(422);
    expect(attach.body.errors.network_uuid[0]).toMatch(/Only shared networks can be attached; capstan-.* is a system network/);
    const del = await team.api.delete(`/networks/${server.uuid}/${appNet.uuid}`);
    expect(del.status).toBe(409);
    expect(await db().networkAttachment.count({ where: { networkId: appNet.id } })).toBe(0);
    expect((await db().network.findUniqueOrThrow({ where: { id: appNet.id } })).status).toBe("active");
    expect(removals).toEqual([]);
  });

  it("a record an earlier sync took for shared (a platform name) becomes system and loses its attachments", async () => {
    const { server, agent } = await serverWithAgent("sync-reclassify");
    const app = await world.imageApp(server, "reclassify-app");
    const wrong = await db().network.create({
      data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name: `capstan-${app}`, scope: "shared", driver: "bridge", status: "active" },
    });
    const other = await world.imageApp(server, "reclassify-other");
    const otherId = (await db().application.findUniqueOrThrow({ where: { uuid: other } })).id;
    await db().networkAttachment.create({ data: { networkId: wrong.id, resourceType: "application", resourceId: otherId } });
    agent.serve("networks.list", () => ({
      ok: true,
      result: { networks: [engineNetwork(`capstan-${app}`, { id: "engine-app-net", labels: { "capstan.managed": "true", "capstan.resource.uuid": app } })] },
    }));
    expect((await team.api.post(`/networks/${server.uuid}/sync`)).status).toBe(200);
    expect(await db().network.findUniqueOrThrow({ where: { id: wrong.id } })).toMatchObject({ scope: "system", status: "active", reason: expect.stringMatching(/reclassified by sync/) });
    expect(await db().networkAttachment.count({ where: { networkId: wrong.id } })).toBe(0);
    expect((await team.api.delete(`/networks/${server.uuid}/${wrong.uuid}`)).status).toBe(409);
  });
});

describe("sync does not undo what happened while the agent listed", () => {
  it("a record created, deleted or changed after the listing keeps its state; a deleted one whose removal is still open is not revived", async () => {
    const { server, agent } = await serverWithAgent("sync-race");
    const make = (name: string, status: string) =>
      db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name, scope: "shared", driver: "bridge", status } });
    // Deleted before the sync, its removal queued on the agent: the engine still lists it.
    const removing = await make("being-removed", "active");
    agent.serve("network.remove", () => ({ hold: true }));
    expect((await team.api.delete(`/networks/${server.uuid}/${removing.uuid}`)).status).toBe(200);
    await until(async () => agent.jobs.some((j) => j.type === "network.remove"));
    const live = await make("turned-active", "pending");
    const deletedMeanwhile = await make("deleted-meanwhile", "active");

    agent.serve("networks.list", () => ({ hold: true }));
    const sync = team.api.post(`/networks/${server.uuid}/sync`);
    await until(async () => agent.jobs.some((j) => j.type === "networks.list"));
    const list = agent.jobs.find((j) => j.type === "networks.list")!;
    // While the agent lists: a create is recorded (not on the engine yet), a pending record
    // becomes active (the engine listed before it was made), a record is deleted (listed before).
    const created = await make("created-meanwhile", "pending");
    await db().network.update({ where: { id: live.id }, data: { status: "active", containerEngineId: "engine-live" } });
    await db().network.update({ where: { id: deletedMeanwhile.id }, data: { status: "deleted" } });
    await agent.outcome({
      id: list.id,
      attempt: list.attempt,
      ok: true,
      result: { networks: [engineNetwork("being-removed", { labels: { "capstan.managed": "true", "capstan.network.scope": "shared" } }), engineNetwork("deleted-meanwhile")] },
    });
    const r = await sync;
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(await db().network.findUniqueOrThrow({ where: { id: created.id } })).toMatchObject({ status: "pending" });
    expect(await db().network.findUniqueOrThrow({ where: { id: live.id } })).toMatchObject({ status: "active", containerEngineId: "engine-live" });
    expect(await db().network.findUniqueOrThrow({ where: { id: deletedMeanwhile.id } })).toMatchObject({ status: "deleted" });
    expect(await db().network.findUniqueOrThrow({ where: { id: removing.id } })).toMatchObject({ status: "deleted" });
  });
});

describe("environment networks left without their environment", () => {
  it("can be deleted (network.remove), and stop counting toward the limit", async () => {
    const { server, agent } = await serverWithAgent("orphans");
    const removals: JobEnvelope[] = [];
    agent.serve("network.remove", (job) => {
      removals.push(job);
      return { ok: true, result: { removed: true, disconnected: [] } };
    });
    const orphan = await db().network.create({
      data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name: `capstan-env-${crypto.randomUUID()}`, scope: "environment", environmentId: null, driver: "bridge", status: "pending" },
    });
    const r = await team.api.delete(`/networks/${server.uuid}/${orphan.uuid}`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await until(async () => removals.length === 1);
    expect(removals[0]!.payload).toEqual({ name: orphan.name });
    expect(await db().network.findUniqueOrThrow({ where: { id: orphan.id } })).toMatchObject({ status: "deleted" });
  });
});

describe("request bodies are strict", () => {
  it("an unknown (misspelt) field is a 422 naming it, and nothing changes", async () => {
    const { server, agent } = await serverWithAgent("strict");
    ensureServed(agent);
    const before = await rowsOf(server.id);
    const r = await team.api.post(`/networks/${server.uuid}`, { name: "typo-net", drivr: "overlay" });
    expect(r.status).toBe(422);
    expect(r.body.errors).toEqual({ drivr: ["Unknown field(s): drivr. This path does not take them."] });
    expect(await rowsOf(server.id)).toEqual(before);
    const net = (await team.api.post(`/networks/${server.uuid}`, { name: "strict-net" })).body.data.uuid;
    const app = await world.imageApp(server, "strict-app");
    const a = await team.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: net, role: "primary" });
    expect(a.status).toBe(422);
    expect(a.body.errors).toEqual({ role: ["Unknown field(s): role. This path does not take them."] });
    expect(await db().networkAttachment.count({ where: { networkId: (await db().network.findUniqueOrThrow({ where: { uuid: net } })).id } })).toBe(0);
  });
});

describe("the 32 attachments of a resource", () => {
  it("concurrent attaches cannot pass the cap together", async () => {
    const { server } = await serverWithAgent("cap");
    const app = await world.imageApp(server, "cap-app");
    const nets = [];
    for (let i = 0; i < 40; i++) {
      nets.push(
        await db().network.create({ data: { uuid: crypto.randomUUID(), teamId: team.teamId, serverId: server.id, name: `cap-${i}`, scope: "shared", driver: "bridge", status: "active" } }),
      );
    }
    // A slow database between the count and the insert, as under load: requests outside the
    // network lock would all count below the cap before any of them inserts.
    const delegate = db().networkAttachment;
    const count = delegate.count;
    delegate.count = (async (...args: Parameters<typeof count>) => {
      const n = await count.apply(delegate, args);
      await new Promise((r) => setTimeout(r, 100));
      return n;
    }) as typeof count;
    let results;
    try {
      results = await Promise.all(nets.map((n) => team.api.post(`/networks/resource/application/${app}/attach`, { network_uuid: n.uuid })));
    } finally {
      delegate.count = count;
    }
    expect(results.filter((r) => r.status === 200)).toHaveLength(32);
    for (const r of results.filter((x) => x.status !== 200)) {
      expect(r.status).toBe(422);
      expect(r.body.errors.network_uuid).toEqual(["A resource can be attached to at most 32 networks."]);
    }
    const id = (await db().application.findUniqueOrThrow({ where: { uuid: app } })).id;
    expect(await db().networkAttachment.count({ where: { resourceType: "application", resourceId: id } })).toBe(32);
  });
});
