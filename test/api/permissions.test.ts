import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PermissionLevel, TeamRole } from "@capstan/shared";
import { client, startTestInstance, type ApiClient, type TeamFixture, type TestInstance } from "./harness.js";

/**
 * Spec 4.13 (permission management) through real HTTP. Who may call what:
 * owner/admin and team automation tokens manage; members and viewers only read their own.
 */

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

/** The ability table of spec section 2. */
const ABILITIES: Record<PermissionLevel, { can_view: boolean; can_deploy: boolean; can_manage: boolean; can_delete: boolean }> = {
  view_only: { can_view: true, can_deploy: false, can_manage: false, can_delete: false },
  deploy: { can_view: true, can_deploy: true, can_manage: false, can_delete: false },
  full_access: { can_view: true, can_deploy: true, can_manage: true, can_delete: true },
};
const LEVELS = Object.keys(ABILITIES) as PermissionLevel[];

let t: TestInstance;
let team: TeamFixture;
let owner: ApiClient;
let other: TeamFixture;

interface ProjectFx {
  uuid: string;
  name: string;
  env: Record<string, number>;
}

async function newProject(api: ApiClient = owner, extraEnvs: string[] = ["staging"]): Promise<ProjectFx> {
  const res = await api.post("/projects", { name: `p-${Math.random().toString(36).slice(2, 8)}` });
  expect(res.status).toBe(201);
  const env: Record<string, number> = {};
  for (const e of res.body.environments) env[e.name] = e.id;
  for (const name of extraEnvs) {
    const r = await api.post(`/projects/${res.body.uuid}/environments`, { name });
    expect(r.status).toBe(201);
    env[name] = r.body.data.id;
  }
  return { uuid: res.body.uuid, name: res.body.name, env };
}

interface UserFx {
  userId: number;
  token: string;
  api: ApiClient;
}

async function newUser(role: TeamRole = "member", teamId = team.teamId): Promise<UserFx> {
  const m = await t.newMember(teamId, role);
  return { ...m, api: t.api(m.token) };
}

async function userRecord(userId: number) {
  return t.instance.database.prisma.user.findUniqueOrThrow({ where: { id: userId } });
}

async function grant(project: ProjectFx, userId: number, level: PermissionLevel, api: ApiClient = owner) {
  const res = await api.post("/permissions/project", { project_uuid: project.uuid, user_id: userId, permission_level: level });
  expect(res.status).toBe(201);
  return res.body.data.id as number;
}

async function override(environmentId: number, userId: number, level: PermissionLevel, api: ApiClient = owner) {
  const res = await api.post("/permissions/environment", { environment_id: environmentId, user_id: userId, permission_level: level });
  expect(res.status).toBe(201);
  return res.body.data.id as number;
}

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam("permissions team");
  owner = team.api;
  other = await t.newTeam("other team");
});
afterAll(async () => {
  await t?.close();
});

describe("POST /permissions/project", () => {
  it.each(LEVELS)("grants %s with the spec's ability table and response shape", async (level) => {
    const p = await newProject();
    const u = await newUser();
    const res = await owner.post("/permissions/project", { project_uuid: p.uuid, user_id: u.userId, permission_level: level });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      message: expect.any(String),
      data: { id: expect.any(Number), project_uuid: p.uuid, user_id: u.userId, ...ABILITIES[level] },
    });

    const one = await owner.get(`/permissions/project/${res.body.data.id}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: res.body.data.id, permission_level: level, ...ABILITIES[level] });
  });

  it("answers 409 when the user already has access to the project", async () => {
    const p = await newProject();
    const u = await newUser();
    await grant(p, u.userId, "view_only");
    const res = await owner.post("/permissions/project", { project_uuid: p.uuid, user_id: u.userId, permission_level: "full_access" });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ message: expect.any(String) });
    // the existing grant is unchanged
    const list = await owner.get("/permissions/project", { project_uuid: p.uuid, user_id: u.userId });
    expect(list.body.data).toHaveLength(1);
    expect(list.body.data[0].permission_level).toBe("view_only");
  });

  it("answers 422 for a bad permission_level or missing fields", async () => {
    const p = await newProject();
    const u = await newUser();
    const cases: [unknown, string[]][] = [
      [{ project_uuid: p.uuid, user_id: u.userId, permission_level: "admin" }, ["permission_level"]],
      [{ project_uuid: p.uuid, user_id: u.userId }, ["permission_level"]],
      [{ user_id: u.userId, permission_level: "deploy" }, ["project_uuid"]],
      [{ project_uuid: p.uuid, permission_level: "deploy" }, ["user_id"]],
      [{ project_uuid: p.uuid, user_id: String(u.userId), permission_level: "deploy" }, ["user_id"]],
      [{ project_uuid: p.uuid, user_id: 0, permission_level: "deploy" }, ["user_id"]],
      [{ project_uuid: p.uuid, user_id: 1.5, permission_level: "deploy" }, ["user_id"]],
      [{ project_uuid: p.uuid, user_id: 3_000_000_000, permission_level: "deploy" }, ["user_id"]],
      [{}, ["project_uuid", "user_id", "permission_level"]],
    ];
    for (const [body, fields] of cases) {
      const res = await owner.post("/permissions/project", body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body.message).toEqual(expect.any(String));
      expect(Object.keys(res.body.errors).sort()).toEqual([...fields].sort());
    }
    const none = await owner.get("/permissions/project", { project_uuid: p.uuid });
    expect(none.body.data).toEqual([]);
  });

  it("answers 404 for an unknown project or user, and for a project or user of another team", async () => {
    const p = await newProject();
    const u = await newUser();
    const foreignProject = await newProject(other.api);
    const foreignUser = await newUser("member", other.teamId);
    const cases = [
      { project_uuid: "00000000-0000-0000-0000-000000000000", user_id: u.userId },
      { project_uuid: p.uuid, user_id: 999_999 },
      { project_uuid: p.uuid, user_id: foreignUser.userId },
      { project_uuid: foreignProject.uuid, user_id: u.userId },
      { project_uuid: foreignProject.uuid, user_id: foreignUser.userId },
    ];
    for (const c of cases) {
      const res = await owner.post("/permissions/project", { ...c, permission_level: "view_only" });
      expect(res.status, JSON.stringify(c)).toBe(404);
      expect(res.body).toEqual({ message: expect.any(String) });
    }
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toEqual([]);
    expect((await other.api.get("/permissions/project", { project_uuid: foreignProject.uuid })).body.data).toEqual([]);
  });
});

describe("GET /permissions/project", () => {
  it("lists grants with the spec's fields and filters by project_uuid and user_id", async () => {
    const p1 = await newProject();
    const p2 = await newProject();
    const a = await newUser();
    const b = await newUser("viewer");
    const idA1 = await grant(p1, a.userId, "view_only");
    const idB1 = await grant(p1, b.userId, "deploy");
    const idA2 = await grant(p2, a.userId, "full_access");

    const all = await owner.get("/permissions/project");
    expect(all.status).toBe(200);
    expect(Object.keys(all.body)).toEqual(["data"]);
    const ua = await userRecord(a.userId);
    const item = all.body.data.find((x: { id: number }) => x.id === idA1);
    expect(item).toEqual({
      id: idA1,
      project_uuid: p1.uuid,
      project_name: p1.name,
      user_id: a.userId,
      user_name: ua.name,
      user_email: ua.email,
      ...ABILITIES.view_only,
      permission_level: "view_only",
      granted_level: "view_only",
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    expect(all.body.data.map((x: { id: number }) => x.id)).toEqual(expect.arrayContaining([idA1, idB1, idA2]));

    const ids = (r: { body: { data: { id: number }[] } }) => r.body.data.map((x) => x.id).sort((x, y) => x - y);
    expect(ids(await owner.get("/permissions/project", { project_uuid: p1.uuid }))).toEqual([idA1, idB1].sort((x, y) => x - y));
    expect(ids(await owner.get("/permissions/project", { user_id: a.userId }))).toEqual([idA1, idA2].sort((x, y) => x - y));
    expect(ids(await owner.get("/permissions/project", { project_uuid: p2.uuid, user_id: a.userId }))).toEqual([idA2]);
    expect(ids(await owner.get("/permissions/project", { project_uuid: p2.uuid, user_id: b.userId }))).toEqual([]);
    expect(ids(await owner.get("/permissions/project", { project_uuid: "no-such-project" }))).toEqual([]);
    expect(ids(await owner.get("/permissions/project", { user_id: 999_999 }))).toEqual([]);

    // b is a viewer: granted deploy, it can only view (issue 15: what the user can really do).
    const d = (await owner.get("/permissions/project", { project_uuid: p1.uuid })).body.data.find((x: { id: number }) => x.id === idB1);
    expect(d).toMatchObject({ permission_level: "view_only", granted_level: "deploy", ...ABILITIES.view_only });
  });

  it("answers 422 for a non-integer user_id filter", async () => {
    const res = await owner.get("/permissions/project", { user_id: "abc" });
    expect(res.status).toBe(422);
    expect(res.body.errors).toHaveProperty("user_id");
  });

  it("paginates with page and per_page", async () => {
    const p = await newProject();
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push(await grant(p, (await newUser()).userId, "view_only"));

    const page1 = await owner.get("/permissions/project", { project_uuid: p.uuid, per_page: 2 });
    expect(page1.status).toBe(200);
    expect(page1.body.data.map((x: { id: number }) => x.id)).toEqual(ids.slice(0, 2));
    expect(page1.body.meta).toEqual({ current_page: 1, per_page: 2, total: 5, last_page: 3 });
    const page3 = await owner.get("/permissions/project", { project_uuid: p.uuid, per_page: 2, page: 3 });
    expect(page3.body.data.map((x: { id: number }) => x.id)).toEqual(ids.slice(4));
    expect(page3.body.meta).toEqual({ current_page: 3, per_page: 2, total: 5, last_page: 3 });
    const beyond = await owner.get("/permissions/project", { project_uuid: p.uuid, per_page: 2, page: 4 });
    expect(beyond.body.data).toEqual([]);
    const defaults = await owner.get("/permissions/project", { project_uuid: p.uuid, page: 1 });
    expect(defaults.body.meta).toEqual({ current_page: 1, per_page: 15, total: 5, last_page: 1 });
    const everything = await owner.get("/permissions/project", { project_uuid: p.uuid });
    expect(everything.body.data).toHaveLength(5);
    expect(everything.body.meta).toBeUndefined();
    expect((await owner.get("/permissions/project", { per_page: 101 })).status).toBe(422);
    expect((await owner.get("/permissions/project", { page: 0 })).status).toBe(422);
  });
});

describe("GET/PUT/DELETE /permissions/project/{id}", () => {
  it("GET by id returns the full permission; 404 when unknown or of another team", async () => {
    const p = await newProject();
    const u = await newUser();
    const id = await grant(p, u.userId, "deploy");
    const rec = await userRecord(u.userId);
    const res = await owner.get(`/permissions/project/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id,
      project_uuid: p.uuid,
      project_name: p.name,
      user_id: u.userId,
      user_name: rec.name,
      user_email: rec.email,
      ...ABILITIES.deploy,
      permission_level: "deploy",
      granted_level: "deploy",
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    expect((await owner.get("/permissions/project/999999")).status).toBe(404);
    expect((await other.api.get(`/permissions/project/${id}`)).status).toBe(404);
  });

  it("PUT changes the level and with it the abilities", async () => {
    const p = await newProject();
    const u = await newUser();
    const id = await grant(p, u.userId, "view_only");
    for (const level of ["deploy", "full_access", "view_only"] as const) {
      const res = await owner.put(`/permissions/project/${id}`, { permission_level: level });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        message: expect.any(String),
        data: { id, project_uuid: p.uuid, user_id: u.userId, ...ABILITIES[level] },
      });
      const now = await owner.get(`/permissions/project/${id}`);
      expect(now.body).toMatchObject({ permission_level: level, ...ABILITIES[level] });
      expect(Date.parse(now.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(now.body.created_at));
    }
    expect((await owner.put(`/permissions/project/${id}`, { permission_level: "owner" })).status).toBe(422);
    expect((await owner.put(`/permissions/project/${id}`, {})).status).toBe(422);
    expect((await owner.put("/permissions/project/999999", { permission_level: "deploy" })).status).toBe(404);
    expect((await other.api.put(`/permissions/project/${id}`, { permission_level: "full_access" })).status).toBe(404);
    expect((await owner.get(`/permissions/project/${id}`)).body.permission_level).toBe("view_only");
  });

  it("DELETE revokes the grant", async () => {
    const p = await newProject();
    const u = await newUser();
    const id = await grant(p, u.userId, "full_access");
    expect((await other.api.delete(`/permissions/project/${id}`)).status).toBe(404);
    const res = await owner.delete(`/permissions/project/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });
    expect((await owner.get(`/permissions/project/${id}`)).status).toBe(404);
    expect((await owner.delete(`/permissions/project/${id}`)).status).toBe(404);
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toEqual([]);
    // the user may be granted again afterwards
    await grant(p, u.userId, "view_only");
  });
});

describe("bulk grant and revoke", () => {
  it("POST /permissions/project/bulk grants to every current member and viewer (not owner/admin)", async () => {
    const fx = await t.newTeam("bulk team");
    const admin = await newUser("admin", fx.teamId);
    const m1 = await newUser("member", fx.teamId);
    const m2 = await newUser("member", fx.teamId);
    const v = await newUser("viewer", fx.teamId);
    const p = await newProject(fx.api);
    const q = await newProject(fx.api);
    // m1 already has a grant: bulk updates it instead of duplicating it
    await grant(p, m1.userId, "view_only", fx.api);

    const res = await fx.api.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "deploy" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String), count: 3 });

    const list = await fx.api.get("/permissions/project", { project_uuid: p.uuid });
    const byUser = new Map(list.body.data.map((x: { user_id: number; permission_level: string }) => [x.user_id, x]));
    expect([...byUser.keys()].sort()).toEqual([m1.userId, m2.userId, v.userId].sort());
    expect(byUser.has(fx.ownerId)).toBe(false);
    expect(byUser.has(admin.userId)).toBe(false);
    // The viewer's grant says deploy; what it can do stays view_only (issue 15).
    for (const x of list.body.data) {
      if (x.user_id === v.userId) expect(x).toMatchObject({ permission_level: "view_only", granted_level: "deploy", ...ABILITIES.view_only });
      else expect(x).toMatchObject({ permission_level: "deploy", granted_level: "deploy", ...ABILITIES.deploy });
    }
    // other projects are untouched
    expect((await fx.api.get("/permissions/project", { project_uuid: q.uuid })).body.data).toEqual([]);

    // a member added later is included in the next bulk grant
    const m3 = await newUser("member", fx.teamId);
    const again = await fx.api.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "full_access" });
    expect(again.body).toEqual({ message: expect.any(String), count: 4 });
    const after = (await fx.api.get("/permissions/project", { project_uuid: p.uuid })).body.data;
    expect(after).toHaveLength(4);
    expect(after.map((x: { user_id: number }) => x.user_id)).toContain(m3.userId);
    for (const x of after) {
      if (x.user_id === v.userId) expect(x).toMatchObject({ permission_level: "view_only", granted_level: "full_access", ...ABILITIES.view_only });
      else expect(x).toMatchObject({ permission_level: "full_access", granted_level: "full_access", ...ABILITIES.full_access });
    }
  });

  it("bulk grant never lowers a grant unless asked: overwrite true sets every grant to the level", async () => {
    const fx = await t.newTeam("bulk no-lower team");
    const lead = await newUser("member", fx.teamId);
    const dev = await newUser("member", fx.teamId);
    const fresh = await newUser("member", fx.teamId);
    const p = await newProject(fx.api);
    const leadGrant = await grant(p, lead.userId, "full_access", fx.api);
    const devGrant = await grant(p, dev.userId, "view_only", fx.api);
    const levelOf = async (id: number) => (await fx.api.get(`/permissions/project/${id}`)).body.granted_level;

    const res = await fx.api.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "deploy" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String), count: 3 });
    expect(res.body.message).toMatch(/1 new, 1 raised, 1 kept/);
    expect(await levelOf(leadGrant)).toBe("full_access"); // kept: higher than deploy
    expect(await levelOf(devGrant)).toBe("deploy"); // raised
    const mine = (await fx.api.get("/permissions/project", { project_uuid: p.uuid, user_id: fresh.userId })).body.data;
    expect(mine).toMatchObject([{ permission_level: "deploy" }]); // created
    // The lead can still delete in the project: nothing was taken away.
    expect((await lead.api.patch(`/projects/${p.uuid}`, { description: "still mine" })).status).toBe(200);

    // Asked for: every grant becomes exactly the level, the higher one lowered.
    const over = await fx.api.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "deploy", overwrite: true });
    expect(over.status).toBe(200);
    expect(over.body).toEqual({ message: expect.any(String), count: 3 });
    expect(over.body.message).toMatch(/0 new, 1 changed, 2 already at it/);
    expect(await levelOf(leadGrant)).toBe("deploy");
    expect((await lead.api.patch(`/projects/${p.uuid}`, { description: "not any more" })).status).toBe(403);
    expect((await fx.api.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "deploy", overwrite: "yes" })).status).toBe(422);
  });

  it("bulk grant validates its body and resolves the project inside the team", async () => {
    const p = await newProject();
    const foreign = await newProject(other.api);
    expect((await owner.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "root" })).status).toBe(422);
    expect((await owner.post("/permissions/project/bulk", { permission_level: "deploy" })).status).toBe(422);
    expect((await owner.post("/permissions/project/bulk", { project_uuid: p.uuid })).status).toBe(422);
    expect((await owner.post("/permissions/project/bulk", { project_uuid: "nope", permission_level: "deploy" })).status).toBe(404);
    expect((await owner.post("/permissions/project/bulk", { project_uuid: foreign.uuid, permission_level: "deploy" })).status).toBe(404);
    expect((await other.api.get("/permissions/project", { project_uuid: foreign.uuid })).body.data).toEqual([]);
  });

  it("DELETE /permissions/project/bulk/{project_uuid} removes all user access (grants and overrides)", async () => {
    const p = await newProject();
    const q = await newProject();
    const a = await newUser();
    const b = await newUser();
    const c = await newUser();
    await grant(p, a.userId, "full_access");
    await grant(p, b.userId, "view_only");
    await override(p.env.production!, a.userId, "view_only");
    await override(p.env.staging!, c.userId, "deploy");
    const keep = await grant(q, a.userId, "deploy");
    const keepOverride = await override(q.env.staging!, b.userId, "deploy");

    const res = await owner.delete(`/permissions/project/bulk/${p.uuid}`);
    expect(res.status).toBe(200);
    // count = project grants + environment overrides removed
    expect(res.body).toEqual({ message: expect.any(String), count: 4 });
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toEqual([]);
    for (const envId of Object.values(p.env)) {
      expect((await owner.get("/permissions/environment", { environment_id: envId })).body.data).toEqual([]);
    }
    // other projects keep theirs
    expect((await owner.get(`/permissions/project/${keep}`)).status).toBe(200);
    const qOverrides = (await owner.get("/permissions/environment", { environment_id: q.env.staging! })).body.data;
    expect(qOverrides.map((x: { id: number }) => x.id)).toEqual([keepOverride]);
    // the members no longer see the project
    expect((await a.api.get(`/projects/${p.uuid}`)).status).toBe(404);
    expect((await c.api.get(`/projects/${p.uuid}`)).status).toBe(404);

    const again = await owner.delete(`/permissions/project/bulk/${p.uuid}`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ message: expect.any(String), count: 0 });
  });

  it("bulk revoke answers 404 for an unknown project or one of another team", async () => {
    const foreign = await newProject(other.api);
    const u = await newUser("member", other.teamId);
    await grant(foreign, u.userId, "deploy", other.api);
    expect((await owner.delete("/permissions/project/bulk/no-such-project")).status).toBe(404);
    expect((await owner.delete(`/permissions/project/bulk/${foreign.uuid}`)).status).toBe(404);
    expect((await other.api.get("/permissions/project", { project_uuid: foreign.uuid })).body.data).toHaveLength(1);
  });
});

describe("environment overrides", () => {
  it("POST /permissions/environment creates an override (201) with the spec's shape", async () => {
    const p = await newProject();
    const u = await newUser();
    for (const [i, level] of LEVELS.entries()) {
      const envName = ["production", "staging", "qa"][i]!;
      const envId =
        p.env[envName] ?? (await owner.post(`/projects/${p.uuid}/environments`, { name: envName })).body.data.id;
      p.env[envName] = envId;
      const res = await owner.post("/permissions/environment", { environment_id: envId, user_id: u.userId, permission_level: level });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        message: expect.any(String),
        data: { id: expect.any(Number), environment_id: envId, user_id: u.userId, ...ABILITIES[level] },
      });
    }
    // one override per user and environment
    const dup = await owner.post("/permissions/environment", { environment_id: p.env.production, user_id: u.userId, permission_level: "deploy" });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual({ message: expect.any(String) });
  });

  it("an override needs no project-level grant", async () => {
    const p = await newProject();
    const u = await newUser();
    await override(p.env.staging!, u.userId, "view_only");
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toEqual([]);
  });

  it("GET /permissions/environment lists overrides with the spec's fields and filters", async () => {
    const p = await newProject();
    const a = await newUser();
    const b = await newUser();
    const o1 = await override(p.env.production!, a.userId, "view_only");
    const o2 = await override(p.env.staging!, a.userId, "full_access");
    const o3 = await override(p.env.staging!, b.userId, "deploy");
    const ua = await userRecord(a.userId);

    const all = await owner.get("/permissions/environment");
    expect(all.status).toBe(200);
    expect(Object.keys(all.body)).toEqual(["data"]);
    const item = all.body.data.find((x: { id: number }) => x.id === o1);
    expect(item).toMatchObject({
      id: o1,
      environment_id: p.env.production,
      environment_name: "production",
      project_uuid: p.uuid,
      user_id: a.userId,
      user_name: ua.name,
      ...ABILITIES.view_only,
      created_at: expect.stringMatching(ISO),
    });
    const spec = [
      "id",
      "environment_id",
      "environment_name",
      "project_uuid",
      "user_id",
      "user_name",
      "can_view",
      "can_deploy",
      "can_manage",
      "can_delete",
      "created_at",
    ];
    expect(Object.keys(item)).toEqual(expect.arrayContaining(spec));

    const ids = (r: { body: { data: { id: number }[] } }) => r.body.data.map((x) => x.id);
    expect(ids(await owner.get("/permissions/environment", { environment_id: p.env.staging! }))).toEqual([o2, o3]);
    expect(ids(await owner.get("/permissions/environment", { user_id: a.userId }))).toEqual([o1, o2]);
    expect(ids(await owner.get("/permissions/environment", { environment_id: p.env.staging!, user_id: b.userId }))).toEqual([o3]);
    expect(ids(await owner.get("/permissions/environment", { environment_id: p.env.production!, user_id: b.userId }))).toEqual([]);
    expect(ids(await owner.get("/permissions/environment", { environment_id: 999_999 }))).toEqual([]);
    const staging = (await owner.get("/permissions/environment", { environment_id: p.env.staging! })).body.data;
    expect(staging[0]).toMatchObject({ environment_name: "staging", ...ABILITIES.full_access });
    expect(staging[1]).toMatchObject({ environment_name: "staging", ...ABILITIES.deploy, permission_level: "deploy", granted_level: "deploy" });
    expect((await owner.get("/permissions/environment", { environment_id: "x" })).status).toBe(422);
    // another team does not see them
    expect(ids(await other.api.get("/permissions/environment", { environment_id: p.env.staging! }))).toEqual([]);
  });

  it("paginates the override list", async () => {
    const p = await newProject();
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push(await override(p.env.production!, (await newUser()).userId, "deploy"));
    const r1 = await owner.get("/permissions/environment", { environment_id: p.env.production!, per_page: 2 });
    expect(r1.body.data.map((x: { id: number }) => x.id)).toEqual(ids.slice(0, 2));
    expect(r1.body.meta).toEqual({ current_page: 1, per_page: 2, total: 3, last_page: 2 });
    const r2 = await owner.get("/permissions/environment", { environment_id: p.env.production!, per_page: 2, page: 2 });
    expect(r2.body.data.map((x: { id: number }) => x.id)).toEqual(ids.slice(2));
    expect(r2.body.meta).toEqual({ current_page: 2, per_page: 2, total: 3, last_page: 2 });
    expect((await owner.get("/permissions/environment", { per_page: 0 })).status).toBe(422);
  });

  it("DELETE /permissions/environment/{id} removes the override", async () => {
    const p = await newProject();
    const u = await newUser();
    const id = await override(p.env.production!, u.userId, "full_access");
    expect((await other.api.delete(`/permissions/environment/${id}`)).status).toBe(404);
    const res = await owner.delete(`/permissions/environment/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });
    expect((await owner.get("/permissions/environment", { environment_id: p.env.production! })).body.data).toEqual([]);
    expect((await owner.delete(`/permissions/environment/${id}`)).status).toBe(404);
    expect((await owner.delete("/permissions/environment/999999")).status).toBe(404);
  });

  it("answers 422 for a bad permission_level or missing fields", async () => {
    const p = await newProject();
    const u = await newUser();
    const cases: [unknown, string[]][] = [
      [{ environment_id: p.env.production, user_id: u.userId, permission_level: "everything" }, ["permission_level"]],
      [{ environment_id: p.env.production, user_id: u.userId }, ["permission_level"]],
      [{ user_id: u.userId, permission_level: "deploy" }, ["environment_id"]],
      [{ environment_id: p.env.production, permission_level: "deploy" }, ["user_id"]],
      [{ environment_id: "production", user_id: u.userId, permission_level: "deploy" }, ["environment_id"]],
      [{ environment_id: 3_000_000_000, user_id: u.userId, permission_level: "deploy" }, ["environment_id"]],
      [{}, ["environment_id", "user_id", "permission_level"]],
    ];
    for (const [body, fields] of cases) {
      const res = await owner.post("/permissions/environment", body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(Object.keys(res.body.errors).sort()).toEqual([...fields].sort());
    }
  });

  it("answers 404 for an unknown environment or user, and for one of another team", async () => {
    const p = await newProject();
    const u = await newUser();
    const foreign = await newProject(other.api);
    const foreignUser = await newUser("member", other.teamId);
    const cases = [
      { environment_id: 999_999, user_id: u.userId },
      { environment_id: p.env.production, user_id: 999_999 },
      { environment_id: p.env.production, user_id: foreignUser.userId },
      { environment_id: foreign.env.production, user_id: u.userId },
      { environment_id: foreign.env.production, user_id: foreignUser.userId },
    ];
    for (const c of cases) {
      const res = await owner.post("/permissions/environment", { ...c, permission_level: "deploy" });
      expect(res.status, JSON.stringify(c)).toBe(404);
      expect(res.body).toEqual({ message: expect.any(String) });
    }
    expect((await owner.get("/permissions/environment", { environment_id: p.env.production! })).body.data).toEqual([]);
  });
});

describe("permission responses say what the user can really do (issue 15)", () => {
  it("full_access granted to a viewer: can_manage false everywhere, the grant kept; it applies in full once the viewer is a member", async () => {
    const p = await newProject();
    const v = await newUser("viewer");
    const created = await owner.post("/permissions/project", { project_uuid: p.uuid, user_id: v.userId, permission_level: "full_access" });
    expect(created.status).toBe(201);
    expect(created.body.data).toEqual({ id: expect.any(Number), project_uuid: p.uuid, user_id: v.userId, ...ABILITIES.view_only });
    expect(created.body.message).toMatch(/viewer.*view_only/);
    const id = created.body.data.id;
    expect((await owner.get(`/permissions/project/${id}`)).body).toMatchObject({ ...ABILITIES.view_only, permission_level: "view_only", granted_level: "full_access" });
    const put = await owner.put(`/permissions/project/${id}`, { permission_level: "deploy" });
    expect(put.body.data).toMatchObject(ABILITIES.view_only);
    // What the response says is what happens: the viewer cannot manage or deploy.
    expect((await v.api.patch(`/projects/${p.uuid}`, { description: "x" })).status).toBe(403);
    const ov = await owner.post("/permissions/environment", { environment_id: p.env.staging!, user_id: v.userId, permission_level: "full_access" });
    expect(ov.body.data).toMatchObject(ABILITIES.view_only);
    expect((await owner.get("/permissions/environment", { user_id: v.userId })).body.data).toMatchObject([
      { ...ABILITIES.view_only, permission_level: "view_only", granted_level: "full_access" },
    ]);

    // The same grants for a member give what they say.
    await t.instance.admin.setMember(team.teamId, v.userId, "member");
    expect((await owner.get(`/permissions/project/${id}`)).body).toMatchObject({ ...ABILITIES.deploy, permission_level: "deploy", granted_level: "deploy" });
    expect((await owner.get("/permissions/environment", { user_id: v.userId })).body.data[0]).toMatchObject({ ...ABILITIES.full_access, permission_level: "full_access" });
    expect((await v.api.patch(`/projects/${p.uuid}`, { description: "x" })).status).toBe(403); // deploy at project level
  });

  it("an admin's grant shows the full access the admin has whatever it says", async () => {
    const p = await newProject();
    const a = await newUser("admin");
    const created = await owner.post("/permissions/project", { project_uuid: p.uuid, user_id: a.userId, permission_level: "view_only" });
    expect(created.body.data).toMatchObject(ABILITIES.full_access);
    expect((await owner.get(`/permissions/project/${created.body.data.id}`)).body).toMatchObject({ permission_level: "full_access", granted_level: "view_only" });
  });
});

describe("who may manage permissions", () => {
  it("members and viewers get 403 on every management endpoint, even with full_access", async () => {
    const p = await newProject();
    const target = await newUser();
    const existing = await grant(p, target.userId, "view_only");
    const existingOverride = await override(p.env.staging!, target.userId, "view_only");
    for (const role of ["member", "viewer"] as const) {
      const u = await newUser(role);
      await grant(p, u.userId, "full_access");
      const calls = [
        () => u.api.post("/permissions/project", { project_uuid: p.uuid, user_id: u.userId, permission_level: "full_access" }),
        () => u.api.post("/permissions/project", { project_uuid: "unknown", user_id: 999_999, permission_level: "deploy" }),
        () => u.api.put(`/permissions/project/${existing}`, { permission_level: "full_access" }),
        () => u.api.delete(`/permissions/project/${existing}`),
        () => u.api.post("/permissions/project/bulk", { project_uuid: p.uuid, permission_level: "full_access" }),
        () => u.api.delete(`/permissions/project/bulk/${p.uuid}`),
        () => u.api.post("/permissions/environment", { environment_id: p.env.production, user_id: u.userId, permission_level: "full_access" }),
        () => u.api.delete(`/permissions/environment/${existingOverride}`),
      ];
      for (const call of calls) {
        const res = await call();
        expect(res.status, `${role}: ${call.toString()}`).toBe(403);
        expect(res.body).toEqual({ message: expect.any(String) });
      }
    }
    // nothing changed
    expect((await owner.get(`/permissions/project/${existing}`)).body.permission_level).toBe("view_only");
    expect((await owner.get("/permissions/environment", { environment_id: p.env.staging! })).body.data).toHaveLength(1);
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toHaveLength(3);
  });

  it("members and viewers read only their own grants and overrides", async () => {
    const p = await newProject();
    const me = await newUser();
    const viewer = await newUser("viewer");
    const someone = await newUser();
    const mine = await grant(p, me.userId, "deploy");
    const theirs = await grant(p, someone.userId, "full_access");
    const viewerGrant = await grant(p, viewer.userId, "view_only");
    const myOverride = await override(p.env.production!, me.userId, "view_only");
    await override(p.env.production!, someone.userId, "full_access");

    const list = await me.api.get("/permissions/project");
    expect(list.status).toBe(200);
    expect(list.body.data.map((x: { id: number }) => x.id)).toEqual([mine]);
    expect((await me.api.get("/permissions/project", { user_id: someone.userId })).body.data).toEqual([]);
    expect((await me.api.get("/permissions/project", { project_uuid: p.uuid })).body.data.map((x: { id: number }) => x.id)).toEqual([mine]);
    expect((await me.api.get(`/permissions/project/${mine}`)).status).toBe(200);
    expect((await me.api.get(`/permissions/project/${theirs}`)).status).toBe(404);
    expect((await me.api.get("/permissions/environment")).body.data.map((x: { id: number }) => x.id)).toEqual([myOverride]);
    expect((await me.api.get("/permissions/environment", { user_id: someone.userId })).body.data).toEqual([]);

    expect((await viewer.api.get("/permissions/project")).body.data.map((x: { id: number }) => x.id)).toEqual([viewerGrant]);
    expect((await viewer.api.get(`/permissions/project/${mine}`)).status).toBe(404);
    expect((await viewer.api.get("/permissions/environment")).body.data).toEqual([]);

    const paged = await me.api.get("/permissions/project", { per_page: 10 });
    expect(paged.body.meta).toEqual({ current_page: 1, per_page: 10, total: 1, last_page: 1 });
  });

  it("admins and team automation tokens manage permissions", async () => {
    const p = await newProject();
    const admin = await newUser("admin");
    const u = await newUser();
    const id = await grant(p, u.userId, "view_only", admin.api);
    expect((await admin.api.put(`/permissions/project/${id}`, { permission_level: "deploy" })).status).toBe(200);
    expect((await admin.api.get("/permissions/project", { project_uuid: p.uuid })).body.data).toHaveLength(1);

    const automation = client(t.url + "/api/v1", await t.instance.admin.createToken({ teamId: team.teamId, name: "ci", scopes: ["read", "write"] }));
    const v = await newUser("viewer");
    await grant(p, v.userId, "deploy", automation);
    await override(p.env.production!, u.userId, "full_access", automation);
    const bulk = await automation.delete(`/permissions/project/bulk/${p.uuid}`);
    expect(bulk.body).toEqual({ message: expect.any(String), count: 3 });
  });

  it("a token without the write scope cannot manage permissions", async () => {
    const p = await newProject();
    const readOnly = client(t.url + "/api/v1", await t.instance.admin.createToken({ teamId: team.teamId, userId: team.ownerId, name: "ro", scopes: ["read"] }));
    const u = await newUser();
    const res = await readOnly.post("/permissions/project", { project_uuid: p.uuid, user_id: u.userId, permission_level: "deploy" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: "Invalid ability provided." });
    expect((await readOnly.get("/permissions/project", { project_uuid: p.uuid })).status).toBe(200);
  });
});
