import { randomUUID } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppActionPayload } from "@capstan/shared";
import { hostsOnCreate, routeOwnership } from "../../control-plane/src/services/domain-ownership.js";
import { startTestInstance, type ApiClient, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, connectServerAgent, createImageApp, markDeployed, newServer, ok, placement, type AppWorld } from "./support/applications.js";
import type { ScriptedAgent } from "./support/fake-agent.js";

/**
 * Issue 15, item 2 (domain path takeover): a host belongs to one project; another path under a
 * host in use needs manage on every application serving it; messages never name what the
 * caller cannot see; the proxy gets the ownership table with every job.
 */
let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];

/** The owner's application "victim-app" (project shop, production) serving a1.example.com. */
let victim: { uuid: string };
/** A second project, where the member has full access. */
let other: { uuid: string };
let member: { userId: number; api: ApiClient };

beforeAll(async () => {
  t = await startTestInstance();
  w = await appWorld(t, keys);
  victim = await createImageApp(w, { name: "victim-app", fqdn: "https://a1.example.com" });
  other = await ok(w.api.post("/projects", { name: "side-project" }), "project");
  const m = await t.newMember(w.team.teamId, "member");
  await ok(w.api.post("/permissions/project", { project_uuid: other.uuid, user_id: m.userId, permission_level: "full_access" }), "grant");
  member = { userId: m.userId, api: t.api(m.token) };
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

const inOther = (extra: Record<string, unknown> = {}) => ({ ...placement(w), project_uuid: other.uuid, docker_registry_image_name: "nginx:1.27", ...extra });

describe("a host belongs to one project", () => {
  it("PATCH of a path under another project's host is 409, names nothing hidden, and changes nothing", async () => {
    const mine = await ok(member.api.post("/applications/dockerimage", inOther({ name: "mine" })), "member's app");
    const res = await member.api.patch(`/applications/${mine.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(res.status, JSON.stringify(res.body)).toBe(409);
    expect(res.body.message).toMatch(/a1\.example\.com/);
    expect(res.body.message).toMatch(/another project/);
    expect(res.body.message).not.toMatch(/victim-app|shop/);
    expect((await member.api.get(`/applications/${mine.uuid}`)).body.fqdn).toBeNull();
  });

  it("create with the host, a path under it, or the host on another server is 409 too", async () => {
    const eu = await newServer(w.api, w.keyUuid, "eu");
    for (const [what, body] of [
      ["same host", inOther({ fqdn: "a1.example.com" })],
      ["a path under it", inOther({ fqdn: "http://A1.example.com/admin" })],
      ["another server", inOther({ server_uuid: eu.uuid, destination_uuid: eu.destinationUuid, fqdn: "https://a1.example.com/api" })],
    ] as const) {
      const res = await member.api.post("/applications/dockerimage", body);
      expect(res.status, what).toBe(409);
      expect(res.body.message, what).not.toMatch(/victim-app/);
    }
    // The owner sees both projects: the message names the application and its project.
    const named = await w.api.post("/applications/dockerimage", inOther({ fqdn: "https://a1.example.com/x" }));
    expect(named.status).toBe(409);
    expect(named.body.message).toMatch(/application victim-app of project shop/);
    // Nothing was created by any of these.
    const listed = (await w.api.get("/applications")).body.data as { fqdn: string | null }[];
    expect(listed.filter((a) => a.fqdn?.includes("a1.example.com"))).toHaveLength(1);
  });

  it("every build pack's create path follows the rule (compose, git, Dockerfile)", async () => {
    const taken = "https://a1.example.com/shop";
    for (const [path, body] of [
      ["/applications/dockercompose", { docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n" }],
      ["/applications/public", { git_repository: "https://github.com/capstan-test/hello-node.git", git_branch: "main", build_pack: "builder_a" }],
      ["/applications/dockerfile", { dockerfile: "FROM nginx:1.27\n" }],
    ] as const) {
      const res = await member.api.post(path, { ...placement(w), project_uuid: other.uuid, ...body, fqdn: taken });
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).toBe(409);
      expect(res.body.message, path).not.toMatch(/victim-app/);
    }
  });

  it("a host under the same parent domain that no wildcard covers stays free", async () => {
    const res = await member.api.post("/applications/dockerimage", inOther({ fqdn: "https://b1.example.com" }));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  });
});

describe("paths under a host inside its project", () => {
  it("need manage on every application serving the host; the owner may add one", async () => {
    // A member with full access on staging only: it sees production's victim (view), may not manage it.
    await ok(w.api.post(`/projects/${w.project.uuid}/environments`, { name: "staging" }), "staging");
    const staging = (await ok(w.api.get(`/projects/${w.project.uuid}/staging`), "env")).id as number;
    const m = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/project", { project_uuid: w.project.uuid, user_id: m.userId, permission_level: "view_only" }), "view");
    await ok(w.api.post("/permissions/environment", { environment_id: staging, user_id: m.userId, permission_level: "full_access" }), "override");
    const api = t.api(m.token);
    const stagingApp = await ok(api.post("/applications/dockerimage", { ...placement(w, "staging"), docker_registry_image_name: "nginx" }), "staging app");
    const res = await api.patch(`/applications/${stagingApp.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(res.status).toBe(409);
    expect(res.body.message).toMatch(/victim-app, which you may not manage/);

    // Hidden from the caller (no grant on production): the same refusal names nobody.
    const hidden = await t.newMember(w.team.teamId, "member");
    await ok(w.api.post("/permissions/environment", { environment_id: staging, user_id: hidden.userId, permission_level: "full_access" }), "override only");
    const hiddenApi = t.api(hidden.token);
    const hiddenApp = await ok(hiddenApi.post("/applications/dockerimage", { ...placement(w, "staging"), docker_registry_image_name: "nginx" }), "hidden's app");
    const refused = await hiddenApi.patch(`/applications/${hiddenApp.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(refused.status).toBe(409);
    expect(refused.body.message).not.toMatch(/victim-app/);
    expect(refused.body.message).toMatch(/another resource/);

    // The team owner manages everything: a path under the project's own host is fine.
    expect((await w.api.patch(`/applications/${stagingApp.uuid}`, { fqdn: "https://a1.example.com/login" })).status).toBe(200);
    // The exact host and path stays one application's per server.
    const dup = await w.api.patch(`/applications/${hiddenApp.uuid}`, { fqdn: "https://a1.example.com/login" });
    expect(dup.status).toBe(409);
    expect(dup.body.message).toMatch(/already served by application/);
  });
});

describe("the proxy's ownership table", () => {
  it("every proxy sync job carries who owns which host on the server", async () => {
    const world = await appWorld(t, keys);
    const agent = await connectServerAgent(t, world);
    agents.push(agent);
    const app = await createImageApp(world, { name: "web", fqdn: "https://shop.example.org,https://shop.example.org/api" });
    const side = await ok(world.api.post("/projects", { name: "other" }), "project");
    const api = await ok(world.api.post("/applications/dockerimage", { ...placement(world), project_uuid: side.uuid, docker_registry_image_name: "nginx", fqdn: "https://api.example.org" }), "api");
    await markDeployed(t, app.uuid);
    const started = world.api.post(`/applications/${app.uuid}/stop`);
    const job = await agent.nextJob(10_000);
    expect(job.type).toBe("app.action");
    const ownership = AppActionPayload.parse(job.payload).proxy.ownership!;
    expect(ownership.generation).toBeGreaterThan(Date.now() - 60_000);
    expect(ownership.projects).toEqual(
      expect.arrayContaining([
        { resources: [app.uuid], hosts: ["shop.example.org"] },
        { resources: [api.uuid], hosts: ["api.example.org"] },
      ]),
    );
    expect(ownership.projects).toHaveLength(2);
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { status: "exited" } });
    expect((await started).status).toBe(200);
  });
});

/** The database client with every statement counted, the rows they returned, and the raw ones' arguments. */
function counted<D extends object>(db: D): { db: D; statements: number; rows: number; raw: unknown[][] } {
  const tally = { db, statements: 0, rows: 0, raw: [] as unknown[][] };
  const count = async (run: () => unknown) => {
    tally.statements++;
    const result = await run();
    tally.rows += Array.isArray(result) ? result.length : result == null ? 0 : 1;
    return result;
  };
  tally.db = new Proxy(db, {
    get(target, prop, recv) {
      const value = Reflect.get(target, prop, recv);
      if (typeof prop !== "string") return value;
      if (typeof value === "function") {
        return (...args: unknown[]) => (prop === "$queryRaw" && tally.raw.push(args), count(() => (value as (...a: unknown[]) => unknown).apply(target, args)));
      }
      if (typeof value !== "object" || value === null || prop.startsWith("$")) return value;
      return new Proxy(value, {
        get(model, op) {
          const fn = Reflect.get(model, op);
          return typeof fn === "function" ? (...args: unknown[]) => count(() => fn.apply(model, args)) : fn;
        },
      });
    },
  });
  return tally;
}

describe("the ownership table reads the hosts on the server, not the team", () => {
  it("the same statements and rows with 1 or 200 unrelated applications of the team, and it follows PATCH", async () => {
    const world = await appWorld(t, keys);
    const eu = await newServer(world.api, world.keyUuid, "eu");
    const web = await createImageApp(world, { name: "web", fqdn: "https://shop.example.net,https://shop.example.net/api" });
    const db = t.instance.database.prisma;
    const home = await db.application.findUniqueOrThrow({ where: { uuid: web.uuid } });
    const euDestination = await db.destination.findUniqueOrThrow({ where: { uuid: eu.destinationUuid } });
    // Unrelated: other hosts on the other server, and no domain on this one.
    let made = 0;
    const unrelated = async (n: number) => {
      for (let i = 0; i < n; i++, made++) {
        const common = { teamId: home.teamId, environmentId: home.environmentId, source: "dockerimage", buildPack: "containerimage", webhookSecret: "x" };
        const fqdn = `https://u${made}.example.net`;
        await db.application.create({ data: { ...common, uuid: randomUUID(), name: `far-${made}`, serverId: euDestination.serverId, destinationId: euDestination.id, fqdn, hosts: hostsOnCreate(fqdn) } });
        await db.application.create({ data: { ...common, uuid: randomUUID(), name: `near-${made}`, serverId: home.serverId, destinationId: home.destinationId } });
      }
    };
    const measure = async () => {
      const c = counted(db);
      const table = await routeOwnership(c.db, home.serverId);
      return { projects: table?.projects, statements: c.statements, rows: c.rows, raw: c.raw };
    };

    await unrelated(1);
    const one = await measure();
    expect(one.projects).toEqual([{ resources: [web.uuid], hosts: ["shop.example.net"] }]);
    await unrelated(199);
    expect(await db.application.count({ where: { teamId: home.teamId } })).toBe(401);
    const many = await measure();
    expect(many).toEqual(one);
    expect(one.statements).toBe(1);
    expect(one.rows).toBe(1); // web's claim of its one host (two paths)
    if (t.instance.database.kind === "sqlite") {
      // What the database reads, not only what it returns: every table through its primary key
      // or an index, none scanned, none through the team's index (every application of the team).
      const [strings, ...values] = one.raw[0]! as [readonly string[], ...unknown[]];
      const plan = await db.$queryRawUnsafe<{ detail: string }[]>(`EXPLAIN QUERY PLAN ${strings.join("?")}`, ...values);
      expect(plan.map((p) => p.detail)).toContain("SEARCH h USING INDEX ApplicationHost_host_idx (host=?)");
      expect(plan.map((p) => p.detail).filter((d) => /^SCAN |teamId/.test(d))).toEqual([]);
    }

    // The stored hosts follow a PATCH of the domains, and its removal.
    expect((await world.api.patch(`/applications/${web.uuid}`, { fqdn: "https://moved.example.net/a,https://other.example.net" })).status).toBe(200);
    expect((await measure()).projects).toEqual([{ resources: [web.uuid], hosts: ["moved.example.net", "other.example.net"] }]);
    expect((await world.api.patch(`/applications/${web.uuid}`, { fqdn: "" })).status).toBe(200);
    expect((await measure()).projects).toEqual([]);
  });
});

describe("the stored hosts of applications created before them", () => {
  it("the migration's backfill finds the hosts the service stores, from every stored fqdn", async () => {
    const world = await appWorld(t, keys);
    const mixed = await createImageApp(world, { name: "mixed", fqdn: "HTTP://Mixed.Example.org/Path/,https://mixed.example.org/api,http://other.example.org" });
    const db = t.instance.database.prisma;
    const stored = () => db.applicationHost.findMany({ orderBy: [{ applicationId: "asc" }, { host: "asc" }] });
    const byService = await stored();
    expect(byService.length).toBeGreaterThan(5);
    const mixedId = (await db.application.findUniqueOrThrow({ where: { uuid: mixed.uuid } })).id;
    expect(byService.filter((r) => r.applicationId === mixedId).map((r) => r.host)).toEqual(["mixed.example.org", "other.example.org"]);

    const root = fileURLToPath(new URL("../../prisma/", import.meta.url));
    const dir = t.instance.database.kind === "sqlite" ? `${root}migrations` : `${root}postgresql/migrations`;
    const name = readdirSync(dir).find((n) => n.endsWith("_application_hosts"))!;
    const sql = readFileSync(`${dir}/${name}/migration.sql`, "utf8");
    const backfill = sql.slice(sql.indexOf("-- Hand-written (the backfill)"));
    await db.applicationHost.deleteMany({});
    expect(await db.applicationHost.count()).toBe(0);
    await db.$executeRawUnsafe(backfill);
    expect(await stored()).toEqual(byService);
  });
});
