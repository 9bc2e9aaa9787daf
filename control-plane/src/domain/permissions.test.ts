import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { PermissionLevel, TeamRole } from "@capstan/shared";
import { openDatabase, type Database, type Db } from "../db/client.js";
import { migrate } from "../db/migrate.js";
import type { DatabaseConfig } from "../config.js";
import type { Caller } from "./caller.js";
import { DomainError, Forbidden } from "./errors.js";
import { errorResponse } from "../http/errors.js";
import { bypasses, isTeamAdmin, type Need } from "./permissions.js";
import { TeamScope } from "./scope.js";
import { ProjectService } from "../services/projects.js";

/**
 * Permission resolution (domain/permissions.ts) through the team scope (domain/scope.ts) against
 * a real (migrated) SQLite database. Grants are rows; every check builds a fresh Caller (and so
 * a fresh scope) because a scope keeps what it read for its request.
 */

let dir: string;
let database: Database;
let db: Db;
/** One scope per request context, as a request has: the same context answers from the same scope. */
const scopes = new WeakMap<Caller, TeamScope>();
function access(caller: Caller): TeamScope {
  let scope = scopes.get(caller);
  if (!scope) {
    scope = new TeamScope(caller, db, database.reader);
    scopes.set(caller, scope);
  }
  return scope;
}

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
const as = (teamId: number, userId: number | null, role: TeamRole): Caller => ({
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
    expect(err).toBeInstanceOf(DomainError);
    return errorResponse(err)!.status;
  }
}

const NEEDS: Need[] = ["view", "deploy", "manage", "delete"];

/** The status assertProject / assertEnvironment give for each need, in NEEDS order. */
async function projectStatuses(auth: () => Caller, projectId: number) {
  const out: number[] = [];
  for (const need of NEEDS) out.push(await status(access(auth()).assertProject({ id: projectId }, need)));
  return out;
}
async function environmentStatuses(auth: () => Caller, env: { id: number; projectId: number }) {
  const out: number[] = [];
  for (const need of NEEDS) out.push(await status(access(auth()).assertEnvironment(env, need)));
  return out;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "capstan-access-"));
  const config: DatabaseConfig = { kind: "sqlite", file: join(dir, "test.db") };
  await migrate(config);
  database = await openDatabase(config);
  db = database.prisma;
  teamA = (await db.team.create({ data: { name: "A" } })).id;
  teamB = (await db.team.create({ data: { name: "B" } })).id;
});

afterAll(async () => {
  await database?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("permissions: role bypass", () => {
  it("owner, admin and team automation tokens (no user) have full access without any grant", async () => {
    const p = await project(teamA);
    const owner = await user(teamA, "owner");
    const admin = await user(teamA, "admin");
    const contexts = [() => as(teamA, owner, "owner"), () => as(teamA, admin, "admin"), () => as(teamA, null, "admin")];
    for (const ctx of contexts) {
      expect(bypasses(ctx())).toBe(true);
      expect(isTeamAdmin(ctx())).toBe(true);
      expect(() => access(ctx()).requireTeamAdmin("manage permissions")).not.toThrow();
      expect(await access(ctx()).projectLevel(p.id)).toBe("full_access");
      expect(await access(ctx()).environmentLevel(p.env("production"))).toBe("full_access");
      expect(await access(ctx()).canSeeProject(p.id)).toBe(true);
      expect(await access(ctx()).canSeeEnvironment(p.env("staging"))).toBe(true);
      expect(await access(ctx()).visibleProjectIds()).toBeNull();
      expect(await projectStatuses(ctx, p.id)).toEqual([200, 200, 200, 200]);
      expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 200, 200, 200]);
    }
  });

  it("a token without a user bypasses checks whatever role it carries", async () => {
    const p = await project(teamA);
    const ctx = () => as(teamA, null, "member");
    expect(bypasses(ctx())).toBe(true);
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 200, 200, 200]);
    expect(await access(ctx()).visibleProjectIds()).toBeNull();
  });

  it("members and viewers are not team admins", async () => {
    const member = await user(teamA, "member");
    const viewer = await user(teamA, "viewer");
    for (const ctx of [as(teamA, member, "member"), as(teamA, viewer, "viewer")]) {
      expect(bypasses(ctx)).toBe(false);
      expect(isTeamAdmin(ctx)).toBe(false);
      let err: unknown;
      try {
        access(ctx).requireTeamAdmin("manage permissions");
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(DomainError);
      expect(errorResponse(err)!.status).toBe(403);
    }
  });
});

describe("permissions: member with project-level grants", () => {
  it("without any grant a member sees nothing: 404 for every need", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    const ctx = () => as(teamA, m, "member");
    expect(await access(ctx()).canSeeProject(p.id)).toBe(false);
    expect(await access(ctx()).projectLevel(p.id)).toBeNull();
    expect(await access(ctx()).environmentLevel(p.env("production"))).toBeNull();
    expect(await access(ctx()).canSeeEnvironment(p.env("production"))).toBe(false);
    expect(await access(ctx()).visibleProjectIds()).toEqual([]);
    expect(await projectStatuses(ctx, p.id)).toEqual([404, 404, 404, 404]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([404, 404, 404, 404]);
    const err = await access(ctx()).assertProject({ id: p.id }, "view").catch((e: unknown) => e);
    expect((err as DomainError).message).toBe("Project not found.");
  });

  it("view_only: view passes; deploy, manage and delete are 403", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    const ctx = () => as(teamA, m, "member");
    expect(await access(ctx()).projectLevel(p.id)).toBe("view_only");
    expect(await access(ctx()).visibleProjectIds()).toEqual([p.id]);
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    for (const name of ["production", "staging"]) {
      expect(await access(ctx()).environmentLevel(p.env(name))).toBe("view_only");
      expect(await environmentStatuses(ctx, p.env(name))).toEqual([200, 403, 403, 403]);
    }
  });

  it("deploy: assertEnvironment(deploy) passes, manage and delete are 403", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "deploy");
    const ctx = () => as(teamA, m, "member");
    expect(await access(ctx()).projectLevel(p.id)).toBe("deploy");
    await expect(access(ctx()).assertEnvironment(p.env("production"), "deploy")).resolves.toBeUndefined();
    const err = await access(ctx()).assertEnvironment(p.env("production"), "manage").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DomainError);
    expect(errorResponse(err)!.status).toBe(403);
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
    expect(await access(ctx()).visibleProjectIds()).toEqual([p.id]);
    expect(await projectStatuses(ctx, q.id)).toEqual([404, 404, 404, 404]);
    expect(await environmentStatuses(ctx, q.env("production"))).toEqual([404, 404, 404, 404]);
  });

  it("grants are read inside the context's team only", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await db.membership.create({ data: { teamId: teamB, userId: m, role: "member" } });
    await grant(p.id, m, "full_access");
    expect(await access(as(teamA, m, "member")).projectLevel(p.id)).toBe("full_access");
    const inB = () => as(teamB, m, "member");
    expect(await access(inB()).projectLevel(p.id)).toBeNull();
    expect(await access(inB()).canSeeProject(p.id)).toBe(false);
    expect(await access(inB()).visibleProjectIds()).toEqual([]);
    expect(await access(inB()).canSeeEnvironments([p.env("production"), p.env("staging")])).toEqual([false, false]);
    expect(await access(as(teamA, m, "member")).canSeeEnvironments([p.env("production"), p.env("staging")])).toEqual([true, true]);
  });

  it("many environments at once: in chunks, missing and foreign ones invisible", async () => {
    const p = await project(teamA);
    const foreign = await project(teamB);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    // A grant held on another team's project says nothing inside this team.
    await grant(foreign.id, m, "full_access");
    // More than one statement's list (PADDED_IN_MAX), with ids of no environment in between.
    const missing = Array.from({ length: 700 }, (_, i) => ({ id: 1_000_000 + i, projectId: p.id }));
    const asked = [p.env("production"), ...missing.slice(0, 600), foreign.env("production"), ...missing.slice(600), p.env("staging")];
    const seen = await access(as(teamA, m, "member")).canSeeEnvironments(asked);
    expect(seen.length).toBe(asked.length);
    expect(seen[0]).toBe(true);
    expect(seen.at(-1)).toBe(true);
    expect(seen.slice(1, -1).some(Boolean)).toBe(false);
  });

  it("a context caches its grants; a new context sees changed grants", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    const row = await grant(p.id, m, "view_only");
    const ctx = as(teamA, m, "member");
    expect(await access(ctx).projectLevel(p.id)).toBe("view_only");
    await db.projectPermission.update({ where: { id: row.id }, data: { level: "full_access" } });
    expect(await access(ctx).projectLevel(p.id)).toBe("view_only");
    expect(await access(as(teamA, m, "member")).projectLevel(p.id)).toBe("full_access");
  });
});

describe("permissions: environment overrides", () => {
  it("an override raises one environment above the project-level grant", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    const o = await override(p.env("staging").id, m, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await access(ctx()).environmentLevel(p.env("staging"))).toBe("full_access");
    expect(await access(ctx()).environmentLevel(p.env("production"))).toBe("view_only");
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 200, 200, 200]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
    // The project itself stays at the project-level grant.
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);

    await db.environmentPermission.delete({ where: { id: o.id } });
    expect(await access(ctx()).environmentLevel(p.env("staging"))).toBe("view_only");
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

  it("a deploy override: deploy passes, manage is a 403 (Forbidden)", async () => {
    const p = await project(teamA);
    const m = await user(teamA, "member");
    await grant(p.id, m, "view_only");
    await override(p.env("production").id, m, "deploy");
    const ctx = () => as(teamA, m, "member");
    expect(await access(ctx()).environmentLevel(p.env("production"))).toBe("deploy");
    await expect(access(ctx()).assertEnvironment(p.env("production"), "deploy")).resolves.toBeUndefined();
    await expect(access(ctx()).assertEnvironment(p.env("production"), "manage")).rejects.toBeInstanceOf(Forbidden);
    await expect(access(ctx()).assertEnvironment(p.env("staging"), "deploy")).rejects.toBeInstanceOf(Forbidden);
  });

  it("an override alone makes the project visible with that environment only", async () => {
    const p = await project(teamA, ["production", "staging", "qa"]);
    const m = await user(teamA, "member");
    await override(p.env("staging").id, m, "full_access");
    const ctx = () => as(teamA, m, "member");
    expect(await access(ctx()).canSeeProject(p.id)).toBe(true);
    expect(await access(ctx()).visibleProjectIds()).toEqual([p.id]);
    expect(await access(ctx()).projectLevel(p.id)).toBeNull();
    // visible but no project-level grant: 403, not 404
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    expect(await access(ctx()).canSeeEnvironment(p.env("staging"))).toBe(true);
    expect(await access(ctx()).canSeeEnvironment(p.env("production"))).toBe(false);
    expect(await access(ctx()).canSeeEnvironment(p.env("qa"))).toBe(false);
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

describe("permissions: viewer", () => {
  it("sees every project of its team read-only without a grant", async () => {
    const p = await project(teamA);
    const v = await user(teamA, "viewer");
    const ctx = () => as(teamA, v, "viewer");
    expect(await access(ctx()).canSeeProject(p.id)).toBe(true);
    expect(await access(ctx()).visibleProjectIds()).toBeNull();
    expect(await access(ctx()).projectLevel(p.id)).toBe("view_only");
    expect(await access(ctx()).environmentLevel(p.env("staging"))).toBe("view_only");
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
    expect(await access(ctx()).projectLevel(p.id)).toBe("view_only");
    expect(await access(ctx()).environmentLevel(p.env("production"))).toBe("view_only");
    expect(await projectStatuses(ctx, p.id)).toEqual([200, 403, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("production"))).toEqual([200, 403, 403, 403]);
    expect(await environmentStatuses(ctx, p.env("staging"))).toEqual([200, 403, 403, 403]);
  });
});

/**
 * The one resolution: the list reads (the SQL conditions of visibilitySql, as GET /projects
 * runs them through ProjectService) and the lookups of one object (the team scope's levelSql)
 * come from the same rule table. For every kind of caller, every project grant and every
 * environment override, both agree with each other and with the spec's rules written out here.
 */
describe("permissions: lists and single objects agree", () => {
  const LEVELS: (PermissionLevel | null)[] = [null, "view_only", "deploy", "full_access"];
  const CALLERS: { name: string; role: TeamRole; automation?: boolean }[] = [
    { name: "owner", role: "owner" },
    { name: "admin", role: "admin" },
    { name: "automation token", role: "member", automation: true },
    { name: "viewer", role: "viewer" },
    { name: "member", role: "member" },
  ];
  const ALLOWS: Record<PermissionLevel, Need[]> = { view_only: ["view"], deploy: ["view", "deploy"], full_access: ["view", "deploy", "manage", "delete"] };

  /** The spec's rules (section 5, docs/decisions.md for viewers), independent of the code under test. */
  function expected(kind: (typeof CALLERS)[number], grantLevel: PermissionLevel | null, overrideLevel: PermissionLevel | null) {
    if (kind.automation || kind.role === "owner" || kind.role === "admin") {
      return { target: "full_access", other: "full_access", projectVisible: true, project: "full_access" } as const;
    }
    if (kind.role === "viewer") return { target: "view_only", other: "view_only", projectVisible: true, project: "view_only" } as const;
    return { target: overrideLevel ?? grantLevel, other: grantLevel, projectVisible: grantLevel !== null || overrideLevel !== null, project: grantLevel };
  }
  const statusFor = (visible: boolean, level: PermissionLevel | null, need: Need) => (!visible ? 404 : need === "view" || (level && ALLOWS[level].includes(need)) ? 200 : 403);

  it("for every role x project grant x environment override", async () => {
    const team = (await db.team.create({ data: { name: "agreement" } })).id;
    // GET /projects' own code: only the reader and the scope are used by list().
    const projects = new ProjectService(db, database.reader, null as never, null as never, null as never, null as never);
    let combinations = 0;
    for (const kind of CALLERS) {
      for (const grantLevel of LEVELS) {
        for (const overrideLevel of LEVELS) {
          const label = `${kind.name}, grant ${grantLevel}, override ${overrideLevel}`;
          const p = await project(team, ["target", "other"]);
          const uuid = (await db.project.findUniqueOrThrow({ where: { id: p.id } })).uuid;
          const u = await user(team, kind.role);
          if (grantLevel) await grant(p.id, u, grantLevel);
          if (overrideLevel) await override(p.env("target").id, u, overrideLevel);
          const ctx = () => as(team, kind.automation ? null : u, kind.role);
          const want = expected(kind, grantLevel, overrideLevel);

          // The single-object path.
          const target = await access(ctx()).environmentLevel(p.env("target"));
          const other = await access(ctx()).environmentLevel(p.env("other"));
          const projectVisible = await access(ctx()).canSeeProject(p.id);
          const projectLevel = await access(ctx()).projectLevel(p.id);
          expect({ target, other, projectVisible, project: projectLevel }, label).toEqual(want);
          expect(await environmentStatuses(ctx, p.env("target")), label).toEqual(NEEDS.map((n) => statusFor(want.target !== null, want.target, n)));
          expect(await projectStatuses(ctx, p.id), label).toEqual(NEEDS.map((n) => statusFor(want.projectVisible, want.project, n)));
          // Many objects at once (the /fleet stream's batches), in a fresh scope: the same answers.
          expect(await access(ctx()).canSeeEnvironments([p.env("target"), p.env("other"), p.env("target")]), label).toEqual([
            want.target !== null,
            want.other !== null,
            want.target !== null,
          ]);

          // The list path: GET /projects with the environments listed in it.
          const listed = (await projects.list(access(ctx()), {})).find((x) => x.uuid === uuid);
          const ids = await access(ctx()).visibleProjectIds();
          expect(listed !== undefined, label).toBe(projectVisible);
          expect(ids === null || ids.includes(p.id), label).toBe(projectVisible);
          const listedEnvs = (listed?.environments ?? []).map((e) => e.name);
          expect(listedEnvs.includes("target"), label).toBe(target !== null);
          expect(listedEnvs.includes("other"), label).toBe(other !== null);
          combinations++;
        }
      }
    }
    expect(combinations).toBe(CALLERS.length * LEVELS.length * LEVELS.length);
  });
});
