import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PermissionLevel, TeamRole } from "@capstan/shared";
import { client, startTestInstance, type ApiClient, type TeamFixture, type TestInstance } from "./harness.js";

/**
 * Project/environment permissions enforced on the project routes (spec 4.2, section 5),
 * through real HTTP with member, viewer, admin and automation tokens.
 *
 * Rules under test: owner/admin and tokens without a user bypass; a member sees only
 * projects it has a project grant or an environment override on, and inside them only the
 * environments its effective level (override, else project grant) reaches; a viewer sees
 * everything read-only; no view at all answers 404, view without the needed level 403.
 */

let t: TestInstance;
let team: TeamFixture;
let owner: ApiClient;

interface ProjectFx {
  uuid: string;
  name: string;
  env: Record<string, number>;
}

interface UserFx {
  userId: number;
  api: ApiClient;
}

let seq = 0;
async function newProject(envs: string[] = ["staging"], api: ApiClient = owner): Promise<ProjectFx> {
  const res = await api.post("/projects", { name: `access-${++seq}`, description: "d" });
  expect(res.status).toBe(201);
  const env: Record<string, number> = {};
  for (const e of res.body.environments) env[e.name] = e.id;
  for (const name of envs) {
    const r = await api.post(`/projects/${res.body.uuid}/environments`, { name });
    expect(r.status).toBe(201);
    env[name] = r.body.data.id;
  }
  return { uuid: res.body.uuid, name: res.body.name, env };
}

async function newUser(role: TeamRole = "member", teamId = team.teamId): Promise<UserFx> {
  const m = await t.newMember(teamId, role);
  return { userId: m.userId, api: t.api(m.token) };
}

async function grant(p: ProjectFx, u: UserFx, level: PermissionLevel): Promise<number> {
  const res = await owner.post("/permissions/project", { project_uuid: p.uuid, user_id: u.userId, permission_level: level });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

async function override(p: ProjectFx, envName: string, u: UserFx, level: PermissionLevel): Promise<number> {
  const res = await owner.post("/permissions/environment", { environment_id: p.env[envName], user_id: u.userId, permission_level: level });
  expect(res.status).toBe(201);
  return res.body.data.id;
}

async function dropOverride(id: number) {
  expect((await owner.delete(`/permissions/environment/${id}`)).status).toBe(200);
}

const envNames = (body: { environments: { name: string }[] }) => body.environments.map((e) => e.name);
async function listed(api: ApiClient): Promise<Map<string, { environments: { name: string }[] }>> {
  const res = await api.get("/projects");
  expect(res.status).toBe(200);
  return new Map(res.body.data.map((p: { uuid: string }) => [p.uuid, p]));
}

/** Status of every mutating project route for one caller (the project is left unchanged on 403/404). */
async function mutationStatuses(api: ApiClient, p: ProjectFx, env = "staging") {
  return {
    patch: (await api.patch(`/projects/${p.uuid}`, { description: "changed" })).status,
    createEnv: (await api.post(`/projects/${p.uuid}/environments`, { name: `env-${++seq}` })).status,
    deleteEnv: (await api.delete(`/projects/${p.uuid}/environments/${env}`)).status,
    deleteProject: (await api.delete(`/projects/${p.uuid}`)).status,
  };
}

async function readStatuses(api: ApiClient, p: ProjectFx, env = "production") {
  return {
    project: (await api.get(`/projects/${p.uuid}`)).status,
    environments: (await api.get(`/projects/${p.uuid}/environments`)).status,
    environment: (await api.get(`/projects/${p.uuid}/${env}`)).status,
  };
}

async function expectUnchanged(p: ProjectFx, envs: string[]) {
  const res = await owner.get(`/projects/${p.uuid}`);
  expect(res.status).toBe(200);
  expect(res.body.description).toBe("d");
  expect(envNames(res.body)).toEqual(envs);
}

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam("access team");
  owner = team.api;
});
afterAll(async () => {
  await t?.close();
});

describe("member with a project-level grant", () => {
  it("view_only: can read the project and its environments, every change is 403", async () => {
    const p = await newProject();
    const m = await newUser();
    await grant(p, m, "view_only");

    const one = await m.api.get(`/projects/${p.uuid}`);
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ uuid: p.uuid, name: p.name });
    expect(envNames(one.body)).toEqual(["production", "staging"]);
    const envs = await m.api.get(`/projects/${p.uuid}/environments`);
    expect(envs.status).toBe(200);
    expect(envs.body.data.map((e: { name: string }) => e.name)).toEqual(["production", "staging"]);
    expect((await m.api.get(`/projects/${p.uuid}/staging`)).body).toMatchObject({ name: "staging", project_uuid: p.uuid });
    expect(envNames((await listed(m.api)).get(p.uuid)!)).toEqual(["production", "staging"]);

    const patch = await m.api.patch(`/projects/${p.uuid}`, { name: "renamed" });
    expect(patch.status).toBe(403);
    expect(patch.body).toEqual({ message: expect.any(String) });
    expect(await mutationStatuses(m.api, p)).toEqual({ patch: 403, createEnv: 403, deleteEnv: 403, deleteProject: 403 });
    expect((await m.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(403);
    await expectUnchanged(p, ["production", "staging"]);
  });

  it("deploy: can read, but cannot manage or delete", async () => {
    const p = await newProject();
    const m = await newUser();
    await grant(p, m, "deploy");
    expect(await readStatuses(m.api, p)).toEqual({ project: 200, environments: 200, environment: 200 });
    expect(await mutationStatuses(m.api, p)).toEqual({ patch: 403, createEnv: 403, deleteEnv: 403, deleteProject: 403 });
    await expectUnchanged(p, ["production", "staging"]);
  });

  it("full_access: can patch the project, create and delete environments, delete the project", async () => {
    const p = await newProject();
    const m = await newUser();
    await grant(p, m, "full_access");

    const patch = await m.api.patch(`/projects/${p.uuid}`, { name: "renamed", description: "new" });
    expect(patch.status).toBe(200);
    expect(patch.body.data).toMatchObject({ uuid: p.uuid, name: "renamed", description: "new" });
    const created = await m.api.post(`/projects/${p.uuid}/environments`, { name: "qa" });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ message: expect.any(String), data: { id: expect.any(Number), name: "qa" } });
    // the new environment is reached by the project-level grant
    expect(envNames((await m.api.get(`/projects/${p.uuid}`)).body)).toEqual(["production", "staging", "qa"]);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/qa`)).status).toBe(200);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/staging`)).status).toBe(200);
    expect(envNames((await owner.get(`/projects/${p.uuid}`)).body)).toEqual(["production"]);

    const del = await m.api.delete(`/projects/${p.uuid}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ message: expect.any(String) });
    expect((await owner.get(`/projects/${p.uuid}`)).status).toBe(404);
  });

  it("a change of the grant applies on the next request", async () => {
    const p = await newProject();
    const m = await newUser();
    const id = await grant(p, m, "view_only");
    expect((await m.api.patch(`/projects/${p.uuid}`, { description: "x" })).status).toBe(403);
    expect((await owner.put(`/permissions/project/${id}`, { permission_level: "full_access" })).status).toBe(200);
    expect((await m.api.patch(`/projects/${p.uuid}`, { description: "x" })).status).toBe(200);
    expect((await owner.delete(`/permissions/project/${id}`)).status).toBe(200);
    expect((await m.api.get(`/projects/${p.uuid}`)).status).toBe(404);
    expect((await listed(m.api)).has(p.uuid)).toBe(false);
  });
});

describe("member without any permission", () => {
  it("gets 404 on the project, its environments and every change; the list does not show it", async () => {
    const p = await newProject();
    const visible = await newProject();
    const m = await newUser();
    await grant(visible, m, "view_only");

    const res = await m.api.get(`/projects/${p.uuid}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: expect.any(String) });
    expect(await readStatuses(m.api, p)).toEqual({ project: 404, environments: 404, environment: 404 });
    expect(await mutationStatuses(m.api, p)).toEqual({ patch: 404, createEnv: 404, deleteEnv: 404, deleteProject: 404 });
    await expectUnchanged(p, ["production", "staging"]);

    const list = await listed(m.api);
    expect(list.has(p.uuid)).toBe(false);
    expect([...list.keys()]).toEqual([visible.uuid]);
    const paged = await m.api.get("/projects", { per_page: 5 });
    expect(paged.body.meta).toMatchObject({ total: 1 });
  });

  it("a member of the team with no grants at all sees an empty list", async () => {
    await newProject();
    const m = await newUser();
    expect((await m.api.get("/projects")).body).toEqual({ data: [] });
  });
});

describe("environment overrides", () => {
  it("a full_access override on top of view_only reaches one environment only; deleting it restores view_only", async () => {
    const p = await newProject(["staging", "qa"]);
    const m = await newUser();
    await grant(p, m, "view_only");
    const staging = await override(p, "staging", m, "full_access");
    await override(p, "qa", m, "full_access");

    // the overridden environments can be deleted
    expect((await m.api.delete(`/projects/${p.uuid}/environments/qa`)).status).toBe(200);
    // the others follow the project-level grant
    expect((await m.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(403);
    // project-level actions follow the project-level grant too
    expect((await m.api.patch(`/projects/${p.uuid}`, { description: "x" })).status).toBe(403);
    expect((await m.api.post(`/projects/${p.uuid}/environments`, { name: "dev" })).status).toBe(403);
    expect((await m.api.delete(`/projects/${p.uuid}`)).status).toBe(403);

    await dropOverride(staging);
    const del = await m.api.delete(`/projects/${p.uuid}/environments/staging`);
    expect(del.status).toBe(403);
    expect((await m.api.get(`/projects/${p.uuid}/staging`)).status).toBe(200);
    await expectUnchanged(p, ["production", "staging"]);
  });

  it("a view_only override below full_access protects one environment; deleting it restores full_access", async () => {
    const p = await newProject(["staging"]);
    const m = await newUser();
    await grant(p, m, "full_access");
    const prod = await override(p, "production", m, "view_only");

    // still visible, but not deletable
    expect((await m.api.get(`/projects/${p.uuid}/production`)).status).toBe(200);
    expect(envNames((await m.api.get(`/projects/${p.uuid}`)).body)).toEqual(["production", "staging"]);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(403);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/staging`)).status).toBe(200);

    await dropOverride(prod);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(200);
    expect(envNames((await owner.get(`/projects/${p.uuid}`)).body)).toEqual([]);
  });

  it("an override that withholds delete on one environment withholds deleting the whole project", async () => {
    const p = await newProject(["staging"]);
    const m = await newUser();
    await grant(p, m, "full_access");
    const prod = await override(p, "production", m, "view_only");
    expect((await m.api.delete(`/projects/${p.uuid}`)).status).toBe(403);
    expect((await owner.get(`/projects/${p.uuid}`)).status).toBe(200);
    await dropOverride(prod);
    expect((await m.api.delete(`/projects/${p.uuid}`)).status).toBe(200);
    expect((await owner.get(`/projects/${p.uuid}`)).status).toBe(404);
  });

  it("an override alone shows the project with only that environment", async () => {
    const p = await newProject(["staging", "qa"]);
    const m = await newUser();
    const id = await override(p, "staging", m, "view_only");

    const one = await m.api.get(`/projects/${p.uuid}`);
    expect(one.status).toBe(200);
    expect(envNames(one.body)).toEqual(["staging"]);
    expect(envNames((await listed(m.api)).get(p.uuid)!)).toEqual(["staging"]);
    const envs = await m.api.get(`/projects/${p.uuid}/environments`);
    expect(envs.body.data.map((e: { name: string }) => e.name)).toEqual(["staging"]);
    expect((await m.api.get(`/projects/${p.uuid}/staging`)).status).toBe(200);
    // the other environments do not exist for this member
    expect((await m.api.get(`/projects/${p.uuid}/production`)).status).toBe(404);
    expect((await m.api.get(`/projects/${p.uuid}/qa`)).status).toBe(404);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(404);
    // it sees the project, so project-level actions are 403, not 404
    expect(await mutationStatuses(m.api, p)).toEqual({ patch: 403, createEnv: 403, deleteEnv: 403, deleteProject: 403 });

    await dropOverride(id);
    expect((await m.api.get(`/projects/${p.uuid}`)).status).toBe(404);
    expect((await listed(m.api)).has(p.uuid)).toBe(false);
    await expectUnchanged(p, ["production", "staging", "qa"]);
  });

  it("a full_access override alone allows deleting that environment, after which the project disappears", async () => {
    const p = await newProject(["staging"]);
    const m = await newUser();
    await override(p, "staging", m, "full_access");
    expect((await m.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(404);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/staging`)).status).toBe(200);
    // the override went with the environment: nothing is left to see
    expect((await m.api.get(`/projects/${p.uuid}`)).status).toBe(404);
    expect(envNames((await owner.get(`/projects/${p.uuid}`)).body)).toEqual(["production"]);
  });

  it("an environment is addressed by uuid as well as by name, with the same checks", async () => {
    const p = await newProject(["staging"]);
    const m = await newUser();
    await override(p, "staging", m, "view_only");
    const envs = (await owner.get(`/projects/${p.uuid}/environments`)).body.data as { name: string; uuid: string }[];
    const prod = envs.find((e) => e.name === "production")!;
    const staging = envs.find((e) => e.name === "staging")!;
    expect((await m.api.get(`/projects/${p.uuid}/${staging.uuid}`)).status).toBe(200);
    expect((await m.api.get(`/projects/${p.uuid}/${prod.uuid}`)).status).toBe(404);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/${staging.uuid}`)).status).toBe(403);
    expect((await m.api.delete(`/projects/${p.uuid}/environments/${prod.uuid}`)).status).toBe(404);
  });
});

describe("viewer", () => {
  it("sees every project of its team and all environments, changes nothing", async () => {
    const p = await newProject(["staging"]);
    const v = await newUser("viewer");
    const list = await listed(v.api);
    expect(list.has(p.uuid)).toBe(true);
    expect(envNames(list.get(p.uuid)!)).toEqual(["production", "staging"]);
    expect(await readStatuses(v.api, p)).toEqual({ project: 200, environments: 200, environment: 200 });
    expect(await mutationStatuses(v.api, p)).toEqual({ patch: 403, createEnv: 403, deleteEnv: 403, deleteProject: 403 });
    const create = await v.api.post("/projects", { name: "viewer-project" });
    expect(create.status).toBe(403);
    await expectUnchanged(p, ["production", "staging"]);
  });

  it("stays read-only with a full_access grant and full_access overrides", async () => {
    const p = await newProject(["staging"]);
    const v = await newUser("viewer");
    await grant(p, v, "full_access");
    await override(p, "staging", v, "full_access");
    await override(p, "production", v, "deploy");
    expect(await mutationStatuses(v.api, p)).toEqual({ patch: 403, createEnv: 403, deleteEnv: 403, deleteProject: 403 });
    expect((await v.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(403);
    await expectUnchanged(p, ["production", "staging"]);
  });

  it("sees only its own team's projects", async () => {
    const otherTeam = await t.newTeam("viewer other team");
    const foreign = await newProject([], otherTeam.api);
    const v = await newUser("viewer");
    expect((await listed(v.api)).has(foreign.uuid)).toBe(false);
    expect((await v.api.get(`/projects/${foreign.uuid}`)).status).toBe(404);
  });
});

describe("owner, admin and automation tokens bypass permissions", () => {
  it.each(["owner", "admin", "automation"] as const)("%s manages a project without any grant", async (who) => {
    const p = await newProject(["staging"]);
    const api =
      who === "owner"
        ? owner
        : who === "admin"
          ? (await newUser("admin")).api
          : client(t.url + "/api/v1", await t.instance.admin.createToken({ teamId: team.teamId, name: "ci", scopes: ["read", "write"] }));
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toEqual([]);
    expect(envNames((await listed(api)).get(p.uuid)!)).toEqual(["production", "staging"]);
    expect(await readStatuses(api, p)).toEqual({ project: 200, environments: 200, environment: 200 });
    expect((await api.patch(`/projects/${p.uuid}`, { description: "by " + who })).status).toBe(200);
    expect((await api.post(`/projects/${p.uuid}/environments`, { name: "qa" })).status).toBe(201);
    expect((await api.delete(`/projects/${p.uuid}/environments/staging`)).status).toBe(200);
    expect((await api.delete(`/projects/${p.uuid}`)).status).toBe(200);
  });

  it("an admin with a view_only grant and overrides still has full access", async () => {
    const p = await newProject(["staging"]);
    const admin = await newUser("admin");
    await grant(p, admin, "view_only");
    await override(p, "production", admin, "view_only");
    expect((await admin.api.delete(`/projects/${p.uuid}/environments/production`)).status).toBe(200);
    expect((await admin.api.patch(`/projects/${p.uuid}`, { name: "admin-renamed" })).status).toBe(200);
  });

  it("a project created by an admin or automation token gets no grant rows", async () => {
    const admin = await newUser("admin");
    const p = await newProject([], admin.api);
    expect((await owner.get("/permissions/project", { project_uuid: p.uuid })).body.data).toEqual([]);
  });
});

describe("member-created projects", () => {
  it("the creating member gets full_access; other members do not see the project", async () => {
    const m = await newUser();
    const someone = await newUser();
    const created = await m.api.post("/projects", { name: "mine", description: "d" });
    expect(created.status).toBe(201);
    const uuid = created.body.uuid;
    const p: ProjectFx = { uuid, name: "mine", env: { production: created.body.environments[0].id } };

    const grants = (await owner.get("/permissions/project", { project_uuid: uuid })).body.data;
    expect(grants).toHaveLength(1);
    expect(grants[0]).toMatchObject({ user_id: m.userId, permission_level: "full_access", can_manage: true, can_delete: true });
    // the member can read its own grant
    expect((await m.api.get("/permissions/project")).body.data.map((g: { project_uuid: string }) => g.project_uuid)).toEqual([uuid]);

    expect((await listed(m.api)).has(uuid)).toBe(true);
    expect((await someone.api.get(`/projects/${uuid}`)).status).toBe(404);
    expect((await listed(someone.api)).has(uuid)).toBe(false);

    expect((await m.api.patch(`/projects/${uuid}`, { description: "mine, changed" })).status).toBe(200);
    expect((await m.api.post(`/projects/${uuid}/environments`, { name: "staging" })).status).toBe(201);
    expect((await m.api.delete(`/projects/${uuid}/environments/staging`)).status).toBe(200);
    expect(await readStatuses(m.api, p)).toEqual({ project: 200, environments: 200, environment: 200 });
    expect((await m.api.delete(`/projects/${uuid}`)).status).toBe(200);
    expect((await owner.get(`/projects/${uuid}`)).status).toBe(404);
  });
});

describe("403 versus 404", () => {
  it("no view at all is 404 'not found'; view without the level is 403", async () => {
    const p = await newProject(["staging"]);
    const viewOnly = await newUser();
    const stranger = await newUser();
    await grant(p, viewOnly, "view_only");

    const forbidden = await viewOnly.api.delete(`/projects/${p.uuid}`);
    expect(forbidden.status).toBe(403);
    expect(forbidden.body.message).not.toMatch(/not found/i);
    const hidden = await stranger.api.delete(`/projects/${p.uuid}`);
    expect(hidden.status).toBe(404);
    expect(hidden.body.message).toMatch(/not found/i);
    // a hidden project and a project that does not exist answer the same way
    const missing = await stranger.api.delete("/projects/00000000-0000-0000-0000-000000000000");
    expect(missing.status).toBe(404);
    expect(missing.body).toEqual(hidden.body);
    // the same for an environment that does not exist in a visible project
    expect((await viewOnly.api.delete(`/projects/${p.uuid}/environments/nope`)).status).toBe(404);
  });

  it("a project of another team is 404 even for its owner-equivalent in this team", async () => {
    const otherTeam = await t.newTeam("another");
    const foreign = await newProject(["staging"], otherTeam.api);
    expect(await readStatuses(owner, foreign)).toEqual({ project: 404, environments: 404, environment: 404 });
    expect(await mutationStatuses(owner, foreign)).toEqual({ patch: 404, createEnv: 404, deleteEnv: 404, deleteProject: 404 });
    expect((await otherTeam.api.get(`/projects/${foreign.uuid}`)).status).toBe(200);
  });

  it("the token scope is checked before permissions: full_access with a read-only token cannot write", async () => {
    const p = await newProject();
    const m = await t.newMember(team.teamId, "member", ["read"]);
    const api = t.api(m.token);
    await grant(p, { userId: m.userId, api }, "full_access");
    expect((await api.get(`/projects/${p.uuid}`)).status).toBe(200);
    const res = await api.patch(`/projects/${p.uuid}`, { description: "x" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ message: "Invalid ability provided." });
  });
});
