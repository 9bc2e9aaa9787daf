import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";

// GET /projects at a size where a naive "WHERE projectId IN (?, ?, ...)" with one parameter
// per project breaks: SQLite binds at most 999 parameters per statement.
const COUNT = 1_200;

let t: TestInstance;
let team: TeamFixture;
let projects: { id: number; uuid: string; envId: number }[];

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  const db = t.instance.database.prisma;
  // Straight into the database, in batches: 1,200 API calls would take most of the test.
  const uuids = Array.from({ length: COUNT }, () => randomUUID());
  for (let i = 0; i < COUNT; i += 200) {
    await db.project.createMany({
      data: uuids.slice(i, i + 200).map((uuid, j) => ({ uuid, teamId: team.teamId, name: `p${i + j + 1}`, description: `project ${i + j + 1}` })),
    });
  }
  const rows = await db.project.findMany({ where: { teamId: team.teamId }, orderBy: { id: "asc" }, select: { id: true, uuid: true } });
  for (let i = 0; i < rows.length; i += 200) {
    await db.environment.createMany({ data: rows.slice(i, i + 200).map((p) => ({ uuid: randomUUID(), projectId: p.id, name: "production" })) });
  }
  const envs = await db.environment.findMany({ where: { project: { teamId: team.teamId } }, select: { id: true, projectId: true } });
  const envOf = new Map(envs.map((e) => [e.projectId, e.id]));
  projects = rows.map((p) => ({ ...p, envId: envOf.get(p.id)! }));
}, 120_000);

afterAll(async () => {
  await t?.close();
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

describe(`GET /projects with ${COUNT} projects in the team`, () => {
  it("lists them all, in creation order, each with its production environment", async () => {
    const res = await team.api.get("/projects");
    expect(res.status).toBe(200);
    expect(res.body.meta).toBeUndefined();
    expect(res.body.data).toHaveLength(COUNT);
    res.body.data.forEach((p: any, i: number) => {
      expect(p).toEqual({
        uuid: projects[i]!.uuid,
        name: `p${i + 1}`,
        description: `project ${i + 1}`,
        environments: [{ id: projects[i]!.envId, uuid: expect.any(String), name: "production", created_at: expect.stringMatching(ISO) }],
        created_at: expect.stringMatching(ISO),
      });
    });
  });

  it("pages through them with the right totals", async () => {
    const res = await team.api.get("/projects", { page: 12, per_page: 100 });
    expect(res.status).toBe(200);
    expect(res.body.meta).toEqual({ current_page: 12, per_page: 100, total: COUNT, last_page: 12 });
    expect(res.body.data.map((p: any) => p.uuid)).toEqual(projects.slice(1100, 1200).map((p) => p.uuid));
    expect(res.body.data.every((p: any) => p.environments.length === 1)).toBe(true);
  });

  it("lists for a member granted every project exactly what its grants reach", async () => {
    const member = await t.newMember(team.teamId, "member", ["read"]);
    const db = t.instance.database.prisma;
    // Project-level grants on all but the first 100; environment overrides only on those 100.
    const granted = projects.slice(100);
    for (let i = 0; i < granted.length; i += 200) {
      await db.projectPermission.createMany({
        data: granted.slice(i, i + 200).map((p) => ({ projectId: p.id, userId: member.userId, level: "view_only" })),
      });
    }
    await db.environmentPermission.createMany({
      data: projects.slice(0, 100).map((p) => ({ environmentId: p.envId, userId: member.userId, level: "deploy" })),
    });
    // A second environment in a project with a project-level grant: the grant covers every
    // environment of the project, so it is listed too.
    const extra = await db.environment.create({ data: { uuid: randomUUID(), projectId: projects[150]!.id, name: "staging" } });
    // The first 100 projects are visible through their environment override alone.
    const res = await t.api(member.token).get("/projects");
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(COUNT);
    expect(res.body.data[150].environments.map((e: any) => e.id)).toEqual([projects[150]!.envId, extra.id]);
    expect(res.body.data.every((p: any, i: number) => p.environments[0].id === projects[i]!.envId)).toBe(true);

    const page = await t.api(member.token).get("/projects", { page: 1, per_page: 100 });
    expect(page.body.meta.total).toBe(COUNT);
    expect(page.body.data.map((p: any) => p.uuid)).toEqual(projects.slice(0, 100).map((p) => p.uuid));
  });

  it("shows a member with grants on only some projects just those, with totals to match", async () => {
    const member = await t.newMember(team.teamId, "member", ["read"]);
    const db = t.instance.database.prisma;
    const some = projects.filter((_, i) => i % 3 === 0); // 400 projects
    await db.projectPermission.createMany({ data: some.map((p) => ({ projectId: p.id, userId: member.userId, level: "deploy" })) });
    const res = await t.api(member.token).get("/projects");
    expect(res.body.data.map((p: any) => p.uuid)).toEqual(some.map((p) => p.uuid));
    const page = await t.api(member.token).get("/projects", { page: 4, per_page: 100 });
    expect(page.body.meta).toEqual({ current_page: 4, per_page: 100, total: some.length, last_page: 4 });
    expect(page.body.data.map((p: any) => p.uuid)).toEqual(some.slice(300, 400).map((p) => p.uuid));
  });
});
