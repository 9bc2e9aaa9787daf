import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FEATURES } from "@capstan/shared";
import { startTestInstance, type ApiResponse, type TeamFixture, type TestInstance } from "./harness.js";
import { startReplica, type Replica } from "./support/replica.js";
import { startRegistry, type RegistryServer } from "../support/registry-server.js";
import { freePort } from "../support/ports.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent, sampleFacts, type ScriptedAgent } from "./support/fake-agent.js";

/**
 * /registries (spec 4.9, issue 18): CRUD with the seven types' credential shapes, sealed and
 * never returned; one default per team; the paid feature gate; and the connection test's real
 * Docker Registry V2 handshake against Debian's docker-registry 2.8.2 with htpasswd (basic)
 * authentication and with bearer tokens from a token server (test/support/registry-server.ts).
 * Instance `t` allows private endpoints (the registries listen on 127.0.0.1); `strict` is a second
 * replica on the same database that does not, as a default production instance.
 */
let t: TestInstance;
let strict: Replica;
let team: TeamFixture;
let basicRegistry: RegistryServer;
let tokenRegistry: RegistryServer;
/** Every response body this file received, to check no secret ever appears in one. */
const seen: string[] = [];

const track = async <T = any>(p: Promise<ApiResponse<T>>): Promise<ApiResponse<T>> => {
  const r = await p;
  seen.push(JSON.stringify(r.body ?? null));
  return r;
};

const PASSWORD = `pw-${randomBytes(12).toString("hex")}`;
const TOKEN_PASSWORD = `tk-${randomBytes(12).toString("hex")}`;
const CLOUD_SECRET = `cs-${randomBytes(16).toString("hex")}`;
const CLOUD_KEY_ID = `AKIA${randomBytes(8).toString("hex").toUpperCase()}`;
const secrets = [PASSWORD, TOKEN_PASSWORD, CLOUD_SECRET, CLOUD_KEY_ID];
/** The control plane's log (debug level) of this file's instance. */
const logLines: string[] = [];

const custom = (extra: Record<string, unknown> = {}) => ({
  name: "private",
  type: "custom",
  url: "https://registry.example.com",
  credentials: { username: "ci", password: PASSWORD },
  ...extra,
});

beforeAll(async () => {
  [basicRegistry, tokenRegistry] = await Promise.all([
    startRegistry("basic", { username: "alice", password: PASSWORD }),
    startRegistry("token", { username: "bob", password: TOKEN_PASSWORD }),
  ]);
  // cloud_a's token API: a closed port (the exchange itself is in registries-cloud-a.test.ts).
  t = await startTestInstance(
    { PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true", PLATFORM_REGISTRY_CLOUD_A_ENDPOINT: `http://127.0.0.1:${await freePort()}` },
    { logTo: { write: (line) => void logLines.push(line) } },
  );
  strict = await startReplica(t, { allowPrivateEndpoints: false });
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["REGISTRY_MANAGEMENT"] });
}, 180_000);
afterAll(async () => {
  await strict?.close();
  await t?.close();
  await basicRegistry?.stop();
  await tokenRegistry?.stop();
});

describe("the feature gate", () => {
  it("answers 402 naming REGISTRY_MANAGEMENT on every route for a team without it, and creates nothing", async () => {
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: FEATURES.filter((f) => f !== "REGISTRY_MANAGEMENT") });
    for (const [method, path] of [
      ["get", "/registries"],
      ["post", "/registries"],
      ["get", "/registries/1"],
      ["patch", "/registries/1"],
      ["delete", "/registries/1"],
      ["post", "/registries/1/test"],
    ] as const) {
      const res = await (other.api as any)[method](path, method === "post" || method === "patch" ? custom() : undefined);
      expect(res.status, `${method} ${path}`).toBe(402);
      expect(res.body.message).toMatch(/REGISTRY_MANAGEMENT/);
    }
    expect(await t.instance.database.prisma.registry.count({ where: { teamId: other.teamId } })).toBe(0);
  });
});

describe("CRUD", () => {
  it("creates every type with its credentials; reads, lists, changes and deletes; secrets never come back", async () => {
    const bodies = [
      custom({ name: "hub", type: "containerhub", url: "docker.io" }),
      custom({ name: "code-a", type: "repohost_a", url: "ghcr.io" }),
      custom({ name: "code-b", type: "repohost_b", url: "registry.gitlab.example" }),
      custom({ name: "hosted", type: "registry_q", url: "quay.example" }),
      custom({ name: "any", type: "custom", url: "http://10.0.0.5:5000" }),
      custom({ name: "cloud-b", type: "cloud_b", url: "https://acme.azurecr.example", credentials: { username: "00000000-1111-2222-3333-444444444444", password: PASSWORD } }),
      custom({
        name: "cloud-a",
        type: "cloud_a",
        url: "123456789012.dkr.ecr.eu-central-1.amazonaws.example",
        credentials: { cloud_access_key_id: CLOUD_KEY_ID, cloud_secret_access_key: CLOUD_SECRET, cloud_region: "eu-central-1" },
      }),
    ];
    const ids: number[] = [];
    for (const body of bodies) {
      const res = await track(team.api.post("/registries", body));
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body).toEqual({ message: expect.any(String), data: { id: expect.any(Number), name: body.name, type: body.type } });
      ids.push(res.body.data.id);
    }
    const list = await track(team.api.get("/registries"));
    expect(list.status).toBe(200);
    expect(list.body.data.map((r: any) => [r.name, r.type, r.url, r.username, r.is_default, r.cloud_region])).toEqual([
      ["hub", "containerhub", "https://docker.io", "ci", false, null],
      ["code-a", "repohost_a", "https://ghcr.io", "ci", false, null],
      ["code-b", "repohost_b", "https://registry.gitlab.example", "ci", false, null],
      ["hosted", "registry_q", "https://quay.example", "ci", false, null],
      ["any", "custom", "http://10.0.0.5:5000", "ci", false, null],
      ["cloud-b", "cloud_b", "https://acme.azurecr.example", "00000000-1111-2222-3333-444444444444", false, null],
      ["cloud-a", "cloud_a", "https://123456789012.dkr.ecr.eu-central-1.amazonaws.example", `****${CLOUD_KEY_ID.slice(-4)}`, false, "eu-central-1"],
    ]);
    const detail = await track(team.api.get(`/registries/${ids[0]}`));
    expect(detail.body).toEqual({
      id: ids[0],
      name: "hub",
      type: "containerhub",
      url: "https://docker.io",
      username: "ci",
      is_default: false,
      server_count: 0,
      last_synced_at: null,
      cloud_region: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      servers: [],
    });

    // Sealed at rest: no column of any row holds a secret in plain text.
    const rows = await t.instance.database.prisma.registry.findMany({ where: { teamId: team.teamId } });
    for (const secret of secrets) expect(JSON.stringify(rows)).not.toContain(secret);
    expect(JSON.parse(t.instance.box.open(rows.find((r) => r.name === "cloud-a")!.credentials))).toEqual({
      cloud_access_key_id: CLOUD_KEY_ID,
      cloud_secret_access_key: CLOUD_SECRET,
      cloud_region: "eu-central-1",
    });

    const patched = await track(team.api.patch(`/registries/${ids[1]}`, { name: "code-a2", credentials: { username: "robot", password: `${PASSWORD}-2` } }));
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data).toMatchObject({ id: ids[1], name: "code-a2", username: "robot", url: "https://ghcr.io" });
    const row = await t.instance.database.prisma.registry.findUniqueOrThrow({ where: { id: ids[1] } });
    expect(JSON.parse(t.instance.box.open(row.credentials))).toEqual({ username: "robot", password: `${PASSWORD}-2` });

    for (const id of ids) expect((await track(team.api.delete(`/registries/${id}`))).status).toBe(200);
    expect((await team.api.get(`/registries/${ids[0]}`)).status).toBe(404);
    expect((await team.api.get("/registries")).body.data).toEqual([]);
  });

  it("keeps at most one default per team: a new default moves it; false clears it", async () => {
    const a = (await track(team.api.post("/registries", custom({ name: "a", is_default: true })))).body.data.id;
    const b = (await track(team.api.post("/registries", custom({ name: "b", is_default: true })))).body.data.id;
    const defaults = async () => (await team.api.get("/registries")).body.data.filter((r: any) => r.is_default).map((r: any) => r.id);
    expect(await defaults()).toEqual([b]);
    await track(team.api.patch(`/registries/${a}`, { is_default: true }));
    expect(await defaults()).toEqual([a]);
    await track(team.api.patch(`/registries/${a}`, { is_default: false }));
    expect(await defaults()).toEqual([]);
    // Another team's default is its own.
    const other = await t.newTeam();
    await t.instance.admin.setTeamFeatures(other.teamId, { enable: ["REGISTRY_MANAGEMENT"] });
    await track(team.api.patch(`/registries/${b}`, { is_default: true }));
    const theirs = (await track(other.api.post("/registries", custom({ name: "theirs", is_default: true })))).body.data.id;
    expect(await defaults()).toEqual([b]);
    expect((await other.api.get(`/registries/${theirs}`)).body.is_default).toBe(true);
    await team.api.delete(`/registries/${a}`);
    await team.api.delete(`/registries/${b}`);
  });
});

describe("bad input", () => {
  const cases: [string, Record<string, unknown>, string[]][] = [
    ["no password", custom({ credentials: { username: "ci" } }), ["credentials.password"]],
    ["no credentials at all", custom({ credentials: {} }), ["credentials.username", "credentials.password"]],
    ["a cloud_a field on a username type", custom({ credentials: { username: "ci", password: "x", cloud_region: "us-east-1" } }), ["credentials.cloud_region"]],
    ["username on cloud_a", custom({ type: "cloud_a", credentials: { username: "ci", password: "x" } }), ["credentials.username", "credentials.password", "credentials.cloud_access_key_id", "credentials.cloud_secret_access_key", "credentials.cloud_region"]],
    ["a malformed access key id", custom({ type: "cloud_a", credentials: { cloud_access_key_id: "short", cloud_secret_access_key: "s", cloud_region: "us-east-1" } }), ["credentials.cloud_access_key_id"]],
    ["a malformed region", custom({ type: "cloud_a", credentials: { cloud_access_key_id: CLOUD_KEY_ID, cloud_secret_access_key: "s", cloud_region: "Mars" } }), ["credentials.cloud_region"]],
    ["an unknown credential field", custom({ credentials: { username: "ci", password: "x", token: "t" } }), ["credentials.token"]],
    ["a line break in the password", custom({ credentials: { username: "ci", password: "a\nb" } }), ["credentials.password"]],
    ["a space in the username", custom({ credentials: { username: "c i", password: "x" } }), ["credentials.username"]],
    ["an unknown type", custom({ type: "dockerhub" }), ["type"]],
    ["a URL with a path", custom({ url: "https://registry.example.com/v2/" }), ["url"]],
    ["a URL with credentials", custom({ url: "https://ci:pw@registry.example.com" }), ["url"]],
    ["a URL of another scheme", custom({ url: "ftp://registry.example.com" }), ["url"]],
    ["an unknown field", custom({ server_uuid: "x" }), ["server_uuid"]],
    ["no name", custom({ name: "" }), ["name"]],
  ];
  for (const [what, body, fields] of cases) {
    it(`422 for ${what}, naming ${fields.join(", ")}; nothing created`, async () => {
      const before = await t.instance.database.prisma.registry.count();
      const res = await track(team.api.post("/registries", body));
      expect(res.status, JSON.stringify(res.body)).toBe(422);
      expect(Object.keys(res.body.errors).sort()).toEqual([...fields].sort());
      expect(await t.instance.database.prisma.registry.count()).toBe(before);
    });
  }

  it("PATCH checks credentials against the registry's type and changes nothing on a 422", async () => {
    const id = (await track(team.api.post("/registries", custom({ name: "typed", type: "cloud_b" })))).body.data.id;
    const before = await t.instance.database.prisma.registry.findUniqueOrThrow({ where: { id } });
    for (const body of [
      { credentials: { cloud_access_key_id: CLOUD_KEY_ID, cloud_secret_access_key: "s", cloud_region: "us-east-1" } },
      { name: "renamed", credentials: { username: "only" } },
      {},
      { type: "custom" },
      { url: "https://x.example/path" },
    ]) {
      const res = await track(team.api.patch(`/registries/${id}`, body));
      expect(res.status, JSON.stringify(body)).toBe(422);
    }
    expect(await t.instance.database.prisma.registry.findUniqueOrThrow({ where: { id } })).toEqual(before);
    await team.api.delete(`/registries/${id}`);
  });

  it("refuses loopback, link-local and metadata URLs unless the instance allows private endpoints", async () => {
    const api = strict.api(team.token);
    for (const url of ["http://127.0.0.1:5000", "localhost:5000", "http://169.254.169.254", "http://[::1]:5000"]) {
      const res = await track(api.post("/registries", custom({ url })));
      expect(res.status, url).toBe(422);
      expect(res.body.errors.url[0]).toMatch(/PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
    }
    // Private networks are where self-hosted registries live.
    const ok = await track(api.post("/registries", custom({ name: "lan", url: "http://10.1.2.3:5000" })));
    expect(ok.status).toBe(201);
    await team.api.delete(`/registries/${ok.body.data.id}`);
  });
});

describe("POST /registries/{id}/test: the V2 login handshake against a real registry", () => {
  const create = async (body: Record<string, unknown>) => (await track(team.api.post("/registries", body))).body.data.id as number;
  const test = async (id: number, api = team.api) => {
    const res = await track(api.post(`/registries/${id}/test`));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };

  it("basic (htpasswd): the right login authenticates, a wrong one fails with the registry's reason", async () => {
    const good = await create(custom({ name: "basic-good", url: basicRegistry.url, credentials: { username: "alice", password: PASSWORD } }));
    expect(await test(good)).toEqual({ message: expect.any(String), authenticated: true });
    const bad = await create(custom({ name: "basic-bad", url: basicRegistry.url, credentials: { username: "alice", password: `${PASSWORD}-wrong` } }));
    const failed = await test(bad);
    expect(failed).toEqual({ message: expect.any(String), authenticated: false, error: expect.stringMatching(/401.*authentication required/) });
    const stranger = await create(custom({ name: "basic-stranger", url: basicRegistry.url, credentials: { username: "mallory", password: PASSWORD } }));
    expect((await test(stranger)).authenticated).toBe(false);
  });

  it("bearer token: the realm the registry names issues a token for the right login; a wrong one fails with the token service's reason", async () => {
    const before = { ...tokenRegistry.tokens! };
    const good = await create(custom({ name: "token-good", url: tokenRegistry.url, credentials: { username: "bob", password: TOKEN_PASSWORD } }));
    expect(await test(good)).toEqual({ message: expect.any(String), authenticated: true });
    expect(tokenRegistry.tokens!.issued).toBe(before.issued + 1);
    const bad = await create(custom({ name: "token-bad", url: tokenRegistry.url, credentials: { username: "bob", password: "nope" } }));
    const failed = await test(bad);
    expect(failed.authenticated).toBe(false);
    expect(failed.error).toMatch(/token service .*401.*incorrect username or password/);
    expect(tokenRegistry.tokens!.refused).toBe(before.refused + 1);
  });

  it("an address that does not answer, and one that is not a registry, fail with the reason", async () => {
    const closed = await create(custom({ name: "closed", url: `http://127.0.0.1:${await freePort()}` }));
    expect(await test(closed)).toEqual({ message: expect.any(String), authenticated: false, error: expect.stringMatching(/ECONNREFUSED/) });
  });

  it("the connect-time guard refuses loopback addresses on an instance that does not allow private endpoints", async () => {
    // Saved where private endpoints are allowed, tested through a replica where they are not.
    const id = await create(custom({ name: "guarded", url: basicRegistry.url, credentials: { username: "alice", password: PASSWORD } }));
    const r = await test(id, strict.api(team.token));
    expect(r.authenticated).toBe(false);
    expect(r.error).toMatch(/PLATFORM_ALLOW_PRIVATE_ENDPOINTS/);
  });

  it("cloud_a whose token API does not answer: not authenticated, with the reason (registries-cloud-a.test.ts has the exchange)", async () => {
    const id = await create(
      custom({ name: "cloud-a-test", type: "cloud_a", url: basicRegistry.url, credentials: { cloud_access_key_id: CLOUD_KEY_ID, cloud_secret_access_key: CLOUD_SECRET, cloud_region: "us-east-1" } }),
    );
    const r = await test(id);
    expect(r).toEqual({ message: expect.any(String), authenticated: false, error: expect.stringMatching(/ECONNREFUSED/) });
  });

  it("members read registries but may not test, change or delete them", async () => {
    const id = await create(custom({ name: "members", url: basicRegistry.url, credentials: { username: "alice", password: PASSWORD } }));
    const member = await t.newMember(team.teamId, "member");
    const api = strict.api(member.token);
    expect((await track(api.get(`/registries/${id}`))).status).toBe(200);
    expect((await track(api.post(`/registries/${id}/test`))).status).toBe(403);
    expect((await track(api.patch(`/registries/${id}`, { name: "x" }))).status).toBe(403);
    expect((await track(api.delete(`/registries/${id}`))).status).toBe(403);
  });
});

describe("server assignment, sync and logout (with scripted agents)", () => {
  const keys = new KeyFactory();
  const agents: ScriptedAgent[] = [];
  afterAll(() => {
    for (const a of agents) a.close();
    keys.cleanup();
  });
  const until = async (fn: () => Promise<boolean>, ms = 10_000) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      if (await fn()) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error("condition not met in time");
  };
  /** The next registry job an agent gets (the server.prepare of its hello is not this file's business). */
  async function nextRegistryJob(agent: ScriptedAgent) {
    for (;;) {
      const job = await agent.nextJob();
      if (job.type.startsWith("registry.")) return job;
    }
  }
  async function serverWithAgent(api = team.api, name = "web") {
    const key = (await api.post("/security/keys", { name: `${name}-key`, private_key: (await keys.generate("ed25519")).privateKey })).body;
    const server = (await api.post("/servers", { name, ip: "10.0.0.5", private_key_uuid: key.uuid })).body;
    const agent = await connectAgent(t.url, server.agent_token);
    await agent.hello();
    agents.push(agent);
    const id = (await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: server.uuid } })).id;
    return { uuid: server.uuid as string, id, agent };
  }

  it("assigns servers by uuid or integer id; another team's server is a 404 for the whole request and nothing changes", async () => {
    const [a, b] = [await serverWithAgent(team.api, "assign-a"), await serverWithAgent(team.api, "assign-b")];
    const other = await t.newTeam();
    const foreign = await serverWithAgent(other.api, "foreign");
    const id = (await track(team.api.post("/registries", custom({ name: "assigned", url: basicRegistry.url })))).body.data.id;
    const patched = await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid, b.id] }));
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body.data.server_count).toBe(2);
    expect(patched.body.data.servers.map((x: any) => [x.uuid, x.id, x.sync_status, x.synced_at])).toEqual([
      [a.uuid, a.id, "pending", null],
      [b.uuid, b.id, "pending", null],
    ]);
    const before = await t.instance.database.prisma.registryServer.findMany({ where: { registryId: id } });
    for (const server_ids of [[foreign.uuid], [foreign.id], [a.uuid, foreign.uuid], [b.id, foreign.id], ["no-such-server"], [999_999]]) {
      const res = await track(team.api.patch(`/registries/${id}`, { name: "renamed", server_ids }));
      expect(res.status, JSON.stringify(server_ids)).toBe(404);
    }
    expect(await t.instance.database.prisma.registryServer.findMany({ where: { registryId: id } })).toEqual(before);
    expect((await team.api.get(`/registries/${id}`)).body.name).toBe("assigned");
    expect((await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid, a.uuid] }))).status).toBe(422);
    // Its uuid and its integer id name one server.
    expect((await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid, a.id] }))).body.data.server_count).toBe(1);
  });

  it("sync dispatches a login job per assigned server, with the login only in the (sealed) payload; outcomes set each server's status", async () => {
    const [a, b] = [await serverWithAgent(team.api, "sync-a"), await serverWithAgent(team.api, "sync-b")];
    const id = (await track(team.api.post("/registries", custom({ name: "synced", url: basicRegistry.url, credentials: { username: "alice", password: PASSWORD } })))).body.data.id;
    await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid, b.uuid] }));
    const res = await track(team.api.post(`/registries/${id}/sync`));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: "Sync dispatched for 2 server(s).", count: 2 });
    const [jobA, jobB] = [await nextRegistryJob(a.agent), await nextRegistryJob(b.agent)];
    expect(jobA.type).toBe("registry.login");
    expect(jobA.payload).toEqual({ registry: basicRegistry.host, username: "alice", password: PASSWORD, fingerprint: expect.stringMatching(/^[0-9a-f]{16}$/), is_default: false });
    // At rest the payload is sealed: no job row holds the password.
    expect(JSON.stringify(await t.instance.database.prisma.job.findMany({ where: { id: { in: [jobA.id, jobB.id] } } }))).not.toContain(PASSWORD);
    expect((await team.api.get(`/registries/${id}`)).body.servers.map((x: any) => x.sync_status)).toEqual(["syncing", "syncing"]);
    const fingerprint = (jobA.payload as { fingerprint: string }).fingerprint;
    await a.agent.outcome({ id: jobA.id, attempt: jobA.attempt, ok: true, result: { registry: basicRegistry.host, fingerprint, status: "Login Succeeded" } });
    await b.agent.outcome({ id: jobB.id, attempt: jobB.attempt, ok: false, error: "log in to 127.0.0.1: 401 Unauthorized" });
    await until(async () => (await team.api.get(`/registries/${id}`)).body.servers.every((x: any) => x.sync_status !== "syncing"));
    const detail = await track(team.api.get(`/registries/${id}`));
    expect(detail.body.last_synced_at).not.toBeNull();
    expect(detail.body.servers).toEqual([
      { id: a.id, uuid: a.uuid, name: "sync-a", sync_status: "synced", synced_at: expect.any(String), error: null, fingerprint, drift: false },
      { id: b.id, uuid: b.uuid, name: "sync-b", sync_status: "failed", synced_at: null, error: "log in to 127.0.0.1: 401 Unauthorized", fingerprint: null, drift: false },
    ]);

    // Unassigning a server logs it out there; deleting the registry logs out everywhere else.
    await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid] }));
    const outB = await nextRegistryJob(b.agent);
    expect([outB.type, outB.payload]).toEqual(["registry.logout", { registry: basicRegistry.host }]);
    const del = await track(team.api.delete(`/registries/${id}`));
    expect(del.body.message).toMatch(/logout was dispatched for 1 server/);
    const outA = await nextRegistryJob(a.agent);
    expect([outA.type, outA.payload]).toEqual(["registry.logout", { registry: basicRegistry.host }]);
  });

  it("drift: a server whose agent reports the login gone or different shows drift; a sync rewrites it", async () => {
    const a = await serverWithAgent(team.api, "drift-a");
    const id = (await track(team.api.post("/registries", custom({ name: "drifting", url: basicRegistry.url, credentials: { username: "alice", password: PASSWORD } })))).body.data.id;
    await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid] }));
    await track(team.api.post(`/registries/${id}/sync`));
    const job = await nextRegistryJob(a.agent);
    const fingerprint = (job.payload as { fingerprint: string }).fingerprint;
    await a.agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { registry: basicRegistry.host, fingerprint, status: "Login Succeeded" } });
    const server = async () => (await team.api.get(`/registries/${id}`)).body.servers[0];
    await until(async () => (await server()).sync_status === "synced");
    // An agent that does not report its logins: drift unknown, shown as none.
    expect((await server()).drift).toBe(false);
    const report = async (registries: { registry: string; fingerprint: string | null }[]) => {
      a.agent.socket.emit("facts", { facts: { ...sampleFacts, registries } });
      await until(async () => JSON.parse((await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: a.uuid } })).facts ?? "{}").registries?.length === registries.length);
    };
    await report([{ registry: basicRegistry.host, fingerprint }]);
    expect((await server()).drift).toBe(false);
    // Logged out by hand (the entry changed or removed): the agent reports no fingerprint.
    await report([{ registry: basicRegistry.host, fingerprint: null }]);
    expect((await server()).drift).toBe(true);
    await report([]);
    expect((await server()).drift).toBe(true);
    // A sync writes it again.
    await track(team.api.post(`/registries/${id}/sync`));
    const again = await nextRegistryJob(a.agent);
    expect(again.type).toBe("registry.login");
    await a.agent.outcome({ id: again.id, attempt: again.attempt, ok: true, result: { registry: basicRegistry.host, fingerprint, status: "Login Succeeded" } });
    await report([{ registry: basicRegistry.host, fingerprint }]);
    await until(async () => (await server()).sync_status === "synced");
    expect((await server()).drift).toBe(false);
  });

  it("changed credentials or a new default log the servers in again at once; the previous default's servers too", async () => {
    const a = await serverWithAgent(team.api, "resync-a");
    const first = (await track(team.api.post("/registries", custom({ name: "first", url: basicRegistry.url, is_default: true })))).body.data.id;
    await track(team.api.patch(`/registries/${first}`, { server_ids: [a.uuid] }));
    // An assignment alone waits for a sync (the spec: "after changing server assignment, call sync").
    expect(a.agent.jobs.filter((j) => j.type === "registry.login")).toEqual([]);
    const changed = await track(team.api.patch(`/registries/${first}`, { credentials: { username: "bob", password: PASSWORD } }));
    expect(changed.body.data.servers.map((x: any) => x.sync_status)).toEqual(["syncing"]);
    const login = await nextRegistryJob(a.agent);
    expect(login.payload).toMatchObject({ registry: basicRegistry.host, username: "bob", is_default: true });
    // A second registry becomes the default: the first one's servers learn they no longer have it.
    const second = (await track(team.api.post("/registries", custom({ name: "second", url: "https://other.example", is_default: true })))).body.data.id;
    const relogin = await nextRegistryJob(a.agent);
    expect(relogin.payload).toMatchObject({ registry: basicRegistry.host, username: "bob", is_default: false });
    // A rename changes nothing on the servers (jobs are written in the request's transaction).
    const logins = () => t.instance.database.prisma.job.count({ where: { serverId: a.id, type: "registry.login" } });
    const before = await logins();
    expect(before).toBe(2);
    await track(team.api.patch(`/registries/${first}`, { name: "renamed" }));
    await track(team.api.patch(`/registries/${second}`, { name: "renamed-2" }));
    expect(await logins()).toBe(before);
  });

  it("a server assigned later waits (pending) and gets the login on its first sync; the servers already synced keep theirs", async () => {
    const a = await serverWithAgent(team.api, "early");
    const id = (await track(team.api.post("/registries", custom({ name: "later", url: basicRegistry.url, credentials: { username: "alice", password: PASSWORD } })))).body.data.id;
    await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid] }));
    await track(team.api.post(`/registries/${id}/sync`));
    const first = await nextRegistryJob(a.agent);
    const fingerprint = (first.payload as { fingerprint: string }).fingerprint;
    await a.agent.outcome({ id: first.id, attempt: first.attempt, ok: true, result: { registry: basicRegistry.host, fingerprint, status: "Login Succeeded" } });
    await until(async () => (await team.api.get(`/registries/${id}`)).body.servers[0].sync_status === "synced");

    // A server created afterwards joins the assignment: pending, nothing sent yet; the first keeps its login.
    const late = await serverWithAgent(team.api, "late");
    const joined = await track(team.api.patch(`/registries/${id}`, { server_ids: [a.uuid, late.uuid] }));
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    expect(joined.body.data.servers.map((x: any) => [x.uuid, x.sync_status])).toEqual([
      [a.uuid, "synced"],
      [late.uuid, "pending"],
    ]);
    expect(late.agent.jobs.filter((j) => j.type.startsWith("registry."))).toEqual([]);
    expect(a.agent.jobs.filter((j) => j.type === "registry.logout")).toEqual([]);

    // Its first sync logs it in with the same login (same fingerprint) as the server already synced.
    const sync = await track(team.api.post(`/registries/${id}/sync`));
    expect(sync.body.count).toBe(2);
    const [again, its] = [await nextRegistryJob(a.agent), await nextRegistryJob(late.agent)];
    expect(its.type).toBe("registry.login");
    expect(its.payload).toMatchObject({ registry: basicRegistry.host, username: "alice", password: PASSWORD, fingerprint });
    for (const [agent, job] of [[a.agent, again], [late.agent, its]] as const) {
      await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { registry: basicRegistry.host, fingerprint: (job.payload as { fingerprint: string }).fingerprint, status: "Login Succeeded" } });
    }
    await until(async () => (await team.api.get(`/registries/${id}`)).body.servers.every((x: any) => x.sync_status === "synced"));
    const detail = await team.api.get(`/registries/${id}`);
    seen.push(JSON.stringify(detail.body));
    expect(new Set(detail.body.servers.map((x: any) => x.fingerprint))).toEqual(new Set([fingerprint]));
  });

  it("sync of a registry without servers dispatches nothing; cloud_a whose token API does not answer marks its servers failed saying why", async () => {
    const lone = (await track(team.api.post("/registries", custom({ name: "lone" })))).body.data.id;
    expect((await track(team.api.post(`/registries/${lone}/sync`))).body).toEqual({ message: "Sync dispatched for 0 server(s).", count: 0 });
    const s = await serverWithAgent(team.api, "cloud");
    const cloud = (
      await track(
        team.api.post("/registries", custom({ name: "cloud", type: "cloud_a", credentials: { cloud_access_key_id: CLOUD_KEY_ID, cloud_secret_access_key: CLOUD_SECRET, cloud_region: "us-east-1" } })),
      )
    ).body.data.id;
    await track(team.api.patch(`/registries/${cloud}`, { server_ids: [s.uuid] }));
    expect((await track(team.api.post(`/registries/${cloud}/sync`))).body.count).toBe(0);
    expect((await team.api.get(`/registries/${cloud}`)).body.servers[0]).toMatchObject({ sync_status: "failed", error: expect.stringMatching(/ECONNREFUSED/) });
    expect(s.agent.jobs.filter((j) => j.type.startsWith("registry."))).toEqual([]);
  });
});

describe("secrets", () => {
  it("no response of this file carried a password, secret key or an unmasked access key id", () => {
    const all = seen.join("\n");
    for (const secret of secrets) expect(all).not.toContain(secret);
  });

  it("the control plane's log (debug level) of every request, job and outcome of this file holds none of them", () => {
    const log = logLines.join("");
    // It did log this file's work (requests to the registry routes, the jobs).
    expect(log).toContain("/registries");
    const forms = [...secrets, ...[["alice", PASSWORD], ["bob", TOKEN_PASSWORD], ["ci", PASSWORD]].map(([u, p]) => Buffer.from(`${u}:${p}`).toString("base64"))];
    for (const secret of forms) expect(log).not.toContain(secret);
  });
});
