import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TeamRole } from "@capstan/shared";
import { client, startTestInstance, type ApiClient, type TestInstance } from "./harness.js";

let t: TestInstance;

/** A team with a description and one user of every role, built through the admin service. */
interface RichTeam {
  id: number;
  name: string;
  description: string;
  createdAt: string;
  api: ApiClient;
  members: { id: number; name: string; email: string; role: TeamRole; token: string }[];
}

async function richTeam(name: string, description: string): Promise<RichTeam> {
  const admin = t.instance.admin;
  const id = await admin.createTeam(name, description);
  const members: RichTeam["members"] = [];
  for (const role of ["owner", "admin", "member", "viewer"] as const) {
    const email = `${role}-${id}@Example.TEST`;
    const userId = await admin.createUser(`${role} of ${name}`, email);
    await admin.setMember(id, userId, role);
    const token = await admin.createToken({ teamId: id, userId, name: role, scopes: ["read"] });
    members.push({ id: userId, name: `${role} of ${name}`, email: email.toLowerCase(), role, token });
  }
  const row = await t.instance.database.prisma.team.findUniqueOrThrow({ where: { id } });
  return { id, name, description, createdAt: row.createdAt.toISOString(), api: t.api(members[0]!.token), members };
}

let alpha: RichTeam;
let beta: RichTeam;

beforeAll(async () => {
  t = await startTestInstance();
  alpha = await richTeam("Alpha", "the first team");
  beta = await richTeam("Beta", "");
});
afterAll(async () => {
  await t?.close();
});

const teamOf = (r: RichTeam) => ({ id: r.id, name: r.name, description: r.description, created_at: r.createdAt });
const membersOf = (r: RichTeam) => r.members.map(({ id, name, email, role }) => ({ id, name, email, role }));

describe("GET /teams", () => {
  it("lists exactly the token's own team, in the exact shape", async () => {
    const res = await alpha.api.get("/teams");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: [teamOf(alpha)] });
  });

  it("shows another token its own team only", async () => {
    expect((await beta.api.get("/teams")).body).toEqual({ data: [teamOf(beta)] });
    const root = await t.api(t.rootToken).get("/teams");
    expect(root.body.data.map((x: { id: number }) => x.id)).toEqual([t.rootTeamId]);
  });

  it("paginates like every list", async () => {
    expect((await alpha.api.get("/teams", { page: 1 })).body).toEqual({
      data: [teamOf(alpha)],
      meta: { current_page: 1, per_page: 15, total: 1, last_page: 1 },
    });
    expect((await alpha.api.get("/teams", { page: 2, per_page: 1 })).body).toEqual({
      data: [],
      meta: { current_page: 2, per_page: 1, total: 1, last_page: 1 },
    });
  });
});

describe("GET /teams/current and /teams/{id}", () => {
  it("returns the token's team with members_count", async () => {
    const res = await alpha.api.get("/teams/current");
    expect(res.status).toBe(200);
    // Issue 15 added the team's settings and its paid features (none unless PLATFORM_DEFAULT_TEAM_FEATURES says so).
    expect(res.body).toEqual({ ...teamOf(alpha), members_count: 4, settings: { allow_member_bind_mounts: false }, features: [] });
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);
  });

  it("returns the same team by its id", async () => {
    const res = await alpha.api.get(`/teams/${alpha.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...teamOf(alpha), members_count: 4, settings: { allow_member_bind_mounts: false } });
  });

  it("is readable by every role with a read token", async () => {
    for (const m of alpha.members) {
      const res = await t.api(m.token).get("/teams/current");
      expect(res.status, m.role).toBe(200);
      expect(res.body.id, m.role).toBe(alpha.id);
    }
  });

  it("follows membership changes in members_count", async () => {
    const team = await t.newTeam();
    expect((await team.api.get("/teams/current")).body.members_count).toBe(1);
    const extra = await t.newMember(team.teamId, "member");
    expect((await team.api.get("/teams/current")).body.members_count).toBe(2);
    await t.instance.admin.removeMember(team.teamId, extra.userId);
    expect((await team.api.get(`/teams/${team.teamId}`)).body.members_count).toBe(1);
  });

  it("answers 404 for another team's id and for a team that does not exist", async () => {
    for (const path of [`/teams/${beta.id}`, `/teams/${t.rootTeamId}`, "/teams/999999"]) {
      const res = await alpha.api.get(path);
      expect(res.status, path).toBe(404);
      expect(res.body, path).toEqual({ message: expect.any(String) });
      expect(JSON.stringify(res.body)).not.toContain("Beta");
    }
  });

  it.each(["abc", "1.5", "-1", "0", "1e3", "0x1", "99999999999"])("answers 422 for the non-integer or out-of-range id %s", async (id) => {
    const res = await alpha.api.get(`/teams/${id}`);
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: expect.any(String), errors: { id: [expect.any(String)] } });
  });
});

describe("GET /teams/current/members and /teams/{id}/members", () => {
  it("lists members with id, name, email, role", async () => {
    const res = await alpha.api.get("/teams/current/members");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: membersOf(alpha) });
  });

  it("lists the same members by team id", async () => {
    const res = await alpha.api.get(`/teams/${alpha.id}/members`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: membersOf(alpha) });
  });

  it("never mixes in members of other teams", async () => {
    const body = JSON.stringify((await beta.api.get("/teams/current/members")).body);
    for (const m of alpha.members) expect(body).not.toContain(m.email);
    expect((await beta.api.get("/teams/current/members")).body).toEqual({ data: membersOf(beta) });
  });

  it("answers 404 for another team's members and 422 for a bad id", async () => {
    const other = await alpha.api.get(`/teams/${beta.id}/members`);
    expect(other.status).toBe(404);
    expect(JSON.stringify(other.body)).not.toContain("@example.test");
    expect((await alpha.api.get(`/teams/999999/members`)).status).toBe(404);
    const bad = await alpha.api.get(`/teams/abc/members`);
    expect(bad.status).toBe(422);
    expect(bad.body.errors.id).toBeDefined();
  });

  it("paginates members", async () => {
    const team = await t.newTeam();
    for (let i = 0; i < 6; i++) await t.newMember(team.teamId, i % 2 ? "member" : "viewer");
    const all = (await team.api.get("/teams/current/members")).body;
    expect(all.meta).toBeUndefined();
    expect(all.data).toHaveLength(7);
    expect(all.data[0]).toMatchObject({ id: team.ownerId, role: "owner" });

    const pages = [];
    for (let page = 1; page <= 4; page++) {
      const res = await team.api.get(`/teams/${team.teamId}/members`, { page, per_page: 2 });
      expect(res.status).toBe(200);
      expect(res.body.meta).toEqual({ current_page: page, per_page: 2, total: 7, last_page: 4 });
      pages.push(...res.body.data);
    }
    expect(pages).toEqual(all.data);

    const beyond = await team.api.get("/teams/current/members", { page: 5, per_page: 2 });
    expect(beyond.body).toEqual({ data: [], meta: { current_page: 5, per_page: 2, total: 7, last_page: 4 } });

    const defaults = await team.api.get("/teams/current/members", { page: 1 });
    expect(defaults.body.meta).toEqual({ current_page: 1, per_page: 15, total: 7, last_page: 1 });

    for (const query of [{ per_page: 0 }, { per_page: 101 }, { page: 0 }, { page: "x" }] as Record<string, string | number>[]) {
      const res = await team.api.get("/teams/current/members", query);
      expect(res.status, JSON.stringify(query)).toBe(422);
      expect(Object.keys(res.body.errors), JSON.stringify(query)).toEqual(Object.keys(query));
    }
  });
});

describe("teams are read-only over the API", () => {
  it.each([
    ["post", "/teams"],
    ["patch", "/teams/current"],
    ["delete", "/teams/current"],
    ["post", "/teams/current/members"],
  ] as const)("%s %s does not exist (404)", async (method, path) => {
    const api = client(t.url + "/api/v1", t.rootToken);
    const res = await api[method](path, method === "delete" ? undefined : { name: "x", email: "x@example.test" });
    expect(res.status).toBe(404);
    expect((await api.get("/teams/current/members")).body.data).toHaveLength(1);
  });
});
