import { execFile } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createServer, get as httpGet, type Server } from "node:http";
import type { Socket } from "node:net";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import Sqlite from "better-sqlite3";
import pg from "pg";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PermissionLevel, TeamRole } from "@capstan/shared";
import { createInstance, type Instance } from "../../control-plane/src/instance.js";
import type { ResponseCache } from "../../control-plane/src/http/response-cache.js";
import { client, startTestInstance, type ApiClient, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, ok, placement, type AppWorld } from "./support/applications.js";
import { createDb } from "./support/standalone-databases.js";
import { requestStatements } from "./support/statements.js";

/**
 * The response cache of GET /projects and GET /projects/{uuid} (http/response-cache.ts): a
 * repeated GET is served from memory, and never once a write that changes what it shows has
 * committed, whoever made the write: this process's API, another database connection (plain
 * SQL), the `capstan` CLI in its own process, or (PostgreSQL) another replica. Every check after
 * a write asserts both the new content and that the request was not served from the cache.
 */

const ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

const cacheOf = (i: Instance) => i.app.locals.responseCache as ResponseCache;

/** GET that the cache must serve (its hit count goes up by exactly one). */
async function hit(i: Instance, api: ApiClient, path: string) {
  const before = cacheOf(i).stats().hits;
  const res = await api.get(path);
  expect(res.status).toBe(200);
  expect(cacheOf(i).stats().hits, `${path} should have been served from the cache`).toBe(before + 1);
  return res;
}

/** GET that the cache must not serve: something it shows has changed. */
async function miss(i: Instance, api: ApiClient, path: string) {
  const before = cacheOf(i).stats().hits;
  const res = await api.get(path);
  expect(cacheOf(i).stats().hits, `${path} was served from the cache after a write`).toBe(before);
  return res;
}

/** Fills the cache for the path and checks it is used: miss or hit first, then a hit. */
async function warm(i: Instance, api: ApiClient, path: string) {
  await api.get(path);
  return hit(i, api, path);
}

/** Plain SQL on a connection of its own: a writer this control plane knows nothing about. */
async function rawWrite(t: TestInstance, sql: string, params: (string | number)[] = []): Promise<void> {
  const db = t.config.database;
  if (db.kind === "sqlite") {
    const conn = new Sqlite(db.file, { timeout: 10_000 });
    try {
      conn.pragma("foreign_keys = ON");
      conn.prepare(sql).run(...params);
    } finally {
      conn.close();
    }
  } else {
    const conn = new pg.Client({ connectionString: db.url });
    await conn.connect();
    try {
      let n = 0;
      await conn.query(sql.replace(/\?/g, () => `$${++n}`), params);
    } finally {
      await conn.end();
    }
  }
}

function plainGet(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = httpGet(url, { headers, agent: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => done({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", fail);
  });
}

let t: TestInstance;
let team: TeamFixture;
let seq = 0;

async function newProject(api: ApiClient, envs: string[] = []) {
  const res = await api.post("/projects", { name: `cached-${++seq}`, description: "d" });
  expect(res.status).toBe(201);
  const env: Record<string, number> = { production: res.body.environments[0].id };
  for (const name of envs) {
    const r = await api.post(`/projects/${res.body.uuid}/environments`, { name });
    expect(r.status).toBe(201);
    env[name] = r.body.data.id;
  }
  return { uuid: res.body.uuid as string, name: res.body.name as string, env };
}

async function member(role: TeamRole = "member") {
  const m = await t.newMember(team.teamId, role);
  return { ...m, api: t.api(m.token) };
}

async function grant(projectUuid: string, userId: number, level: PermissionLevel = "view_only"): Promise<number> {
  const res = await team.api.post("/permissions/project", { project_uuid: projectUuid, user_id: userId, permission_level: level });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

const names = (res: { body: { data: { name: string }[] } }) => res.body.data.map((p) => p.name);
const envNames = (p: { environments: { name: string }[] }) => p.environments.map((e) => e.name);

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  await cacheOf(t.instance).ready;
}, 60_000);

afterAll(async () => {
  await t?.close();
});

describe("response cache of GET /projects", () => {
  it("is on: its database triggers are in place", () => {
    expect(cacheOf(t.instance).stats().state).toBe("on");
  });

  it("serves a repeated GET from memory with the same bytes and headers; ETag revalidation and HEAD work on it", async () => {
    await newProject(team.api);
    await newProject(team.api);
    const first = await team.api.get("/projects");
    const second = await hit(t.instance, team.api, "/projects");
    expect(second.body).toEqual(first.body);
    for (const h of ["content-type", "content-length", "etag"]) expect(second.headers.get(h)).toBe(first.headers.get(h));
    expect(second.headers.get("content-type")).toBe("application/json; charset=utf-8");
    expect(second.headers.get("x-ratelimit-remaining")).not.toBeNull();

    // (node:http: fetch adds "Cache-Control: no-cache" to a request with If-None-Match.)
    const etag = first.headers.get("etag")!;
    const revalidated = await plainGet(`${t.url}/api/v1/projects`, { Authorization: `Bearer ${team.token}`, "If-None-Match": etag });
    expect(revalidated).toEqual({ status: 304, body: "" });
    const changed = await plainGet(`${t.url}/api/v1/projects`, { Authorization: `Bearer ${team.token}`, "If-None-Match": 'W/"0-x"' });
    expect(changed.status).toBe(200);
    expect(JSON.parse(changed.body)).toEqual(first.body);
    const head = await team.api.raw("/projects", { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.body).toBeUndefined();
    expect(head.headers.get("etag")).toBe(etag);

    const one = first.body.data[0];
    await team.api.get(`/projects/${one.uuid}`);
    // The detail is the list item with resource counts (issue 15).
    const detail = (await hit(t.instance, team.api, `/projects/${one.uuid}`)).body;
    expect({ ...detail, resource_counts: undefined, environments: detail.environments.map((e: object) => ({ ...e, resource_counts: undefined })) }).toEqual(
      JSON.parse(JSON.stringify({ ...one, environments: one.environments })),
    );
  });

  it("keeps checking token, scope and parameters before it answers from memory", async () => {
    await warm(t.instance, team.api, "/projects?page=1&per_page=1");
    expect((await client(t.url + "/api/v1").get("/projects?page=1&per_page=1")).status).toBe(401);
    const writeOnly = await t.newMember(team.teamId, "owner", ["write"]);
    expect((await t.api(writeOnly.token).get("/projects?page=1&per_page=1")).status).toBe(403);
    expect((await team.api.get("/projects?page=0&per_page=1")).status).toBe(422);
    const other = await t.newTeam();
    const mine = (await team.api.get("/projects")).body.data[0].uuid;
    await team.api.get(`/projects/${mine}`);
    expect((await other.api.get(`/projects/${mine}`)).status).toBe(404);
    expect((await other.api.get("/projects")).body).toEqual({ data: [] });
  });

  it("shows every write through the API at once: create, rename, environment added and removed, delete; page totals follow", async () => {
    const list = "/projects";
    const page = "/projects?page=1&per_page=2";
    const p = await newProject(team.api);
    const one = `/projects/${p.uuid}`;
    for (const path of [list, page, one]) await warm(t.instance, team.api, path);
    const total = (await team.api.get(page)).body.meta.total;

    const q = await newProject(team.api);
    expect(names(await miss(t.instance, team.api, list))).toContain(q.name);
    expect((await miss(t.instance, team.api, page)).body.meta.total).toBe(total + 1);

    await warm(t.instance, team.api, one);
    expect((await team.api.patch(one, { name: "renamed", description: "new words" })).status).toBe(200);
    expect((await miss(t.instance, team.api, one)).body).toMatchObject({ name: "renamed", description: "new words" });
    expect(names(await miss(t.instance, team.api, list))).toContain("renamed");

    await warm(t.instance, team.api, one);
    expect((await team.api.post(`${one}/environments`, { name: "staging" })).status).toBe(201);
    expect(envNames((await miss(t.instance, team.api, one)).body)).toEqual(["production", "staging"]);
    await warm(t.instance, team.api, one);
    expect((await team.api.delete(`${one}/environments/staging`)).status).toBe(200);
    expect(envNames((await miss(t.instance, team.api, one)).body)).toEqual(["production"]);

    for (const path of [list, page, one]) await warm(t.instance, team.api, path);
    expect((await team.api.delete(one)).status).toBe(200);
    expect((await miss(t.instance, team.api, one)).status).toBe(404);
    expect(names(await miss(t.instance, team.api, list))).not.toContain("renamed");
    expect((await miss(t.instance, team.api, page)).body.meta.total).toBe(total);
  });

  it("answers each caller what it may see: grants, overrides and role changes show at once", async () => {
    const p1 = await newProject(team.api, ["staging"]);
    const p2 = await newProject(team.api, ["staging"]);
    const a = await member();
    const b = await member();
    const v = await member("viewer");
    await grant(p1.uuid, a.userId);

    const seen = async (api: ApiClient) => (await api.get("/projects")).body.data.map((p: { uuid: string }) => p.uuid);
    const all = await seen(team.api);
    expect(await seen(a.api)).toEqual([p1.uuid]);
    expect(await seen(b.api)).toEqual([]);
    expect(await seen(v.api)).toEqual(all);
    // Cached now, each caller its own: a second round comes from memory and is unchanged.
    expect((await hit(t.instance, a.api, "/projects")).body.data.map((p: { uuid: string }) => p.uuid)).toEqual([p1.uuid]);
    expect((await hit(t.instance, b.api, "/projects")).body.data).toEqual([]);
    expect((await hit(t.instance, v.api, "/projects")).body.data.map((p: { uuid: string }) => p.uuid)).toEqual(all);
    expect((await hit(t.instance, team.api, "/projects")).body.data.map((p: { uuid: string }) => p.uuid)).toEqual(all);

    // An environment override alone makes a project visible, with only that environment.
    const override = await team.api.post("/permissions/environment", { environment_id: p2.env.staging!, user_id: b.userId, permission_level: "deploy" });
    expect(override.status).toBe(201);
    const bList = (await miss(t.instance, b.api, "/projects")).body.data;
    expect(bList.map((p: { uuid: string }) => p.uuid)).toEqual([p2.uuid]);
    expect(envNames(bList[0])).toEqual(["staging"]);
    await warm(t.instance, b.api, `/projects/${p2.uuid}`);
    expect((await team.api.delete(`/permissions/environment/${override.body.data.id}`)).status).toBe(200);
    expect((await miss(t.instance, b.api, `/projects/${p2.uuid}`)).status).toBe(404);
    expect((await miss(t.instance, b.api, "/projects")).body.data).toEqual([]);

    // A project grant, changed in level and revoked.
    const id = await grant(p2.uuid, b.userId);
    expect(envNames((await miss(t.instance, b.api, `/projects/${p2.uuid}`)).body)).toEqual(["production", "staging"]);
    await warm(t.instance, b.api, "/projects");
    expect((await team.api.delete(`/permissions/project/${id}`)).status).toBe(200);
    expect((await miss(t.instance, b.api, "/projects")).body.data).toEqual([]);

    // The role is read with the token on every request: member to viewer sees the whole team.
    await warm(t.instance, a.api, "/projects");
    await t.instance.admin.setMember(team.teamId, a.userId, "viewer");
    expect(await seen(a.api)).toEqual(await seen(team.api));
    await t.instance.admin.setMember(team.teamId, a.userId, "member");
    expect(await seen(a.api)).toEqual([p1.uuid]);
  });

  it("never answers with what a write that completed before the GET replaced, with GETs in flight during the writes", async () => {
    const p = await newProject(team.api);
    const one = `/projects/${p.uuid}`;
    for (let i = 1; i <= 25; i++) {
      const inFlight = Array.from({ length: 4 }, () => team.api.get(one));
      const write = team.api.patch(one, { name: `round ${i}` });
      const during = Array.from({ length: 4 }, () => team.api.get(one));
      expect((await write).status).toBe(200);
      expect((await team.api.get(one)).body.name).toBe(`round ${i}`);
      expect((await team.api.get("/projects")).body.data.find((x: { uuid: string }) => x.uuid === p.uuid).name).toBe(`round ${i}`);
      for (const r of await Promise.all([...inFlight, ...during])) {
        expect(r.status).toBe(200);
        expect([`round ${i - 1}`, `round ${i}`, p.name]).toContain(r.body.name);
      }
    }
  });

  it("lets concurrent writes in one team through: no deadlock on the version row, a duplicate grant is still a 409", async () => {
    const created = await Promise.all(Array.from({ length: 12 }, (_, i) => team.api.post("/projects", { name: `parallel ${i}` })));
    expect(created.map((r) => r.status)).toEqual(Array(12).fill(201));
    const m = await member();
    const grants = await Promise.all(
      Array.from({ length: 6 }, () => team.api.post("/permissions/project", { project_uuid: created[0]!.body.uuid, user_id: m.userId, permission_level: "view_only" })),
    );
    expect(grants.map((r) => r.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    const renames = await Promise.all(created.map((r, i) => team.api.patch(`/projects/${r.body.uuid}`, { name: `renamed ${i}` })));
    expect(renames.map((r) => r.status)).toEqual(Array(12).fill(200));
    const listed = names(await team.api.get("/projects"));
    for (let i = 0; i < 12; i++) expect(listed).toContain(`renamed ${i}`);
  });

  it("shows a write made with plain SQL on another connection at once (the database bumps the version)", async () => {
    const p = await newProject(team.api, ["staging"]);
    const m = await member();
    await grant(p.uuid, m.userId);
    const one = `/projects/${p.uuid}`;

    await warm(t.instance, team.api, one);
    await rawWrite(t, `UPDATE "Project" SET "name" = ? WHERE "uuid" = ?`, ["renamed by sql", p.uuid]);
    expect((await miss(t.instance, team.api, one)).body.name).toBe("renamed by sql");

    await warm(t.instance, team.api, one);
    await rawWrite(t, `DELETE FROM "Environment" WHERE "id" = ?`, [p.env.staging!]);
    expect(envNames((await miss(t.instance, team.api, one)).body)).toEqual(["production"]);

    await warm(t.instance, m.api, "/projects");
    await rawWrite(t, `DELETE FROM "ProjectPermission" WHERE "userId" = ?`, [m.userId]);
    expect((await miss(t.instance, m.api, "/projects")).body.data).toEqual([]);

    // Deleting a user or a whole team goes through the triggers of every cascaded row; the
    // user's membership was in this team, the other team's rows are none of its business.
    await warm(t.instance, team.api, "/projects");
    await rawWrite(t, `DELETE FROM "User" WHERE "id" = ?`, [m.userId]);
    expect((await miss(t.instance, team.api, "/projects")).status).toBe(200);
    const doomed = await t.newTeam();
    await newProject(doomed.api, ["staging"]);
    await warm(t.instance, team.api, "/projects");
    await rawWrite(t, `DELETE FROM "Team" WHERE "id" = ?`, [doomed.teamId]);
    expect((await doomed.api.get("/projects")).status).toBe(401);
    expect((await hit(t.instance, team.api, "/projects")).status).toBe(200);
  });
});

describe("resource counts of GET /projects/{uuid}, served from the cache (issue 15)", () => {
  const keys = new KeyFactory();
  let w: AppWorld;
  let one: string;
  let staging: number;
  const counts = (applications: number, databases: number) => ({ applications, databases, services: 0, total: applications + databases });
  const shown = (res: { body: { resource_counts: unknown; environments: { name: string; resource_counts: unknown }[] } }) => ({
    total: res.body.resource_counts,
    ...Object.fromEntries(res.body.environments.map((e) => [e.name, e.resource_counts])),
  });

  beforeAll(async () => {
    w = await appWorld(t, keys);
    one = `/projects/${w.project.uuid}`;
    staging = (await ok(w.api.post(`${one}/environments`, { name: "staging" }), "env")).data.id;
  });
  afterAll(() => keys.cleanup());

  it("counts applications and databases per environment and in total; a member's counts cover only the environments it sees", async () => {
    const x = await appWorld(t, keys);
    const p = `/projects/${x.project.uuid}`;
    const qa = (await ok(x.api.post(`${p}/environments`, { name: "qa" }), "env")).data.id;
    await createImageApp(x);
    await createImageApp(x);
    await createDb(x, "redis");
    await ok(x.api.post("/applications/dockerimage", { ...placement(x, "qa"), docker_registry_image_name: "nginx:1.27" }), "qa app");
    expect(shown(await x.api.get(p))).toEqual({ total: counts(3, 1), production: counts(2, 1), qa: counts(1, 0) });
    // A member with an override on qa only: the project shows qa alone, and the totals are qa's.
    const m = await t.newMember(x.team.teamId, "member");
    await ok(x.api.post("/permissions/environment", { environment_id: qa, user_id: m.userId, permission_level: "view_only" }), "override");
    expect(shown(await t.api(m.token).get(p))).toEqual({ total: counts(1, 0), qa: counts(1, 0) });
    // The list carries no counts (it stays as cheap as before).
    const listed = (await x.api.get("/projects")).body.data.find((e: { uuid: string }) => e.uuid === x.project.uuid);
    expect(listed.resource_counts).toBeUndefined();
    expect(listed.environments[0].resource_counts).toBeUndefined();
  });

  it("is never stale after a resource is created, deleted or goes with its environment; other writes to them keep the cached body", async () => {
    await warm(t.instance, w.api, one);
    const app = await createImageApp(w);
    expect(shown(await miss(t.instance, w.api, one))).toEqual({ total: counts(1, 0), production: counts(1, 0), staging: counts(0, 0) });

    await warm(t.instance, w.api, one);
    const db = await createDb(w, "redis", { ...placement(w, "staging") });
    expect(shown(await miss(t.instance, w.api, one))).toEqual({ total: counts(1, 1), production: counts(1, 0), staging: counts(0, 1) });

    // Writes that change no count bump nothing: a rename, a status report, a database's error.
    await warm(t.instance, w.api, one);
    expect((await w.api.patch(`/applications/${app.uuid}`, { name: "renamed" })).status).toBe(200);
    await t.instance.database.prisma.application.update({ where: { uuid: app.uuid }, data: { status: "running:healthy" } });
    await t.instance.database.prisma.standaloneDatabase.update({ where: { uuid: db.uuid }, data: { status: "running:healthy", lastError: "x" } });
    expect(shown(await hit(t.instance, w.api, one)).total).toEqual(counts(1, 1));

    expect((await w.api.delete(`/applications/${app.uuid}`)).status).toBe(200);
    expect(shown(await miss(t.instance, w.api, one))).toEqual({ total: counts(0, 1), production: counts(0, 0), staging: counts(0, 1) });

    await warm(t.instance, w.api, one);
    expect((await w.api.delete(`/databases/${db.uuid}`)).status).toBe(200);
    expect(shown(await miss(t.instance, w.api, one)).total).toEqual(counts(0, 0));

    // The environment's deletion takes its resources: the counts go with it (the environment's own trigger and the resources').
    await createImageApp(w, { ...placement(w, "staging") });
    await warm(t.instance, w.api, one);
    expect(shown(await hit(t.instance, w.api, one))).toEqual({ total: counts(1, 0), production: counts(0, 0), staging: counts(1, 0) });
    const env = await ok(w.api.post(`${one}/environments`, { name: "doomed" }), "env");
    await createImageApp(w, { ...placement(w, "doomed") });
    await createDb(w, "redis", { ...placement(w, "doomed") });
    await warm(t.instance, w.api, one);
    expect((await w.api.delete(`${one}/environments/${env.data.name}`)).status).toBe(200);
    expect(shown(await miss(t.instance, w.api, one))).toEqual({ total: counts(1, 0), production: counts(0, 0), staging: counts(1, 0) });
  });

  it("is never stale after plain SQL inserts, moves or deletes a resource on another connection; a status write keeps it", async () => {
    type Shown = Record<string, { applications: number; databases: number }>;
    const apps = (s: Shown) => Object.fromEntries(Object.entries(s).map(([k, v]) => [k, v.applications]));
    await warm(t.instance, w.api, one);
    const start = apps(shown(await hit(t.instance, w.api, one)) as Shown);
    const app = await createImageApp(w, { ...placement(w, "production") });
    await warm(t.instance, w.api, one);
    const before = apps(shown(await hit(t.instance, w.api, one)) as Shown);
    expect(before).toEqual({ ...start, total: start.total! + 1, production: start.production! + 1 });

    await rawWrite(t, `UPDATE "Application" SET "status" = 'exited:unhealthy' WHERE "uuid" = ?`, [app.uuid]);
    expect(apps(shown(await hit(t.instance, w.api, one)) as Shown)).toEqual(before);

    // Moved to staging by hand: both environments' counts change.
    await rawWrite(t, `UPDATE "Application" SET "environmentId" = ? WHERE "uuid" = ?`, [staging, app.uuid]);
    expect(apps(shown(await miss(t.instance, w.api, one)) as Shown)).toEqual({ ...before, production: before.production! - 1, staging: before.staging! + 1 });

    await warm(t.instance, w.api, one);
    await rawWrite(t, `DELETE FROM "Application" WHERE "uuid" = ?`, [app.uuid]);
    expect(apps(shown(await miss(t.instance, w.api, one)) as Shown)).toEqual(start);

    // An insert by hand: a copy of another application's row under a new uuid.
    const source = await createImageApp(w);
    await warm(t.instance, w.api, one);
    const withSource = apps(shown(await hit(t.instance, w.api, one)) as Shown);
    const cols = `"teamId", "environmentId", "serverId", "destinationId", "name", "source", "buildPack", "dockerImage", "webhookSecret", "createdAt", "updatedAt"`;
    await rawWrite(t, `INSERT INTO "Application" ("uuid", ${cols}) SELECT ?, ${cols} FROM "Application" WHERE "uuid" = ?`, [randomUUID(), source.uuid]);
    expect(apps(shown(await miss(t.instance, w.api, one)) as Shown).total).toBe(withSource.total! + 1);
  });

  it("a miss reads the project and its counts in one statement; a hit reads nothing but the token", async () => {
    const reader = t.instance.services.reader;
    const missed = await requestStatements(reader, () => miss(t.instance, w.api, one), { before: () => createImageApp(w) });
    const hitOnly = await requestStatements(reader, () => hit(t.instance, w.api, one));
    expect(missed.length).toBe(hitOnly.length + 1);
    expect(missed.filter((s) => s.includes(`"Application"`) && s.includes(`"StandaloneDatabase"`) && s.includes(`"Project"`))).toHaveLength(1);
    expect(hitOnly.some((s) => s.includes(`"Application"`))).toBe(false);
  });
});

describe("response cache and the capstan CLI (another process on the same database)", () => {
  const bin = resolve(ROOT, "control-plane/bin/capstan.js");
  const cli = (args: string[]) =>
    new Promise<string>((done, fail) => {
      const env: NodeJS.ProcessEnv = {};
      for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("PLATFORM_") && k !== "DATABASE_URL") env[k] = v;
      Object.assign(env, { PLATFORM_DATA_DIR: t.config.dataDir, PLATFORM_LOG_LEVEL: "silent" });
      if (t.config.database.kind === "postgresql") env.DATABASE_URL = t.config.database.url;
      execFile(process.execPath, [bin, ...args], { cwd: ROOT, env, timeout: 30_000 }, (err, stdout, stderr) =>
        err ? fail(new Error(`capstan ${args.join(" ")}: ${stderr}`)) : done(stdout),
      );
    });

  beforeAll(async () => {
    // The binary runs dist/: build it from the current sources (as cli.test.ts does).
    await new Promise<void>((done, fail) =>
      execFile("npx", ["tsc", "-b", "control-plane"], { cwd: ROOT, timeout: 120_000 }, (err, stdout, stderr) =>
        err ? fail(new Error(`npx tsc -b control-plane failed:\n${stdout}${stderr}`)) : done(),
      ),
    );
  }, 150_000);

  // Four CLI processes below, each starting Node and Prisma: seconds each on a loaded machine.
  it("a member removed and added back by the CLI loses its grants in the next GET", async () => {
    const p = await newProject(team.api);
    const m = await member();
    await grant(p.uuid, m.userId);
    expect((await m.api.get("/projects")).body.data.map((x: { uuid: string }) => x.uuid)).toEqual([p.uuid]);
    await hit(t.instance, m.api, "/projects");

    // Removal deletes the member's grants in the team (and ends its tokens); back as a member,
    // with a new token, it sees nothing. Same team, same user: the same cache key as before.
    await cli(["member", "remove", "--team", String(team.teamId), "--user", String(m.userId)]);
    await cli(["member", "add", "--team", String(team.teamId), "--user", String(m.userId), "--role", "member"]);
    const token = (await cli(["token", "create", "--team", String(team.teamId), "--user", String(m.userId), "--name", "again", "--scopes", "read"])).trim();
    const again = t.api(token);
    expect((await miss(t.instance, again, "/projects")).body.data).toEqual([]);
    expect((await miss(t.instance, again, `/projects/${p.uuid}`)).status).toBe(404);

    // A role given by the CLI applies at once too.
    await cli(["member", "add", "--team", String(team.teamId), "--user", String(m.userId), "--role", "viewer"]);
    expect((await again.get("/projects")).body.data.map((x: { uuid: string }) => x.uuid)).toContain(p.uuid);
  }, 180_000);
});

describe("response cache without its triggers", () => {
  it("stays off, and answers from the database", async () => {
    const other = await startTestInstance();
    let second: Instance | undefined;
    try {
      const owner = await other.newTeam();
      const name = other.config.database.kind === "sqlite" ? "TeamVersion_project_update" : "TeamVersion_project";
      await rawWrite(other, `DROP TRIGGER "${name}"${other.config.database.kind === "postgresql" ? ` ON "Project"` : ""}`);
      second = await createInstance(other.config, pino({ level: "silent" }));
      await cacheOf(second).ready;
      expect(cacheOf(second).stats().state).toBe("off");
      const server: Server = createServer(second.app);
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      try {
        const addr = server.address();
        const api = client(`http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/api/v1`, owner.token);
        const p = (await api.post("/projects", { name: "x" })).body;
        await api.get(`/projects/${p.uuid}`);
        await api.patch(`/projects/${p.uuid}`, { name: "y" });
        expect((await api.get(`/projects/${p.uuid}`)).body.name).toBe("y");
        expect(cacheOf(second).stats()).toMatchObject({ hits: 0, entries: 0 });
      } finally {
        server.closeAllConnections();
        await new Promise((r) => server.close(r));
      }
    } finally {
      await second?.close();
      await other.close();
    }
  });
});

const pgUrl = process.env.CAPSTAN_TEST_PG_URL;

describe.skipIf(!pgUrl)("response cache across two replicas sharing PostgreSQL", () => {
  let b: Instance;
  let bServer: Server;
  let bUrl: string;
  let bApi: ApiClient;
  const sockets = new Set<Socket>();

  beforeAll(async () => {
    b = await createInstance(t.config, pino({ level: "silent" }));
    bServer = createServer(b.app);
    bServer.on("connection", (s) => {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
    });
    await new Promise<void>((r) => bServer.listen(0, "127.0.0.1", r));
    const addr = bServer.address();
    bUrl = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}/api/v1`;
    bApi = client(bUrl, team.token);
    await cacheOf(b).ready;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((r) => bServer?.close(r));
    await b?.close();
  });

  it("a write through one replica shows at once in the other's GET, both ways", async () => {
    expect(cacheOf(b).stats().state).toBe("on");
    await warm(b, bApi, "/projects");
    const p = await newProject(team.api); // through replica A
    expect(names(await miss(b, bApi, "/projects"))).toContain(p.name);

    const one = `/projects/${p.uuid}`;
    await warm(t.instance, team.api, one);
    expect((await bApi.patch(one, { name: "renamed on b" })).status).toBe(200);
    expect((await miss(t.instance, team.api, one)).body.name).toBe("renamed on b");

    const m = await member();
    const mApi = client(bUrl, m.token);
    await warm(b, mApi, "/projects");
    await grant(p.uuid, m.userId); // through replica A
    expect((await miss(b, mApi, "/projects")).body.data.map((x: { uuid: string }) => x.uuid)).toEqual([p.uuid]);
    await warm(b, mApi, "/projects");
    expect((await team.api.delete(one)).status).toBe(200);
    expect((await miss(b, mApi, "/projects")).body.data).toEqual([]);
  });
});
