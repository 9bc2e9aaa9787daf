import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";

let t: TestInstance;
beforeAll(async () => {
  t = await startTestInstance();
});
afterAll(async () => {
  await t?.close();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const environmentShape = (name: string) => ({
  id: expect.any(Number),
  uuid: expect.stringMatching(UUID),
  name,
  created_at: expect.stringMatching(ISO),
});
const NONE = { applications: 0, databases: 0, services: 0, total: 0 };
/** An environment of GET /projects/{uuid}: with its resource counts (issue 15). */
const environmentDetailShape = (name: string, counts = NONE) => ({ ...environmentShape(name), resource_counts: counts });

async function createProject(team: TeamFixture, name = "app", description?: string) {
  const res = await team.api.post("/projects", description === undefined ? { name } : { name, description });
  expect(res.status).toBe(201);
  return res.body as { uuid: string; name: string; description: string; environments: { id: number; name: string }[] };
}

describe("POST /projects", () => {
  it("answers 201 with exactly {uuid, name, description, environments:[{id, name:production}]}", async () => {
    const team = await t.newTeam();
    const res = await team.api.post("/projects", { name: "shop", description: "web shop" });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      uuid: expect.stringMatching(UUID),
      name: "shop",
      description: "web shop",
      environments: [{ id: expect.any(Number), name: "production" }],
    });
  });

  it("defaults the description to an empty string and trims the name", async () => {
    const team = await t.newTeam();
    const res = await team.api.post("/projects", { name: "  spaced  " });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: "spaced", description: "" });
  });

  it("gives every project its own production environment and uuid", async () => {
    const team = await t.newTeam();
    const a = await createProject(team, "same");
    const b = await createProject(team, "same");
    expect(a.uuid).not.toBe(b.uuid);
    expect(a.environments[0]!.id).not.toBe(b.environments[0]!.id);
  });

  // Issue 15 changed the rule from "dropped silently" to "refused, naming them" (one rule for
  // all routes, docs/compatibility.md); the intent stays: a client never chooses a project's uuid or team.
  it("never stores unknown fields: refuses them with 422 naming each, and creates nothing", async () => {
    const team = await t.newTeam();
    const res = await team.api.post("/projects", { name: "x", uuid: "chosen-by-client", team_id: 1 });
    expect(res.status).toBe(422);
    expect(Object.keys(res.body.errors).sort()).toEqual(["team_id", "uuid"]);
    expect((await team.api.get("/projects")).body.data).toEqual([]);
  });
});

describe("GET /projects and /projects/{uuid}", () => {
  it("lists projects as {data:[{uuid, name, description, environments, created_at}]}", async () => {
    const team = await t.newTeam();
    const a = await createProject(team, "alpha", "first");
    const b = await createProject(team, "beta");
    const res = await team.api.get("/projects");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      data: [
        { uuid: a.uuid, name: "alpha", description: "first", environments: [environmentShape("production")], created_at: expect.stringMatching(ISO) },
        { uuid: b.uuid, name: "beta", description: "", environments: [environmentShape("production")], created_at: expect.stringMatching(ISO) },
      ],
    });
    expect(res.body.data[0].environments[0].id).toBe(a.environments[0]!.id);
  });

  it("gets one project with its environments and resource counts", async () => {
    const team = await t.newTeam();
    const p = await createProject(team, "one", "desc");
    await team.api.post(`/projects/${p.uuid}/environments`, { name: "staging" });
    const res = await team.api.get(`/projects/${p.uuid}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      uuid: p.uuid,
      name: "one",
      description: "desc",
      environments: [environmentDetailShape("production"), environmentDetailShape("staging")],
      resource_counts: NONE,
      created_at: expect.stringMatching(ISO),
    });
  });

  it("orders each project's environments by creation (id), not by name, in the list and alone", async () => {
    const team = await t.newTeam();
    const p = await createProject(team, "ordered");
    const q = await createProject(team, "next");
    for (const name of ["zeta", "alpha", "mid"]) expect((await team.api.post(`/projects/${p.uuid}/environments`, { name })).status).toBe(201);
    expect((await team.api.post(`/projects/${q.uuid}/environments`, { name: "aaa" })).status).toBe(201);
    const order = ["production", "zeta", "alpha", "mid"];
    const one = (await team.api.get(`/projects/${p.uuid}`)).body;
    expect(one.environments.map((e: { name: string }) => e.name)).toEqual(order);
    const ids = one.environments.map((e: { id: number }) => e.id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    for (const query of [undefined, { page: 1, per_page: 1 }, { page: 1, per_page: 2 }]) {
      const list = (await team.api.get("/projects", query)).body.data;
      expect(list[0].environments.map((e: { name: string }) => e.name)).toEqual(order);
      if (list[1]) expect(list[1].environments.map((e: { name: string }) => e.name)).toEqual(["production", "aaa"]);
    }
  });

  it("answers 404 for an unknown uuid", async () => {
    const team = await t.newTeam();
    const res = await team.api.get("/projects/00000000-0000-4000-8000-000000000000");
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ message: expect.any(String) });
  });
});

describe("PATCH /projects/{uuid}", () => {
  it("changes only the given fields", async () => {
    const team = await t.newTeam();
    const p = await createProject(team, "orig", "orig desc");
    const before = (await team.api.get(`/projects/${p.uuid}`)).body;

    const renamed = await team.api.patch(`/projects/${p.uuid}`, { name: "renamed" });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toEqual({ message: expect.any(String), data: { ...before, name: "renamed" } });

    const described = await team.api.patch(`/projects/${p.uuid}`, { description: "" });
    expect(described.status).toBe(200);
    expect(described.body.data).toEqual({ ...before, name: "renamed", description: "" });

    const both = await team.api.patch(`/projects/${p.uuid}`, { name: "both", description: "d" });
    expect(both.body.data).toEqual({ ...before, name: "both", description: "d" });
    expect((await team.api.get(`/projects/${p.uuid}`)).body).toEqual(both.body.data);
  });

  it("answers 422 for an empty body or invalid fields and changes nothing", async () => {
    const team = await t.newTeam();
    const p = await createProject(team, "keep", "keep desc");
    const before = (await team.api.get(`/projects/${p.uuid}`)).body;
    for (const body of [{}, { name: "" }, { name: null }, { description: 5 }, { unknown: "x" }]) {
      const res = await team.api.patch(`/projects/${p.uuid}`, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(res.body, JSON.stringify(body)).toEqual({ message: expect.any(String), errors: expect.any(Object) });
    }
    const empty = await team.api.patch(`/projects/${p.uuid}`, {});
    expect(Object.keys(empty.body.errors)).toEqual(["name"]);
    const noBody = await team.api.raw(`/projects/${p.uuid}`, { method: "PATCH" });
    expect(noBody.status).toBe(422);
    expect((await team.api.get(`/projects/${p.uuid}`)).body).toEqual(before);
  });

  it("answers 404 for an unknown project", async () => {
    const team = await t.newTeam();
    const res = await team.api.patch("/projects/nope", { name: "x" });
    expect(res.status).toBe(404);
  });
});

describe("DELETE /projects/{uuid}", () => {
  it("deletes the project with its environments and every permission on it", async () => {
    const team = await t.newTeam();
    const member = await t.newMember(team.teamId, "member");
    const p = await createProject(team, "doomed");
    const other = await createProject(team, "survivor");
    const staging = await team.api.post(`/projects/${p.uuid}/environments`, { name: "staging" });
    const grant = await team.api.post("/permissions/project", { project_uuid: p.uuid, user_id: member.userId, permission_level: "deploy" });
    expect(grant.status).toBe(201);
    const envGrant = await team.api.post("/permissions/environment", {
      environment_id: staging.body.data.id,
      user_id: member.userId,
      permission_level: "full_access",
    });
    expect(envGrant.status).toBe(201);
    const keep = await team.api.post("/permissions/project", { project_uuid: other.uuid, user_id: member.userId, permission_level: "view_only" });

    const db = t.instance.database.prisma;
    const project = await db.project.findUniqueOrThrow({ where: { uuid: p.uuid } });
    expect(await db.environment.count({ where: { projectId: project.id } })).toBe(2);

    const res = await team.api.delete(`/projects/${p.uuid}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });

    expect((await team.api.get(`/projects/${p.uuid}`)).status).toBe(404);
    expect((await team.api.get(`/projects/${p.uuid}/environments`)).status).toBe(404);
    expect((await team.api.get(`/projects/${p.uuid}/production`)).status).toBe(404);
    expect((await team.api.get(`/permissions/project/${grant.body.data.id}`)).status).toBe(404);
    expect((await team.api.delete(`/permissions/environment/${envGrant.body.data.id}`)).status).toBe(404);
    expect((await team.api.delete(`/projects/${p.uuid}`)).status).toBe(404);

    expect(await db.project.count({ where: { uuid: p.uuid } })).toBe(0);
    expect(await db.environment.count({ where: { projectId: project.id } })).toBe(0);
    expect(await db.projectPermission.count({ where: { projectId: project.id } })).toBe(0);
    expect(await db.environmentPermission.count({ where: { id: envGrant.body.data.id } })).toBe(0);

    // The other project and its grant are untouched.
    const list = await team.api.get("/projects");
    expect(list.body.data.map((x: { uuid: string }) => x.uuid)).toEqual([other.uuid]);
    expect((await team.api.get(`/permissions/project/${keep.body.data.id}`)).body.permission_level).toBe("view_only");
    // The member's token no longer sees the deleted project.
    const seen = await t.api(member.token).get("/projects");
    expect(seen.body.data.map((x: { uuid: string }) => x.uuid)).toEqual([other.uuid]);
  });
});

describe("environments", () => {
  let team: TeamFixture;
  let project: Awaited<ReturnType<typeof createProject>>;
  beforeAll(async () => {
    team = await t.newTeam();
    project = await createProject(team, "envs");
  });

  it("lists a new project's environments: just production", async () => {
    const fresh = await createProject(team, "fresh");
    const res = await team.api.get(`/projects/${fresh.uuid}/environments`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [{ ...environmentShape("production"), id: fresh.environments[0]!.id }] });
  });

  it("creates an environment: 201 {message, data:{id, name}}", async () => {
    const res = await team.api.post(`/projects/${project.uuid}/environments`, { name: "staging-2" });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ message: expect.any(String), data: { id: expect.any(Number), name: "staging-2" } });
    const list = await team.api.get(`/projects/${project.uuid}/environments`);
    expect(list.body.data.map((e: { name: string }) => e.name)).toEqual(["production", "staging-2"]);
    expect(list.body.data[1].id).toBe(res.body.data.id);
  });

  it.each(["dev", "a", "qa1", "2024", "feature-x-1", "x".repeat(63)])("accepts the name %s", async (name) => {
    const res = await team.api.post(`/projects/${project.uuid}/environments`, { name });
    expect(res.status).toBe(201);
    expect(res.body.data.name).toBe(name);
  });

  it.each([
    ["uppercase", "Staging"],
    ["underscore", "my_env"],
    ["leading hyphen", "-env"],
    ["trailing hyphen", "env-"],
    ["double hyphen", "a--b"],
    ["space", "my env"],
    ["dot", "v1.2"],
    ["slash", "a/b"],
    ["empty", ""],
    ["too long", "x".repeat(64)],
    ["reserved", "environments"],
    ["shaped like a uuid (would shadow an environment's uuid)", "3f2a1b4c-1d2e-4f50-8a6b-7c8d9e0f1a2b"],
    ["not a string", 7],
  ])("refuses the name (%s) with 422 and creates nothing", async (_why, name) => {
    const before = await team.api.get(`/projects/${project.uuid}/environments`);
    const res = await team.api.post(`/projects/${project.uuid}/environments`, { name });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: expect.any(String), errors: { name: expect.arrayContaining([expect.any(String)]) } });
    expect((await team.api.get(`/projects/${project.uuid}/environments`)).body).toEqual(before.body);
  });

  it("answers 422 without a name", async () => {
    const res = await team.api.post(`/projects/${project.uuid}/environments`, {});
    expect(res.status).toBe(422);
    expect(res.body.errors).toEqual({ name: ["This field is required."] });
  });

  it("answers 409 for a duplicate name (also production)", async () => {
    expect((await team.api.post(`/projects/${project.uuid}/environments`, { name: "dup" })).status).toBe(201);
    const before = await team.api.get(`/projects/${project.uuid}/environments`);
    for (const name of ["dup", "production"]) {
      const res = await team.api.post(`/projects/${project.uuid}/environments`, { name });
      expect(res.status, name).toBe(409);
      expect(res.body, name).toEqual({ message: expect.stringContaining(name) });
    }
    expect((await team.api.get(`/projects/${project.uuid}/environments`)).body).toEqual(before.body);
  });

  it("allows the same name in two projects", async () => {
    const other = await createProject(team, "other");
    expect((await team.api.post(`/projects/${other.uuid}/environments`, { name: "dup" })).status).toBe(201);
  });

  it("answers 404 when the project does not exist", async () => {
    expect((await team.api.get("/projects/nope/environments")).status).toBe(404);
    expect((await team.api.post("/projects/nope/environments", { name: "x" })).status).toBe(404);
  });

  it("gets an environment by name and by uuid", async () => {
    const created = await team.api.post(`/projects/${project.uuid}/environments`, { name: "lookup" });
    const byName = await team.api.get(`/projects/${project.uuid}/lookup`);
    expect(byName.status).toBe(200);
    expect(byName.body).toEqual({
      ...environmentShape("lookup"),
      id: created.body.data.id,
      project_uuid: project.uuid,
      project_name: "envs",
      applications: [],
      databases: [],
    });
    const byUuid = await team.api.get(`/projects/${project.uuid}/${byName.body.uuid}`);
    expect(byUuid.status).toBe(200);
    expect(byUuid.body).toEqual(byName.body);
  });

  it("answers 404 for an unknown environment, or one of another project", async () => {
    const other = await createProject(team, "elsewhere");
    const otherEnv = (await team.api.get(`/projects/${other.uuid}/production`)).body;
    for (const ref of ["missing", "00000000-0000-4000-8000-000000000000", otherEnv.uuid]) {
      const res = await team.api.get(`/projects/${project.uuid}/${ref}`);
      expect(res.status, ref).toBe(404);
      expect(res.body, ref).toEqual({ message: expect.any(String) });
    }
    expect((await team.api.get("/projects/nope/production")).status).toBe(404);
  });

  it("deletes an environment by name", async () => {
    await team.api.post(`/projects/${project.uuid}/environments`, { name: "gone-by-name" });
    const res = await team.api.delete(`/projects/${project.uuid}/environments/gone-by-name`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });
    expect((await team.api.get(`/projects/${project.uuid}/gone-by-name`)).status).toBe(404);
    const names = (await team.api.get(`/projects/${project.uuid}/environments`)).body.data.map((e: { name: string }) => e.name);
    expect(names).not.toContain("gone-by-name");
    expect(names).toContain("production");
    // The name is free again.
    expect((await team.api.post(`/projects/${project.uuid}/environments`, { name: "gone-by-name" })).status).toBe(201);
  });

  it("deletes an environment by uuid, with its permission overrides", async () => {
    const member = await t.newMember(team.teamId, "member");
    const created = await team.api.post(`/projects/${project.uuid}/environments`, { name: "gone-by-uuid" });
    const env = (await team.api.get(`/projects/${project.uuid}/gone-by-uuid`)).body;
    const override = await team.api.post("/permissions/environment", {
      environment_id: created.body.data.id,
      user_id: member.userId,
      permission_level: "deploy",
    });
    expect(override.status).toBe(201);
    const res = await team.api.delete(`/projects/${project.uuid}/environments/${env.uuid}`);
    expect(res.status).toBe(200);
    expect((await team.api.get(`/projects/${project.uuid}/${env.uuid}`)).status).toBe(404);
    expect(await t.instance.database.prisma.environment.count({ where: { uuid: env.uuid } })).toBe(0);
    expect(await t.instance.database.prisma.environmentPermission.count({ where: { id: override.body.data.id } })).toBe(0);
    const listed = await team.api.get("/permissions/environment", { user_id: member.userId });
    expect(listed.body.data).toEqual([]);
  });

  it("answers 404 deleting an unknown environment and changes nothing", async () => {
    const before = await team.api.get(`/projects/${project.uuid}/environments`);
    for (const ref of ["missing", "00000000-0000-4000-8000-000000000000"]) {
      expect((await team.api.delete(`/projects/${project.uuid}/environments/${ref}`)).status, ref).toBe(404);
    }
    expect((await team.api.delete("/projects/nope/environments/production")).status).toBe(404);
    expect((await team.api.get(`/projects/${project.uuid}/environments`)).body).toEqual(before.body);
  });

  it("reports the environments a project has after deletes in GET /projects/{uuid}", async () => {
    const p = await createProject(team, "consistency");
    await team.api.post(`/projects/${p.uuid}/environments`, { name: "a" });
    await team.api.post(`/projects/${p.uuid}/environments`, { name: "b" });
    await team.api.delete(`/projects/${p.uuid}/environments/a`);
    const got = await team.api.get(`/projects/${p.uuid}`);
    expect(got.body.environments.map((e: { name: string }) => e.name)).toEqual(["production", "b"]);
    const withoutCounts = got.body.environments.map(({ resource_counts: _, ...e }: { resource_counts: unknown }) => e);
    expect(withoutCounts).toEqual((await team.api.get(`/projects/${p.uuid}/environments`)).body.data);
  });
});

describe("pagination (40 projects)", () => {
  let team: TeamFixture;
  let all: { uuid: string; name: string }[];
  beforeAll(async () => {
    team = await t.newTeam();
    for (let i = 1; i <= 40; i++) await createProject(team, `p${String(i).padStart(2, "0")}`);
    all = (await team.api.get("/projects")).body.data;
  });

  it("returns everything without meta when no page parameter is given", async () => {
    const res = await team.api.get("/projects");
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(40);
    expect(Object.keys(res.body)).toEqual(["data"]);
    expect(all.map((p) => p.name)).toEqual(Array.from({ length: 40 }, (_, i) => `p${String(i + 1).padStart(2, "0")}`));
  });

  it("defaults per_page to 15 when only page is given", async () => {
    const res = await team.api.get("/projects", { page: 1 });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual(all.slice(0, 15));
    expect(res.body.meta).toEqual({ current_page: 1, per_page: 15, total: 40, last_page: 3 });
  });

  it("walks the pages without gaps or repeats", async () => {
    const seen = [];
    for (let page = 1; page <= 3; page++) {
      const res = await team.api.get("/projects", { page });
      expect(res.body.meta).toEqual({ current_page: page, per_page: 15, total: 40, last_page: 3 });
      seen.push(...res.body.data);
    }
    expect(seen).toEqual(all);
    const last = await team.api.get("/projects", { page: 3 });
    expect(last.body.data).toHaveLength(10);
  });

  it("defaults page to 1 when only per_page is given", async () => {
    const res = await team.api.get("/projects", { per_page: 7 });
    expect(res.body.data).toEqual(all.slice(0, 7));
    expect(res.body.meta).toEqual({ current_page: 1, per_page: 7, total: 40, last_page: 6 });
  });

  it("answers an empty page beyond the last one", async () => {
    const res = await team.api.get("/projects", { page: 4 });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [], meta: { current_page: 4, per_page: 15, total: 40, last_page: 3 } });
  });

  it("allows per_page up to 100", async () => {
    const res = await team.api.get("/projects", { per_page: 100 });
    expect(res.body.data).toEqual(all);
    expect(res.body.meta).toEqual({ current_page: 1, per_page: 100, total: 40, last_page: 1 });
  });

  it.each([
    [{ per_page: 101 }, "per_page"],
    [{ per_page: 0 }, "per_page"],
    [{ page: 0 }, "page"],
    [{ page: -1 }, "page"],
    [{ page: "abc" }, "page"],
    [{ page: 1.5 }, "page"],
  ])("answers 422 for %j", async (query, field) => {
    const res = await team.api.get("/projects", query as Record<string, string | number>);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: expect.any(String), errors: { [field]: [expect.any(String)] } });
  });

  it("paginates a project's environments too", async () => {
    const owner = await t.newTeam();
    const p = await createProject(owner, "many-envs");
    for (const name of ["a", "b", "c", "d"]) await owner.api.post(`/projects/${p.uuid}/environments`, { name });
    const res = await owner.api.get(`/projects/${p.uuid}/environments`, { page: 2, per_page: 2 });
    expect(res.body.data.map((e: { name: string }) => e.name)).toEqual(["b", "c"]);
    expect(res.body.meta).toEqual({ current_page: 2, per_page: 2, total: 5, last_page: 3 });
    const plain = await owner.api.get(`/projects/${p.uuid}/environments`);
    expect(plain.body.meta).toBeUndefined();
    expect(plain.body.data).toHaveLength(5);
  });

  it("counts only the team's own projects in meta.total", async () => {
    const other = await t.newTeam();
    await createProject(other, "foreign");
    const res = await other.api.get("/projects", { page: 1 });
    expect(res.body.meta.total).toBe(1);
    expect((await team.api.get("/projects", { page: 1 })).body.meta.total).toBe(40);
  });
});
