/**
 * What the agent is asked to do with networks, per isolation mode (spec section 1, "Network
 * management behavior"): the deploy payloads the scripted agent receives (run.network,
 * run.networks, run.ensure_networks, run.proxy_network, proxy.networks), the user's routing
 * label on compose applications, the limit on deploy, environment deletion, and proxy
 * isolation migrate -> redeploy -> cleanup. Real traffic on real engines: test/e2e/networks.test.ts.
 */
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeployPayload, EV, type EngineNetwork, type JobEnvelope, type ManagedContainer, type NetworkSpec } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { DeployWorld, deployResult, until, type ServerFixture } from "./support/deployments.js";
import { sampleFacts, type ScriptedAgent } from "./support/fake-agent.js";
import { Prisma } from "../../control-plane/src/db/generated/sqlite/client.js";

const PROXY_NET = "capstan-proxy-net";

/** One instance with the given settings, a team, and helpers to deploy and read what the agent got. */
class ModeWorld {
  t!: TestInstance;
  team!: TeamFixture;
  world!: DeployWorld;
  readonly deploys: JobEnvelope[] = [];

  constructor(private readonly env: Record<string, string>) {}

  async init(): Promise<this> {
    this.t = await startTestInstance(this.env);
    this.team = await this.t.newTeam();
    this.world = await new DeployWorld(this.t, this.team).init();
    return this;
  }

  get db() {
    return this.t.instance.database.prisma;
  }

  /** A server whose agent answers deployments (recording them) and network jobs. */
  async server(name: string, facts = sampleFacts): Promise<{ server: ServerFixture; agent: ScriptedAgent }> {
    const server = await this.world.server(name);
    return { server, agent: await this.reconnect(server, facts) };
  }

  /** The server's agent connected (again, after a restart of the control plane cut it off), with the same answers. */
  async reconnect(server: ServerFixture, facts = sampleFacts): Promise<ScriptedAgent> {
    const agent = await this.world.agent(server, (job) => {
      this.deploys.push(job);
      return { ok: true, result: deployResult(null, "running:healthy") };
    });
    if (facts !== sampleFacts) await agent.hello(facts);
    agent.serve("app.action", () => ({ ok: true, result: { status: "exited" } }));
    agent.serve("network.remove", () => ({ ok: true, result: { removed: true, disconnected: [] } }));
    return agent;
  }

  async environment(name: string): Promise<{ id: number; uuid: string }> {
    const existing = await this.db.environment.findFirst({ where: { project: { uuid: this.world.projectUuid }, name } });
    if (existing) return existing;
    const r = await this.team.api.post(`/projects/${this.world.projectUuid}/environments`, { name });
    expect(r.status).toBe(201);
    return this.db.environment.findFirstOrThrow({ where: { project: { uuid: this.world.projectUuid }, name } });
  }

  async app(server: ServerFixture, name: string, opts: { fqdn?: string; environment?: string } = {}): Promise<string> {
    if (opts.environment) await this.environment(opts.environment);
    return this.world.imageApp(server, name, { ...(opts.fqdn ? { fqdn: opts.fqdn } : {}), ...(opts.environment ? { environment_name: opts.environment } : {}) });
  }

  /** Deploys and returns the app.deploy payload of that deployment once it finished. */
  async deploy(app: string): Promise<DeployPayload> {
    const dep = await this.world.deploy(app, undefined, this.team.api);
    await this.world.waitFor(dep, "finished");
    return DeployPayload.parse(this.deploys.find((j) => (j.payload as { deployment_uuid: string }).deployment_uuid === dep)!.payload);
  }

  /** Deploys and returns the failed deployment. */
  async deployFails(app: string): Promise<{ reason: string }> {
    const dep = await this.world.deploy(app, undefined, this.team.api);
    return this.world.waitFor(dep, "failed");
  }

  async close(): Promise<void> {
    this.world?.close();
    await this.t?.close();
  }
}

const envSpec = (uuid: string, over: Partial<NetworkSpec> = {}): NetworkSpec => ({
  name: `capstan-env-${uuid}`,
  driver: "bridge",
  encrypted: false,
  attachable: true,
  labels: { "capstan.network.scope": "environment" },
  ...over,
});
const proxySpec = (over: Partial<NetworkSpec> = {}): NetworkSpec => ({
  name: PROXY_NET,
  driver: "bridge",
  encrypted: false,
  attachable: true,
  labels: { "capstan.network.scope": "proxy" },
  ...over,
});

/** A shared network recorded active on the server (as after a create the agent confirmed). */
async function sharedNetwork(m: ModeWorld, server: ServerFixture, name: string): Promise<string> {
  const row = await m.db.network.create({
    data: { uuid: crypto.randomUUID(), teamId: m.team.teamId, serverId: server.id, name, scope: "shared", driver: "bridge", status: "active" },
  });
  return row.uuid;
}

async function attach(m: ModeWorld, app: string, network: string, type = "application") {
  const r = await m.team.api.post(`/networks/resource/${type}/${app}/attach`, { network_uuid: network });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
}

/** The Prisma calls (one statement each) made while `request` runs, as model.method. */
async function prismaCalls(m: ModeWorld, request: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const client = m.db as unknown as Record<string, Record<string, unknown> | undefined>;
  const undo: (() => void)[] = [];
  for (const model of Object.values(Prisma.ModelName)) {
    const key = model[0]!.toLowerCase() + model.slice(1);
    const delegate = client[key];
    if (!delegate) continue;
    for (const method of ["findFirst", "findFirstOrThrow", "findUnique", "findUniqueOrThrow", "findMany", "count", "groupBy", "aggregate"]) {
      const original = delegate[method];
      if (typeof original !== "function") continue;
      delegate[method] = (...args: unknown[]) => (seen.push(`${key}.${method}`), original.apply(delegate, args));
      undo.push(() => (delegate[method] = original));
    }
  }
  try {
    await request();
  } finally {
    for (const u of undo) u();
  }
  return seen;
}

/**
 * The reads one request makes, by kind and count. Timed passes (the job queue's, the sweeps of
 * syncs and reconciles) read through the same client and can land inside one request's window,
 * so the request runs twice and each kind counts as often as it was read in both runs.
 */
async function requestReads(m: ModeWorld, request: () => Promise<unknown>): Promise<Record<string, number>> {
  const tally = (calls: string[]) => calls.reduce<Record<string, number>>((acc, c) => ((acc[c] = (acc[c] ?? 0) + 1), acc), {});
  // The repair sweep reads deployments every 2 s: on a loaded CI machine one of its passes fell
  // inside both runs' windows. It waits while the request is counted.
  const sweep = m.t.instance.repairSweep;
  await sweep.stop();
  try {
    const [a, b] = [tally(await prismaCalls(m, request)), tally(await prismaCalls(m, request))];
    return Object.fromEntries(Object.keys(a).filter((k) => k in b).map((k) => [k, Math.min(a[k]!, b[k]!)]));
  } finally {
    sweep.start();
  }
}

describe("network management off (the default): one bridge per server", () => {
  const m = new ModeWorld({});
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("every resource on the destination network; nothing to ensure; the proxy joins the destination network", async () => {
    const { server } = await m.server("off");
    const pub = await m.deploy(await m.app(server, "off-public", { fqdn: "https://off.example.test" }));
    const internal = await m.deploy(await m.app(server, "off-internal", { environment: "staging" }));
    for (const p of [pub, internal]) {
      expect(p.run).toMatchObject({ network: "capstan", networks: [], ensure_networks: [], proxy_network: null });
      expect(p.proxy).toMatchObject({ networks: ["capstan"], ensure_networks: [] });
    }
    expect(await m.db.network.count()).toBe(0);
  });
});

describe("mode none: management on, no automatic isolation", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "none" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("the destination network for all; attached shared networks are joined", async () => {
    const { server } = await m.server("none");
    const app = await m.app(server, "none-app", { fqdn: "https://none.example.test" });
    await attach(m, app, await sharedNetwork(m, server, "team-bus"));
    const p = await m.deploy(app);
    expect(p.run).toMatchObject({ network: "capstan", networks: ["team-bus"], ensure_networks: [], proxy_network: null });
    expect(p.proxy).toMatchObject({ networks: ["capstan"], ensure_networks: [] });
    const other = await m.deploy(await m.app(server, "none-other", { environment: "staging" }));
    expect(other.run).toMatchObject({ network: "capstan", networks: [] });
  });
});

describe("mode none with PLATFORM_PROXY_ISOLATION=true", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "none", PLATFORM_PROXY_ISOLATION: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("public resources also join the proxy network and are routed there; internal ones do not", async () => {
    const { server } = await m.server("none-proxy");
    const pub = await m.deploy(await m.app(server, "np-public", { fqdn: "https://np.example.test" }));
    expect(pub.run).toMatchObject({ network: "capstan", networks: [PROXY_NET], ensure_networks: [proxySpec()], proxy_network: PROXY_NET });
    const internal = await m.deploy(await m.app(server, "np-internal"));
    expect(internal.run).toMatchObject({ network: "capstan", networks: [], ensure_networks: [], proxy_network: null });
    // A server with nothing deployed before starts isolated: the proxy is on the proxy network only.
    expect(pub.proxy).toMatchObject({ networks: [PROXY_NET], ensure_networks: [proxySpec()] });
    expect(await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name: PROXY_NET } })).toMatchObject({ scope: "proxy", isProxyNetwork: true, status: "active" });
  });
});

describe("mode environment (limit 2 networks per server here)", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_MAX_NETWORKS: "2" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("each environment gets its own network, created first by the agent and recorded (pending -> active)", async () => {
    const { server } = await m.server("env");
    const prod = await m.environment("production");
    const staging = await m.environment("staging");
    const pubApp = await m.app(server, "env-public", { fqdn: "https://env.example.test" });
    const p1 = await m.deploy(pubApp);
    expect(p1.run).toMatchObject({ network: `capstan-env-${prod.uuid}`, networks: [], ensure_networks: [envSpec(prod.uuid)], proxy_network: null });
    const row = await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name: `capstan-env-${prod.uuid}` } });
    expect(row).toMatchObject({ scope: "environment", environmentId: prod.id, driver: "bridge", teamId: m.team.teamId });
    // The deploy that ensured it succeeded: it exists.
    await until(async () => (await m.db.network.findUniqueOrThrow({ where: { id: row.id } })).status === "active");
    // The proxy reaches public resources on their environment network.
    expect(p1.proxy.networks).toEqual(["capstan", `capstan-env-${prod.uuid}`]);

    const internal = await m.deploy(await m.app(server, "env-internal", { environment: "staging" }));
    expect(internal.run).toMatchObject({ network: `capstan-env-${staging.uuid}`, networks: [], proxy_network: null });
    // staging has no public resource: the proxy does not join its network.
    expect(internal.proxy.networks).toEqual(["capstan", `capstan-env-${prod.uuid}`]);
    // A second deploy of the same environment reuses the record.
    await m.deploy(pubApp);
    expect(await m.db.network.count({ where: { serverId: server.id } })).toBe(2);
  });

  it("a deploy that would need an environment network beyond PLATFORM_MAX_NETWORKS is a 422: no deployment, no job, nothing recorded", async () => {
    const { server } = await m.server("env-full");
    await m.deploy(await m.app(server, "a", { environment: "production" }));
    await m.deploy(await m.app(server, "b", { environment: "staging" }));
    const qa = await m.environment("qa");
    const jobsBefore = await m.db.job.count({ where: { serverId: server.id } });
    const c = await m.app(server, "c", { environment: "qa" });
    const r = await m.team.api.post(`/applications/${c}/deploy`);
    expect(r.status, JSON.stringify(r.body)).toBe(422);
    const message = "The application's environment network cannot be created: Server env-full has reached its limit of 2 networks (PLATFORM_MAX_NETWORKS); delete networks it no longer needs or raise the limit.";
    expect(r.body).toEqual({ message, errors: { environment_name: [message] } });
    expect(await m.db.deployment.count({ where: { application: { uuid: c } } })).toBe(0);
    expect(await m.db.job.count({ where: { serverId: server.id } })).toBe(jobsBefore);
    expect(await m.db.network.count({ where: { serverId: server.id, name: `capstan-env-${qa.uuid}` } })).toBe(0);
    // An environment whose network is recorded already needs no room: its deploys go on.
    await m.deploy(await m.app(server, "a2", { environment: "production" }));
  });

  it("a webhook's deployment at the limit is queued and fails with the reason (a git provider cannot show a 422 to anyone)", async () => {
    const { server } = await m.server("env-full-hook");
    await m.deploy(await m.app(server, "ha", { environment: "production" }));
    await m.deploy(await m.app(server, "hb", { environment: "staging" }));
    const hooked = await m.environment("hooked");
    const created = await m.team.api.post("/applications/public", {
      project_uuid: m.world.projectUuid,
      environment_name: "hooked",
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      name: "hooked-app",
      git_repository: "https://git.example.test/org/repo.git",
      git_branch: "main",
      build_pack: "builder_a",
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const secret = (await m.team.api.post(`/applications/${created.body.uuid}/webhook-secret`)).body.secret as string;
    const sha = "0123456789abcdef0123456789abcdef01234567";
    const body = JSON.stringify({ ref: "refs/heads/main", after: sha, head_commit: { id: sha, message: "push" }, repository: { full_name: "org/repo" } });
    const res = await fetch(`${m.t.url}/api/v1/webhooks/applications/${created.body.uuid}/github`, {
      method: "POST",
      body,
      headers: { "Content-Type": "application/json", "X-GitHub-Event": "push", "X-Hub-Signature-256": `sha256=${createHmac("sha256", secret).update(body).digest("hex")}` },
    });
    expect(res.status).toBe(200);
    const { deployment_uuid } = (await res.json()) as { deployment_uuid: string };
    const failed = await m.world.waitFor(deployment_uuid, "failed");
    expect(failed.reason).toMatch(/environment network cannot be created: Server env-full-hook has reached its limit of 2 networks \(PLATFORM_MAX_NETWORKS\)/);
    expect(await m.db.network.count({ where: { serverId: server.id, name: `capstan-env-${hooked.uuid}` } })).toBe(0);
  });

  it("attached shared networks are joined on the next deployment, and left after a detach", async () => {
    const { server } = await m.server("env-shared");
    const app = await m.app(server, "bus-user");
    const bus = await sharedNetwork(m, server, "bus");
    await attach(m, app, bus);
    expect((await m.deploy(app)).run.networks).toEqual(["bus"]);
    expect((await m.team.api.delete(`/networks/resource/application/${app}/${bus}`)).status).toBe(200);
    expect((await m.deploy(app)).run.networks).toEqual([]);
  });

  it("databases: the environment network and attached shared networks, never the proxy network; the limit is a 422", async () => {
    const { server, agent } = await m.server("env-db");
    const dbDeploys: JobEnvelope[] = [];
    agent.serve("db.deploy", (job) => {
      dbDeploys.push(job);
      return { ok: true, result: { container: "c", status: "running:healthy" } };
    });
    const prod = await m.environment("production");
    const where = (environment: string) => ({
      project_uuid: m.world.projectUuid,
      environment_name: environment,
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
    });
    const created = await m.team.api.post("/databases/postgresql", { ...where("production"), instant_deploy: false });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const bus = await sharedNetwork(m, server, "db-bus");
    const attached = await m.team.api.post(`/networks/resource/database/${created.body.uuid}/attach`, { network_uuid: bus });
    expect(attached.status, JSON.stringify(attached.body)).toBe(200);
    expect((await m.team.api.get(`/networks/resource/database/${created.body.uuid}`)).body.data.map((n: { container_network_name: string; role: string }) => [n.role, n.container_network_name])).toEqual([
      ["primary", `capstan-env-${prod.uuid}`],
      ["attached", "db-bus"],
    ]);
    expect((await m.team.api.post(`/databases/${created.body.uuid}/start`)).status).toBeLessThan(300);
    await until(async () => dbDeploys.length === 1);
    expect(dbDeploys[0]!.payload).toMatchObject({ network: `capstan-env-${prod.uuid}`, networks: ["db-bus"], ensure_networks: [envSpec(prod.uuid)] });

    // The server holds two networks now (the environment's and db-bus): a database in a third
    // environment cannot get its network, and nothing is created.
    await m.environment("qa-db");
    const before = await m.db.standaloneDatabase.count();
    const refused = await m.team.api.post("/databases/postgresql", where("qa-db"));
    expect(refused.status).toBe(422);
    expect(refused.body.message).toMatch(/database's environment network cannot be created: .*PLATFORM_MAX_NETWORKS/);
    expect(refused.body.errors).toEqual({ environment_name: [refused.body.message] });
    expect(await m.db.standaloneDatabase.count()).toBe(before);
    expect(await m.db.network.count({ where: { serverId: server.id } })).toBe(2);

    // Starting (or restarting) a database whose environment has no network on the server yet:
    // the same 422, and no db.deploy is queued.
    const idle = await m.team.api.post("/databases/postgresql", { ...where("qa-db"), instant_deploy: false });
    expect(idle.status, JSON.stringify(idle.body)).toBe(201);
    const jobsBefore = await m.db.job.count({ where: { serverId: server.id } });
    for (const action of ["start", "restart"]) {
      const r = await m.team.api.post(`/databases/${idle.body.uuid}/${action}`);
      expect(r.status, `${action} ${JSON.stringify(r.body)}`).toBe(422);
      expect(r.body.message).toMatch(/database's environment network cannot be created: .*PLATFORM_MAX_NETWORKS/);
      expect(r.body.errors).toEqual({ environment_name: [r.body.message] });
    }
    expect(await m.db.job.count({ where: { serverId: server.id } })).toBe(jobsBefore);
    expect(dbDeploys).toHaveLength(1);
    expect(await m.db.network.count({ where: { serverId: server.id } })).toBe(2);
  });

  it("deleting an environment removes its networks from the servers, after its resources", async () => {
    const { server, agent } = await m.server("env-delete");
    const temp = await m.environment("temp");
    await m.deploy(await m.app(server, "temp-app", { environment: "temp" }));
    const row = await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name: `capstan-env-${temp.uuid}` } });
    const r = await m.team.api.delete(`/projects/${m.world.projectUuid}/environments/temp`);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await until(async () => agent.jobs.some((j) => j.type === "network.remove"));
    const types = agent.jobs.map((j) => j.type);
    expect(types.lastIndexOf("app.action")).toBeLessThan(types.indexOf("network.remove"));
    expect(agent.jobs.find((j) => j.type === "network.remove")!.payload).toEqual({ name: `capstan-env-${temp.uuid}` });
    expect(await m.db.network.findUniqueOrThrow({ where: { id: row.id } })).toMatchObject({ status: "deleted", environmentId: null });
  });
});

describe("mode strict: environment isolation plus proxy isolation", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "strict", PLATFORM_OVERLAY_ENCRYPTION: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("public resources: environment network + proxy network (routed there); internal ones: environment network only", async () => {
    const { server } = await m.server("strict");
    const prod = await m.environment("production");
    const pub = await m.deploy(await m.app(server, "s-public", { fqdn: "https://s.example.test" }));
    expect(pub.run).toMatchObject({
      network: `capstan-env-${prod.uuid}`,
      networks: [PROXY_NET],
      ensure_networks: [envSpec(prod.uuid), proxySpec()],
      proxy_network: PROXY_NET,
    });
    const internal = await m.deploy(await m.app(server, "s-internal"));
    expect(internal.run).toMatchObject({ network: `capstan-env-${prod.uuid}`, networks: [], ensure_networks: [envSpec(prod.uuid)], proxy_network: null });
    // Fresh server: the proxy joins the proxy network only, never an environment network.
    expect(internal.proxy).toMatchObject({ networks: [PROXY_NET], ensure_networks: [proxySpec()] });
  });

  it("on a swarm manager the networks are overlays, encrypted with PLATFORM_OVERLAY_ENCRYPTION", async () => {
    const { server } = await m.server("strict-swarm", { ...sampleFacts, engine: { ...sampleFacts.engine, swarm: "active", swarm_role: "manager" } });
    const prod = await m.environment("production");
    const p = await m.deploy(await m.app(server, "s-swarm", { fqdn: "https://swarm.example.test" }));
    expect(p.run.ensure_networks).toEqual([envSpec(prod.uuid, { driver: "overlay", encrypted: true }), proxySpec({ driver: "overlay", encrypted: true })]);
  });

  it("compose: the public service joins the proxy network, the others do not; a user's routing label wins", async () => {
    const { server } = await m.server("strict-compose");
    const prod = await m.environment("production");
    const create = (name: string, raw: string) =>
      m.team.api.post("/applications/dockercompose", {
        project_uuid: m.world.projectUuid,
        environment_name: "production",
        server_uuid: server.uuid,
        destination_uuid: server.destinationUuid,
        name,
        fqdn: `https://${name}.example.test`,
        docker_compose_raw: raw,
      });
    const raw = (label: string) =>
      `x-capstan-public-service: web\nservices:\n  web:\n    image: nginx:1.27\n    expose: ["80"]\n${label}  db:\n    image: postgres:16\n    labels:\n      capstan.proxy.port: "1"\n`;
    const auto = await create("cmp-auto", raw(""));
    expect(auto.status, JSON.stringify(auto.body)).toBe(201);
    const p = await m.deploy(auto.body.uuid);
    expect(p.source.kind).toBe("compose");
    const doc = JSON.parse((p.source as { compose: string }).compose);
    const web = doc.services[`${auto.body.uuid}-web`];
    const dbSvc = doc.services[`${auto.body.uuid}-db`];
    expect(doc.networks).toMatchObject({ destination: { external: true, name: `capstan-env-${prod.uuid}` }, proxy: { external: true, name: PROXY_NET } });
    expect(Object.keys(web.networks).sort()).toEqual(["app", "destination", "proxy"]);
    expect(Object.keys(dbSvc.networks).sort()).toEqual(["app", "destination"]);
    expect(web.labels["capstan.proxy.network"]).toBe(PROXY_NET);
    expect(dbSvc.labels["capstan.proxy.port"]).toBe("");
    expect(p.run).toMatchObject({ network: `capstan-env-${prod.uuid}`, networks: [PROXY_NET], proxy_network: PROXY_NET });

    const own = await create("cmp-own", raw("    labels:\n      capstan.proxy.network: my-routing\n"));
    expect(own.status, JSON.stringify(own.body)).toBe(201);
    const q = await m.deploy(own.body.uuid);
    expect(JSON.parse((q.source as { compose: string }).compose).services[`${own.body.uuid}-web`].labels["capstan.proxy.network"]).toBe("my-routing");
  });
});

describe("resource_count (strict mode: environment networks and proxy isolation)", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "strict" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  const database = async (server: ServerFixture, environment: string): Promise<string> => {
    const r = await m.team.api.post("/databases/postgresql", {
      project_uuid: m.world.projectUuid,
      environment_name: environment,
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      instant_deploy: false,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.uuid;
  };

  it("environment network: its environment's resources on the server; proxy network: the public applications; shared: the attachments", async () => {
    const { server, agent } = await m.server("counts");
    const { server: elsewhere } = await m.server("counts-elsewhere");
    const prod = await m.environment("production");
    const staging = await m.environment("staging");
    const pub = await m.app(server, "c-public", { fqdn: "https://c.example.test" });
    const internal = await m.app(server, "c-internal");
    const stagingApp = await m.app(server, "c-staging", { environment: "staging" });
    const db = await database(server, "production");
    // The same environment on another server: not on this server's networks.
    await m.app(elsewhere, "c-elsewhere", { fqdn: "https://elsewhere.example.test" });
    await database(elsewhere, "production");
    await m.deploy(pub);
    await m.deploy(stagingApp);
    const bus = await sharedNetwork(m, server, "c-bus");
    await attach(m, internal, bus);
    await attach(m, db, bus, "database");

    const list = await m.team.api.get(`/networks/${server.uuid}`);
    expect(list.status).toBe(200);
    const counts = Object.fromEntries(list.body.data.map((n: { container_network_name: string; resource_count: number }) => [n.container_network_name, n.resource_count]));
    expect(counts).toEqual({ [`capstan-env-${prod.uuid}`]: 3, [`capstan-env-${staging.uuid}`]: 1, [PROXY_NET]: 1, "c-bus": 2 });
    // The detail counts the same way.
    agent.serve("networks.list", () => ({ ok: true, result: { networks: [] } }));
    for (const n of list.body.data as { uuid: string; resource_count: number }[]) {
      const detail = await m.team.api.get(`/networks/${server.uuid}/${n.uuid}`);
      expect(detail.status, JSON.stringify(detail.body)).toBe(200);
      expect(detail.body.resource_count).toBe(n.resource_count);
    }
  });

  it("the list takes the same statements however many networks and resources the server has (no query per network)", async () => {
    const { server } = await m.server("counts-scale");
    const pub = await m.app(server, "s-public", { fqdn: "https://s.example.test" });
    await m.deploy(pub);
    const bus = await sharedNetwork(m, server, "s-bus");
    await attach(m, pub, bus);
    const list = () => m.team.api.get(`/networks/${server.uuid}`);
    const one = await requestReads(m, list);
    expect(one["network.findMany"]).toBeGreaterThan(0);
    expect((await list()).body.data).toHaveLength(3);

    for (let i = 0; i < 6; i++) {
      const env = await m.environment(`scale-${i}`);
      const app = await m.app(server, `s-app-${i}`, { environment: `scale-${i}`, ...(i % 2 ? { fqdn: `https://s${i}.example.test` } : {}) });
      await database(server, `scale-${i}`);
      await m.db.network.create({
        data: { uuid: crypto.randomUUID(), teamId: m.team.teamId, serverId: server.id, name: `capstan-env-${env.uuid}`, scope: "environment", environmentId: env.id, driver: "bridge", status: "active" },
      });
      await attach(m, app, await sharedNetwork(m, server, `s-bus-${i}`));
    }
    const many = await requestReads(m, list);
    const body = (await list()).body;
    expect(body.data).toHaveLength(15);
    expect(body.data.filter((n: { scope: string; resource_count: number }) => n.scope === "environment" && n.resource_count === 2)).toHaveLength(6);
    expect(body.data.find((n: { container_network_name: string }) => n.container_network_name === PROXY_NET).resource_count).toBe(4);
    expect(many).toEqual(one);
  });
});

describe("proxy isolation switched off, then on again: a server's phase is reset to none by what runs while it is off", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_PROXY_ISOLATION: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  const shown = async (server: ServerFixture) => (await m.team.api.get(`/networks/${server.uuid}`)).body.proxy_isolation;

  it("a deployment or proxy sync with isolation off resets the phase; back on, the proxy keeps the networks it routes those containers on", async () => {
    const prod = await m.environment("production");
    const envNet = `capstan-env-${prod.uuid}`;
    const servers: ServerFixture[] = [];
    const apps: string[] = [];
    for (const name of ["deployed", "acted", "idle"]) {
      const { server } = await m.server(`off-${name}`);
      servers.push(server);
      apps.push(await m.app(server, `off-${name}-app`, { fqdn: `https://${name}.example.test` }));
    }
    const [deployed, acted, idle] = servers as [ServerFixture, ServerFixture, ServerFixture];
    const [deployedApp, actedApp, idleApp] = apps as [string, string, string];
    // Fresh servers start cleaned: the proxy on the proxy network only.
    for (const app of apps) expect((await m.deploy(app)).proxy.networks).toEqual([PROXY_NET]);
    expect(await shown(deployed)).toEqual({ enabled: true, phase: "cleaned" });

    await m.t.restart(100, { PLATFORM_PROXY_ISOLATION: "false" });
    for (const s of servers) await m.reconnect(s);
    // Nothing written under the new setting yet: the recorded phase is still true.
    expect(await shown(deployed)).toEqual({ enabled: false, phase: "cleaned" });
    const off = await m.deploy(deployedApp);
    expect(off.run).toMatchObject({ network: envNet, networks: [], proxy_network: null });
    expect(off.proxy.networks).toEqual(["capstan", envNet]);
    expect(await shown(deployed)).toEqual({ enabled: false, phase: "none" });
    // An action's proxy sync (stop) puts the proxy back on the old networks too.
    expect((await m.team.api.post(`/applications/${actedApp}/stop`)).status).toBeLessThan(300);
    expect(await shown(acted)).toEqual({ enabled: false, phase: "none" });
    expect(await m.db.server.findUniqueOrThrow({ where: { id: idle.id } })).toMatchObject({ proxyIsolation: "cleaned" });

    await m.t.restart(100, { PLATFORM_PROXY_ISOLATION: "true" });
    for (const s of servers) await m.reconnect(s);
    // The container deployed while off is routed on its environment network: the proxy stays
    // there (and joins the proxy network) until migrate, redeploy and cleanup.
    expect(await shown(deployed)).toEqual({ enabled: true, phase: "none" });
    const on = await m.deploy(deployedApp);
    expect(on.proxy.networks).toEqual(["capstan", envNet, PROXY_NET]);
    expect(on.run.proxy_network).toBe(PROXY_NET);
    // Nothing ran on this one while isolation was off: its containers are still routed on the proxy network.
    expect(await shown(idle)).toEqual({ enabled: true, phase: "cleaned" });
    expect((await m.deploy(idleApp)).proxy.networks).toEqual([PROXY_NET]);
  });

  it("with network management switched off as well, the same", async () => {
    await m.t.restart(100, {}); // the instance's own settings, whatever the test before left; 100 ms: idle keep-alive connections see the close
    const { server } = await m.server("mgmt-off");
    const app = await m.app(server, "mgmt-off-app", { fqdn: "https://mgmt-off.example.test" });
    expect((await m.deploy(app)).proxy.networks).toEqual([PROXY_NET]);
    await m.t.restart(100, { PLATFORM_NETWORK_MANAGEMENT: "false", PLATFORM_PROXY_ISOLATION: "false" });
    await m.reconnect(server);
    expect((await m.deploy(app)).proxy.networks).toEqual(["capstan"]);
    expect(await shown(server)).toEqual({ enabled: false, phase: "none" });
  });
});

describe("proxy isolation on a server that ran resources before: migrate, redeploy, cleanup", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_PROXY_ISOLATION: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  /** Marks the server as having run deployments before isolation applied to it. */
  async function legacy(server: ServerFixture, appUuid: string) {
    const app = await m.db.application.findUniqueOrThrow({ where: { uuid: appUuid } });
    await m.db.deployment.create({
      data: { uuid: crypto.randomUUID(), teamId: app.teamId, applicationId: app.id, serverId: server.id, status: "finished", trigger: "api", startedAt: new Date(), finishedAt: new Date() },
    });
  }

  it("cleanup before migrate is refused (409)", async () => {
    const { server } = await m.server("mig-early");
    await legacy(server, await m.app(server, "early"));
    const r = await m.team.api.post(`/networks/${server.uuid}/proxy/cleanup`);
    expect(r.status).toBe(409);
    expect(r.body.message).toMatch(/has not been migrated/);
  });

  it("the proxy keeps its old networks until cleanup; migrate connects the proxy and the public containers; cleanup waits for redeploys", async () => {
    const { server, agent } = await m.server("mig");
    const prod = await m.environment("production");
    const envNet = `capstan-env-${prod.uuid}`;
    const pubApp = await m.app(server, "mig-public", { fqdn: "https://mig.example.test" });
    const internalApp = await m.app(server, "mig-internal");
    await legacy(server, pubApp);

    // Before migrate: the proxy network is added, the old networks stay (nothing stops routing),
    // among them the environment network of the public application.
    const before = await m.deploy(internalApp);
    expect(before.proxy.networks).toEqual(["capstan", envNet, PROXY_NET]);

    // What the engine runs: the public app's container still labelled with its environment network.
    let containers: ManagedContainer[] = [
      { id: "1", name: `${pubApp}-old`, image: "i", status: "running:healthy", labels: { "capstan.resource.uuid": pubApp, "capstan.domains": "mig.example.test", "capstan.proxy.network": envNet } },
      { id: "2", name: `${internalApp}-x`, image: "i", status: "running:healthy", labels: { "capstan.resource.uuid": internalApp, "capstan.domains": "", "capstan.proxy.network": "" } },
    ];
    agent.serve("containers.list", () => ({ ok: true, result: { containers } }));
    const ensured: JobEnvelope[] = [];
    agent.serve("network.ensure", (job) => {
      ensured.push(job);
      const n: EngineNetwork = { id: "proxy-net-id", name: PROXY_NET, driver: "bridge", scope: "local", internal: false, encrypted: false, labels: {}, subnet: null, gateway: null, containers: [] };
      return { ok: true, result: { networks: [n] } };
    });
    const connects: JobEnvelope[] = [];
    agent.serve("network.connect", (job) => {
      connects.push(job);
      return { ok: true, result: { changed: (job.payload as { containers: string[] }).containers } };
    });

    const migrate = await m.team.api.post(`/networks/${server.uuid}/proxy/migrate`);
    expect(migrate.status, JSON.stringify(migrate.body)).toBe(200);
    expect(migrate.body.data).toEqual({ network_uuid: expect.any(String), container_network_name: PROXY_NET, connected: ["capstan-proxy", `${pubApp}-old`] });
    expect(migrate.body.message).toMatch(/Redeploy every resource, then run proxy cleanup/);
    expect(ensured).toHaveLength(1);
    expect(connects[0]!.payload).toEqual({ network: PROXY_NET, containers: ["capstan-proxy", `${pubApp}-old`], disconnect: false });
    const proxyRow = await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name: PROXY_NET } });
    expect(proxyRow).toMatchObject({ status: "active", containerEngineId: "proxy-net-id", scope: "proxy" });

    // Migrated, not cleaned: still the old networks too (the environment's now has a public app).
    const afterMigrate = await m.deploy(pubApp);
    expect(afterMigrate.run).toMatchObject({ network: envNet, networks: [PROXY_NET], proxy_network: PROXY_NET });
    expect(afterMigrate.proxy.networks).toEqual(["capstan", envNet, PROXY_NET]);

    // The engine still reports the old container: cleanup refuses and names it.
    const early = await m.team.api.post(`/networks/${server.uuid}/proxy/cleanup`);
    expect(early.status).toBe(409);
    expect(early.body.message).toContain(`${pubApp}-old`);
    expect(connects.filter((j) => (j.payload as { disconnect: boolean }).disconnect)).toEqual([]);

    // Redeployed: the serving container is labelled with the proxy network.
    containers = [{ ...containers[0]!, name: `${pubApp}-new`, labels: { ...containers[0]!.labels, "capstan.proxy.network": PROXY_NET } }, containers[1]!];
    const cleanup = await m.team.api.post(`/networks/${server.uuid}/proxy/cleanup`);
    expect(cleanup.status, JSON.stringify(cleanup.body)).toBe(200);
    const leaves = connects.filter((j) => (j.payload as { disconnect: boolean }).disconnect).map((j) => j.payload);
    expect(leaves).toEqual([
      { network: "capstan", containers: ["capstan-proxy"], disconnect: true },
      { network: envNet, containers: ["capstan-proxy"], disconnect: true },
    ]);
    expect(cleanup.body.data).toEqual({ disconnected_from: ["capstan", envNet] });

    // From now on the proxy joins the proxy network only.
    const after = await m.deploy(internalApp);
    expect(after.proxy.networks).toEqual([PROXY_NET]);
  });

  it("migrate needs the server's agent (503)", async () => {
    const away = await m.world.server("mig-away");
    expect((await m.team.api.post(`/networks/${away.uuid}/proxy/migrate`)).status).toBe(503);
  });
});

describe("proxy isolation disabled", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("migrate and cleanup answer 409 naming the settings", async () => {
    const { server } = await m.server("no-proxy-iso");
    for (const path of ["migrate", "cleanup"]) {
      const r = await m.team.api.post(`/networks/${server.uuid}/proxy/${path}`);
      expect(r.status).toBe(409);
      expect(r.body.message).toMatch(/PLATFORM_PROXY_ISOLATION=true or PLATFORM_NETWORK_ISOLATION_MODE=strict/);
    }
  });
});

/** What the agent received, in the order it received it: jobs by type and name, cancels by job id. */
function arrivals(agent: ScriptedAgent): string[] {
  const seen: string[] = [];
  agent.socket.on(EV.job, (job: JobEnvelope) => seen.push(`job ${job.type} ${job.id}`));
  agent.socket.on(EV.jobCancel, (c: { id: string }) => seen.push(`cancel ${c.id}`));
  return seen;
}

describe("environment deletion and the deployments around it", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  const databaseIn = async (server: ServerFixture, environment: string, instant = true) => {
    const r = await m.team.api.post("/databases/postgresql", {
      project_uuid: m.world.projectUuid,
      environment_name: environment,
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      instant_deploy: instant,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.uuid as string;
  };

  it("a network a deployment records while the deletion is being prepared is removed with the environment, not left behind", async () => {
    const { server, agent } = await m.server("race-env");
    const racy = await m.environment("racy");
    await m.app(server, "racy-app", { environment: "racy" });
    const svc = m.t.instance.services.networks;
    const original = svc.planEnvironmentRemoval;
    const name = `capstan-env-${racy.uuid}`;
    svc.planEnvironmentRemoval = async function (this: typeof svc, ...args: Parameters<typeof original>) {
      const plan = await original.apply(this, args);
      // The environment's first deployment records its network right now.
      await m.db.network.create({
        data: { uuid: crypto.randomUUID(), teamId: m.team.teamId, serverId: server.id, name, scope: "environment", environmentId: racy.id, driver: "bridge", status: "pending" },
      });
      return plan;
    } as typeof original;
    try {
      expect((await m.team.api.delete(`/projects/${m.world.projectUuid}/environments/racy`)).status).toBe(200);
    } finally {
      svc.planEnvironmentRemoval = original;
    }
    expect(await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name } })).toMatchObject({ status: "deleted", environmentId: null });
    await until(async () => agent.jobs.some((j) => j.type === "network.remove" && (j.payload as { name: string }).name === name));
  });

  it("an application created while the deletion is being prepared refuses the deletion (409, nothing deleted); a retry removes both", async () => {
    const { server, agent } = await m.server("late-app-env");
    await m.environment("late");
    const first = await m.app(server, "late-first", { environment: "late" });
    const svc = m.t.instance.services.applications;
    const original = svc.planRemoval;
    let second = "";
    svc.planRemoval = async function (this: typeof svc, ...args: Parameters<typeof original>) {
      const plan = await original.apply(this, args);
      second = await m.app(server, "late-second", { environment: "late" });
      return plan;
    } as typeof original;
    let refused;
    try {
      refused = await m.team.api.delete(`/projects/${m.world.projectUuid}/environments/late`);
    } finally {
      svc.planRemoval = original;
    }
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.message).toMatch(/created in this environment while it was being deleted/);
    expect((await m.team.api.get(`/applications/${first}`)).status).toBe(200);
    expect((await m.team.api.get(`/applications/${second}`)).status).toBe(200);
    expect(await m.db.job.count({ where: { serverId: server.id, type: "app.action" } })).toBe(0);

    expect((await m.team.api.delete(`/projects/${m.world.projectUuid}/environments/late`)).status).toBe(200);
    await until(async () => agent.jobs.filter((j) => j.type === "app.action").length === 2, 10_000, "both applications' removals delivered");
    const removed = agent.jobs.filter((j) => j.type === "app.action").map((j) => (j.payload as { app: { uuid: string } }).app.uuid);
    expect(removed.sort()).toEqual([first, second].sort());
  });

  it("its databases' deployments still queued or running are cancelled with it; the agent hears of the cancel before the network's removal", async () => {
    const { server, agent } = await m.server("cancel-env");
    const seen = arrivals(agent);
    agent.serve("db.deploy", () => ({ hold: true }));
    const doomed = await m.environment("doomed-db");
    await databaseIn(server, "doomed-db");
    await until(async () => agent.jobs.some((j) => j.type === "db.deploy"));
    const running = agent.jobs.find((j) => j.type === "db.deploy")!;
    // Another server whose agent is away: its database's deployment stays queued.
    const away = await m.world.server("cancel-away");
    await databaseIn(away, "doomed-db");
    const queued = await m.db.job.findFirstOrThrow({ where: { serverId: away.id, type: "db.deploy" } });
    expect(queued.status).toBe("queued");

    expect((await m.team.api.delete(`/projects/${m.world.projectUuid}/environments/doomed-db`)).status).toBe(200);
    const remove = () => agent.jobs.find((j) => j.type === "network.remove" && (j.payload as { name: string }).name === `capstan-env-${doomed.uuid}`);
    await until(async () => remove() !== undefined);
    expect(await m.db.job.findUniqueOrThrow({ where: { id: running.id } })).toMatchObject({ status: "cancelled", error: "cancelled: the database's environment was deleted" });
    expect(await m.db.job.findUniqueOrThrow({ where: { id: queued.id } })).toMatchObject({ status: "cancelled" });
    expect(seen.indexOf(`cancel ${running.id}`)).toBeGreaterThanOrEqual(0);
    expect(seen.indexOf(`cancel ${running.id}`)).toBeLessThan(seen.indexOf(`job network.remove ${remove()!.id}`));
  });
});

describe.skipIf(!process.env.CAPSTAN_TEST_PG_URL)("environment deletion racing a deployment's start (PostgreSQL, network management off)", () => {
  const m = new ModeWorld({});
  beforeAll(() => m.init());
  afterAll(() => m.close());

  /** Until `n` backends of this database wait on a lock (a transaction blocked where the test means it to be). */
  const lockWaiters = (n: number, what: string) =>
    until(
      async () => {
        const [row] = await m.db.$queryRawUnsafe<{ n: bigint }[]>(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`);
        return Number(row!.n) >= n;
      },
      20_000,
      what,
    );

  it("a deploy job bound while the deletion is under way is cancelled with the environment, not left to run after the removal", async () => {
    const { server, agent } = await m.server("race-start");
    agent.serve("app.deploy", () => ({ hold: true }));
    await m.environment("racing");
    const app = await m.app(server, "racing-app", { environment: "racing" });

    // A trigger stops the deployment's start transaction right after it bound its job, until
    // the test lets go of an advisory lock it holds itself: the job is written, not committed.
    const HOLD = 0x484f4c44;
    await m.db.$executeRawUnsafe(`CREATE FUNCTION capstan_test_hold() RETURNS trigger AS $$ BEGIN PERFORM pg_advisory_xact_lock(${HOLD}, 1); RETURN NEW; END $$ LANGUAGE plpgsql`);
    await m.db.$executeRawUnsafe(`CREATE TRIGGER capstan_test_hold AFTER UPDATE OF "jobId" ON "Deployment" FOR EACH ROW WHEN (NEW."jobId" IS NOT NULL) EXECUTE FUNCTION capstan_test_hold()`);
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let held!: () => void;
    const holds = new Promise<void>((r) => (held = r));
    const holding = m.db.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe(`SELECT pg_advisory_xact_lock(${HOLD}, 1)`);
        held();
        await released;
      },
      { timeout: 60_000 },
    );
    await holds;

    // The deployment is asked for after the deletion checked that none is open, and before its transaction.
    const svc = m.t.instance.services.applications;
    const original = svc.planRemoval;
    let deployment = "";
    svc.planRemoval = async function (this: typeof svc, ...args: Parameters<typeof original>) {
      const plan = await original.apply(this, args);
      deployment = await m.world.deploy(app, undefined, m.team.api);
      await lockWaiters(1, "the deployment's start held after binding its job");
      return plan;
    } as typeof original;
    try {
      const deleting = m.team.api.delete(`/projects/${m.world.projectUuid}/environments/racing`);
      await lockWaiters(2, "the deletion waiting for the deployment's start");
      release();
      await holding;
      const r = await deleting;
      expect(r.status, JSON.stringify(r.body)).toBe(200);
    } finally {
      svc.planRemoval = original;
      release();
      await m.db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS capstan_test_hold ON "Deployment"`);
    }

    // The only deployment of this server (job payloads are encrypted at rest).
    expect(deployment).not.toBe("");
    const jobs = await m.db.job.findMany({ where: { serverId: server.id, type: "app.deploy" } });
    expect(jobs, "the deployment's job was written").toHaveLength(1);
    const [job] = jobs;
    expect(job).toMatchObject({ status: "cancelled", error: "cancelled: the application's environment was deleted" });
    await until(async () => agent.jobs.some((j) => j.type === "app.action"), 10_000, "the application's removal delivered");
  });
});

describe("a network record is pending only while a job that ensures it exists", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("a deployment that fails before its job is written records nothing", async () => {
    const { server } = await m.server("pending-early");
    const env = await m.environment("early");
    const app = await m.app(server, "early-app", { environment: "early" });
    // The health check needs a port: the payload fails after its networks were planned.
    await m.db.application.update({ where: { uuid: app }, data: { portsExposes: "", healthCheckEnabled: true, healthCheckPort: null } });
    const failed = await m.deployFails(app);
    expect(failed.reason).toMatch(/health check needs a port/);
    expect(await m.db.network.findMany({ where: { serverId: server.id, name: `capstan-env-${env.uuid}` } })).toEqual([]);
  });

  it("a deployment whose job fails leaves its new network pending no longer: a network.ensure verifies it", async () => {
    const server = await m.world.server("pending-failed");
    const agent = await m.world.agent(server, () => ({ ok: false, error: "image pull failed" }));
    const ensures: JobEnvelope[] = [];
    agent.serve("network.ensure", (job) => {
      ensures.push(job);
      const specs = (job.payload as { networks: NetworkSpec[] }).networks;
      return { ok: true, result: { networks: specs.map((n): EngineNetwork => ({ id: `id-${n.name}`, name: n.name, driver: n.driver, scope: "local", internal: false, encrypted: false, labels: n.labels, subnet: null, gateway: null, containers: [] })) } };
    });
    const env = await m.environment("failing");
    const app = await m.app(server, "failing-app", { environment: "failing" });
    const failed = await m.deployFails(app);
    expect(failed.reason).toMatch(/image pull failed/);
    await until(async () => ensures.length === 1);
    expect((ensures[0]!.payload as { networks: NetworkSpec[] }).networks).toEqual([envSpec(env.uuid)]);
    await until(async () => (await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name: `capstan-env-${env.uuid}` } })).status === "active");
    expect(await m.db.network.findFirstOrThrow({ where: { serverId: server.id, name: `capstan-env-${env.uuid}` } })).toMatchObject({ containerEngineId: `id-capstan-env-${env.uuid}` });
  });
});

describe("proxy isolation on a server whose first resource is a database", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "strict" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("starts cleaned up: databases are never routed, so the proxy never joins the networks that hold them", async () => {
    const { server, agent } = await m.server("db-first");
    agent.serve("db.deploy", () => ({ ok: true, result: { container: "c", status: "running:healthy" } }));
    const prod = await m.environment("production");
    const created = await m.team.api.post("/databases/postgresql", {
      project_uuid: m.world.projectUuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      instant_deploy: true,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await until(async () => (await m.db.network.findFirst({ where: { serverId: server.id, name: `capstan-env-${prod.uuid}` } }))?.status === "active");
    const p = await m.deploy(await m.app(server, "after-db", { fqdn: "https://after-db.example.test" }));
    expect(p.proxy).toMatchObject({ networks: [PROXY_NET], ensure_networks: [proxySpec()] });
    expect((await m.db.server.findUniqueOrThrow({ where: { id: server.id } })).proxyIsolation).toBe("cleaned");
  });
});

describe("proxy cleanup and deployments around it", () => {
  const m = new ModeWorld({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_PROXY_ISOLATION: "true" });
  beforeAll(() => m.init());
  afterAll(() => m.close());

  it("a deployment prepared during the disconnects puts the proxy on the proxy network only; one prepared before and ending after is undone", async () => {
    const server = await m.world.server("cleanup-race");
    let holdDeploys = false;
    const agent = await m.world.agent(server, (job) => {
      m.deploys.push(job);
      return holdDeploys ? { hold: true } : { ok: true, result: deployResult(null, "running:healthy") };
    });
    const prod = await m.environment("production");
    const envNet = `capstan-env-${prod.uuid}`;
    const pubApp = await m.app(server, "cr-public", { fqdn: "https://cr.example.test" });
    const internalApp = await m.app(server, "cr-internal");
    const slowApp = await m.app(server, "cr-slow");
    // Deployed before isolation applied: the server has to be migrated.
    const appRow = await m.db.application.findUniqueOrThrow({ where: { uuid: pubApp } });
    await m.db.deployment.create({
      data: { uuid: crypto.randomUUID(), teamId: appRow.teamId, applicationId: appRow.id, serverId: server.id, status: "finished", trigger: "api", startedAt: new Date(), finishedAt: new Date() },
    });
    agent.serve("network.ensure", (job) => ({
      ok: true,
      result: { networks: (job.payload as { networks: NetworkSpec[] }).networks.map((n): EngineNetwork => ({ id: `id-${n.name}`, name: n.name, driver: "bridge", scope: "local", internal: false, encrypted: false, labels: {}, subnet: null, gateway: null, containers: [] })) },
    }));
    agent.serve("containers.list", () => ({
      ok: true,
      result: { containers: [{ id: "1", name: `${pubApp}-new`, image: "i", status: "running:healthy", labels: { "capstan.resource.uuid": pubApp, "capstan.domains": "cr.example.test", "capstan.proxy.network": PROXY_NET } }] },
    }));
    const connects: JobEnvelope[] = [];
    let holdNext = true;
    agent.serve("network.connect", (job) => {
      connects.push(job);
      const p = job.payload as { containers: string[]; disconnect: boolean };
      if (p.disconnect && holdNext) {
        holdNext = false;
        return { hold: true };
      }
      return { ok: true, result: { changed: p.containers } };
    });
    expect((await m.team.api.post(`/networks/${server.uuid}/proxy/migrate`)).status).toBe(200);
    expect((await m.deploy(pubApp)).proxy.networks).toEqual(["capstan", envNet, PROXY_NET]);

    // A deployment whose job runs during the cleanup, with the proxy settings of before.
    holdDeploys = true;
    const slow = await m.world.deploy(slowApp, undefined, m.team.api);
    await until(async () => m.deploys.some((j) => (j.payload as { deployment_uuid: string }).deployment_uuid === slow));
    const slowJob = m.deploys.find((j) => (j.payload as { deployment_uuid: string }).deployment_uuid === slow)!;
    expect(DeployPayload.parse(slowJob.payload).proxy.networks).toEqual(["capstan", envNet, PROXY_NET]);
    holdDeploys = false;

    const cleanup = m.team.api.post(`/networks/${server.uuid}/proxy/cleanup`);
    await until(async () => connects.some((j) => (j.payload as { disconnect: boolean }).disconnect));
    const held = connects.find((j) => (j.payload as { disconnect: boolean }).disconnect)!;
    // Prepared while the proxy is being disconnected: the proxy network only.
    expect((await m.deploy(internalApp)).proxy.networks).toEqual([PROXY_NET]);
    await agent.outcome({ id: held.id, attempt: held.attempt, ok: true, result: { changed: ["capstan-proxy"] } });
    expect((await cleanup).status).toBe(200);
    const disconnectsAfterCleanup = connects.filter((j) => (j.payload as { disconnect: boolean }).disconnect).length;

    // The slow deployment ends now: its proxy sync put the proxy back on the old networks.
    await agent.outcome({ id: slowJob.id, attempt: slowJob.attempt, ok: true, result: deployResult(null, "running:healthy") });
    await until(async () => connects.filter((j) => (j.payload as { disconnect: boolean }).disconnect).length === disconnectsAfterCleanup + 2);
    expect(connects.slice(-2).map((j) => j.payload)).toEqual([
      { network: "capstan", containers: ["capstan-proxy"], disconnect: true },
      { network: envNet, containers: ["capstan-proxy"], disconnect: true },
    ]);
  });
});
