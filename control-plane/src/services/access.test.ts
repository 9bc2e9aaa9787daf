import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PermissionLevel, TeamRole } from "@capstan/shared";
import { openDatabase, type Database, type Db } from "../db/client.js";
import { migrate } from "../db/migrate.js";
import type { DatabaseConfig } from "../config.js";
import type { AuthContext } from "../http/auth.js";
import { AppError } from "../http/errors.js";
import { AccessService, type Need } from "./access.js";

/**
 * AccessService against a real (migrated) SQLite database. Grants are rows; every check
 * builds a fresh AuthContext because the service caches grants per request context.
 */

let dir: string;
let database: Database;
let db: Db;
let access: AccessService;

let teamA: number;
let teamB: number;
let seq = 0;

async function user(teamId: number, role: TeamRole): Promise<number> {
  const n = ++seq;
  const u = await db.user.create({ data: { name: `u${n}`, email: `u${n}@example.test` } });
  await db.membership.create({ data: { teamId, userId: u.id, role } });
  return u.id;
}

async function project(teamId: number, envNames: string[] = ["production", "staging"]) {
  const n = ++seq;
  const p = await db.project.create({
    data: {
      uuid: `p-${n}`,
      teamId,
      name: `project ${n}`,
      environments: { create: envNames.map((name) => ({ uuid: `e-${n}-${name}`, name })) },
    },
    include: { environments: { orderBy: { id: "asc" } } },
  });
  const env = (name: string) => {
    const e = p.environments.find((x) => x.name === name);
    if (!e) throw new Error(`no environment ${name}`);
    return e;
  };
  return { id: p.id, env };
}

const grant = (projectId: number, userId: number, level: PermissionLevel) =>
  db.projectPermission.create({ data: { projectId, userId, level } });
const override = (environmentId: number, userId: number, level: PermissionLevel) =>
  db.environmentPermission.create({ data: { environmentId, userId, level } });

/** A fresh request context (the grant cache is per context). */
const as = (teamId: number, userId: number | null, role: TeamRole): AuthContext => ({
  tokenId: 1,
  teamId,
  userId,
  role,
  scopes: new Set(["read", "write", "deploy"]),
  features: new Set(),
});

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (err) {
    expect(err).toBeInstanceOf(AppError);
    return (err as AppError).status;
  }
}

const NEEDS: Need[] = ["view", "deploy", "manage", "delete"];

/** The status assertProject / assertEnvironment give for each need, in NEEDS order. */
async function projectStatuses(auth: () => AuthContext, projectId: number) {
  const out: number[] = [];
  for (const need of NEEDS) out.push(await status(access.assertProject(auth(), { id: projectId }, need)));
  return out;
}
async function environmentStatuses(auth: () => AuthContext, env: { id: number; projectId: number }) {
  const out: number[] = [];
  for (const need of NEEDS) out.push(await status(access.assertEnvironment(auth(), env, need)));
  return out;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-access-"));
  const config: DatabaseConfig = { kind: "sqlite", file: join(dir, "test.db") };
  await migrate(config);
  database = await openDatabase(config);
  db = database.prisma;
  access = new AccessService(db);
  teamA = (await db.team.create({ data: { name: "A" } })).id;
  teamB = (await db.team.create({ data: { name: "B" } })).id;
});

afterAll(async () => {
  await database?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("AccessService: role bypass", () => {
  it("owner, admin and team automation tokens (no user) have full access without any grant", async () => {
    const p = await project(teamA);
    const owner = await user(teamA, "owner");
    const admin = await user(teamA, "admin");
    const contexts = [() => as(teamA, owner, "owner"), () => as(teamA, admin, "admin"), () => as(teamA, null, "admin")];
    for (const ctx of contexts) {
      expect(access.bypasses(ctx())).toBe(true);
      expect(access.isTeamAdmin(ctx())).toBe(true);
      expect(() => access.requireTeamAdmin(ctx(), "manage permissions")).not.toThrow();
      expect(await access.projectLevel(ctx(), p.id)).toBe("full_access");
      expect(await access.environmentLevel(ctx(), p.env("production"))).toBe("full_access");
      expect(await access.canSeeProject(ctx(), p.id)).toBe(true);
      expect(await access.canSeeEnvironment(ctx(), p.env("staging"))).toBe(true);
      expect(await access.visibleProjectIds(ctx())).toBeNull();
      expect(await projectStatuses(ctx, p.id)).toEqual([200, 200, 200, 200]);
      expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 200, 200, 200]);
    }
  });

  it("a token without a user bypasses checks whatever role it carries", async () => {
    const p = await project(teamA);
    const ctx = () => as(teamA, null, "member");
    expect(access.bypasses(ctx())).toBe(true);
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 200, 200, 200]);
    expect(await access.visibleProjectIds(ctx())).toBeNull();
  });

  it("members and viewers are not team admins", async () => {
    const member = await user(teamA, "member");
    const viewer = await user(teamA, "viewer");
    for (const ctx of [as(teamA, member, "member"), as(teamA, viewer, "viewer")]) {
      expect(access.bypasses(ctx)).toBe(false);
      expect(access.isTeamAdmin(ctx)).toBe(false);
      let err: unknown;
      try {
        access.requireTeamAdmin(ctx, "manage permissions");
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(AppError);
      expect((err as AppError).status).toBe(403);
    }
  });
});

describe("AccessService: member with project-level grants", () => {
  it("without any grant a member sees nothing: 404 for every need", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    const ctx = () => as(teamA, m, "member");
    expect(await access.canSeeProject(ctx(), p.id)).toBe(false);
    expect(await access.projectLevel(ctx(), p.id)).toBeNull();
    expect(await access.environmentLevel(ctx(), p.env("production"))).toBeNull();
    expect(await access.canSeeEnvironment(ctx(), p.env("production"))).toBe(false);
    expect(await access.visibleProjectIds(ctx())).toEqual([]);
    expect(await projectStatuses(ctx, p.id)).toEqual([404, 404, 404, 404]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([404, 404, 404, 404]);
    const err = await access.assertProject(ctx(), { id: p.id }, "view").catch((e: unknown) => e);
    expect((err as AppError).message).toBe("Project not found.");
  });

  it("view_only: view passes; deploy, manage and delete are 403", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    const ctx = () => as(teamA, m, "member");
    expect(await access.projectLevel(ctx(), p.id)).toBe("view_only");
    expect(await access.visibleProjectIds(ctx())).toEqual([p.id]);
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    for (const name of ["production", "staging"]) {
      expect(await access.environmentLevel(ctx(), p.env(name))).toBe("view_only");
      expect(await environmentStatuses(ctx, p.env(name))).toEqual([200, 403, 403, 403]);
    }
  });

  it("deploy: assertEnvironment(deploy) passes, manage and delete are 403", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "deploy");
    const ctx = () => as(teamA, m, "member");
    expect(await access.projectLevel(ctx(), p.id)).toBe("deploy");
    await expect(access.assertEnvironment(ctx(), p.env("production"), "deploy")).resolves.toBeUndefined();
    const err = await access.assertEnvironment(ctx(), p.env("production"), "manage").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).status).toBe(403);
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 200, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 200, 403, 403]);
  });

  it("full_access: every need passes", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 200, 200, 200]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 200, 200, 200]);
  });

  it("a grant on one project says nothing about another", async () => {
    const p = await project(teamA);
    const q = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await access.visibleProjectIds(ctx())).toEqual([p.id]);
    expect(await projectStatuses(ctx, q.id)).toEqual([404, 404, 404, 404]);
    expect(await environmentStatuses(ctx, q.env("production"))).toEqual([404, 404, 404, 404]);
  });

  it("grants are read inside the context's team only", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await db.membership.create({ data: { teamId: teamB, userId: m, role: "member" } });
    await grant(p.id, m, "full_access");
    expect(await access.projectLevel(as(teamA, m, "member"), p.id)).toBe("full_access");
    const inB = () => as(teamB, m, "member");
    expect(await access.projectLevel(inB(), p.id)).toBeNull();
    expect(await access.canSeeProject(inB(), p.id)).toBe(false);
    expect(await access.visibleProjectIds(inB())).toEqual([]);
  });

  it("a context caches its grants; a new context sees changed grants", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    const row = await grant(p.id, m, "view_only");
    const ctx = as(teamA, m, "member");
    expect(await access.projectLevel(ctx, p.id)).toBe("view_only");
    await db.projectPermission.update({ where: { id: row.id }, data: { level: "full_access" } });
    expect(await access.projectLevel(ctx, p.id)).toBe("view_only");
    expect(await access.projectLevel(as(teamA, m, "member"), p.id)).toBe("full_access");
  });
});

describe("AccessService: environment overrides", () => {
  it("an override raises one environment above the project-level grant", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    const o = await override(p.env("staging").id, m, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await access.environmentLevel(ctx(), p.env("staging"))).toBe("full_access");
    expect(await access.environmentLevel(ctx(), p.env("production"))).toBe("view_only");
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 200, 200, 200]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
    // The project itself stays at the project-level grant.
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);

    await db.environmentPermission.delete({ where: { id: o.id } });
    expect(await access.environmentLevel(ctx(), p.env("staging"))).toBe("view_only");
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 403, 403, 403]);
  });

  it("an override lowers one environment below the project-level grant", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "full_access");
    const o = await override(p.env("production").id, m, "view_only");
    const ctx = () => as(teamA, m, "member");
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 200, 200, 200]);

    await db.environmentPermission.delete({ where: { id: o.id } });
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 200, 200, 200]);
  });

  it("a deploy override: deploy passes, manage is a 403 AppError", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    await override(p.env("production").id, m, "deploy");
    const ctx = () => as(teamA, m, "member");
    expect(await access.environmentLevel(ctx(), p.env("production"))).toBe("deploy");
    await expect(access.assertEnvironment(ctx(), p.env("production"), "deploy")).resolves.toBeUndefined();
    await expect(access.assertEnvironment(ctx(), p.env("production"), "manage")).rejects.toMatchObject({ status: 403 });
    await expect(access.assertEnvironment(ctx(), p.env("staging"), "deploy")).rejects.toMatchObject({ status: 403 });
  });

  it("an override alone makes the project visible with that environment only", async () => {
    const p = await project(teamA, ["production", "staging", "qa"]);
    const m = await user(teamA, "member");
    await override(p.env("staging").id, m, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await access.canSeeProject(ctx(), p.id)).toBe(true);
    expect(await access.visibleProjectIds(ctx())).toEqual([p.id]);
    expect(await access.projectLevel(ctx(), p.id)).toBeNull();
    // visible but no project-level grant: 403, not 404
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    expect(await access.canSeeEnvironment(ctx(), p.env("staging"))).toBe(true);
    expect(await access.canSeeEnvironment(ctx(), p.env("production"))).toBe(false);
    expect(await access.canSeeEnvironment(ctx(), p.env("qa"))).toBe(false);
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 200, 200, 200]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([404, 404, 404, 404]);
  });

  it("another user's override does not apply", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    const other = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    await override(p.env("production").id, other, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
  });
});

describe("AccessService: viewer", () => {
  it("sees every project of its team read-only without a grant", async () => {
    const p = await project(teamA);
    const v = await user(teamA, "viewer");
    const ctx = () => as(teamA, v, "viewer");
    expect(await access.canSeeProject(ctx(), p.id)).toBe(true);
    expect(await access.visibleProjectIds(ctx())).toBeNull();
    expect(await access.projectLevel(ctx(), p.id)).toBe("view_only");
    expect(await access.environmentLevel(ctx(), p.env("staging"))).toBe("view_only");
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
  });

  it("is never lifted above view_only by grants or overrides", async () => {
    const p = await project(teamA);
    const v = await user(teamA, "viewer");
    await grant(p.id, v, "full_access");
    await override(p.env("production").id, v, "full_access");
    await override(p.env("staging").id, v, "deploy");
    const ctx = () => as(teamA, v, "viewer");
    expect(await access.projectLevel(ctx(), p.id)).toBe("view_only");
    expect(await access.environmentLevel(ctx(), p.env("production"))).toBe("view_only");
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 403, 403, 403]);
  });
});
