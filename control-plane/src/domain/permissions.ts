import type { PermissionLevel, TeamRole } from "@capstan/shared";
import type { Caller } from "./caller.js";

/**
 * Team roles and project/environment permissions (spec section 5), resolved in one way for every
 * read: the rule tables below are turned into SQL, both the conditions that filter list reads
 * (visibilitySql: projects, applications, databases, deployments) and the level of one object
 * (levelSql: the team scope's checks, domain/scope.ts). Nothing resolves grants in JavaScript,
 * so a list and a lookup of the same object cannot disagree (domain/permissions.test.ts checks
 * every role x project grant x environment override).
 */

/** What an action needs, in the terms of the spec's ability table. */
export type Need = "view" | "deploy" | "manage" | "delete";

export const LEVEL_ALLOWS: Record<PermissionLevel, ReadonlySet<Need>> = {
  view_only: new Set(["view"]),
  deploy: new Set(["view", "deploy"]),
  full_access: new Set(["view", "deploy", "manage", "delete"]),
};

export const allows = (level: PermissionLevel, need: Need): boolean => LEVEL_ALLOWS[level].has(need);

export interface SqlFragment {
  sql: string;
  params: (string | number)[];
}

/**
 * How a caller's role decides what it sees and may do. "team": it sees every project and
 * environment of its team at one fixed level, whatever grants say (owners, admins and team
 * automation tokens have full access; a viewer is read-only everywhere, never lifted above
 * view_only by a grant: docs/decisions.md). "grants": a member sees and may do what its grants give.
 */
export type Standing = { sees: "team"; level: PermissionLevel } | { sees: "grants" };

const STANDING: Record<TeamRole, Standing> = {
  owner: { sees: "team", level: "full_access" },
  admin: { sees: "team", level: "full_access" },
  viewer: { sees: "team", level: "view_only" },
  member: { sees: "grants" },
};
/** A team automation token (no user) acts as the team: full access, whatever role it carries. */
const AUTOMATION: Standing = { sees: "team", level: "full_access" };

export function standing(caller: Caller): Standing {
  return caller.userId === null ? AUTOMATION : STANDING[caller.role];
}

/**
 * What a grant of `granted` really lets a user of `role` do (the level its abilities are): the
 * role's fixed level for those who see the whole team (owners and admins bypass grants, a viewer
 * stays read-only whatever it is granted), the grant for a member. Permission responses show
 * this, so can_manage is never true for someone who cannot manage (docs/decisions.md).
 */
export function effectiveLevel(role: TeamRole, granted: PermissionLevel): PermissionLevel {
  const s = STANDING[role];
  return s.sees === "team" ? s.level : granted;
}

/** Owner, admin and team automation tokens bypass every permission check. */
export function bypasses(caller: Caller): boolean {
  const s = standing(caller);
  return s.sees === "team" && s.level === "full_access";
}

/** Owners, admins and automation tokens manage the team's shared things (servers, keys, grants...). */
export const isTeamAdmin = bypasses;

/** Owner, admin, automation token and viewer see every project and environment of the team. */
export function seesWholeTeam(caller: Caller): boolean {
  return standing(caller).sees === "team";
}

/**
 * Callers with the same key (inside one team) see the same projects and environments:
 * "*" for those who see the whole team, else the member's own grants decide ("u<id>").
 * The response cache (http/response-cache.ts) keys bodies with it.
 */
export function visibilityKey(caller: Caller): string {
  return seesWholeTeam(caller) ? "*" : `u${caller.userId}`;
}

// -------------------------------------------------------------------------------------------
// The grant rules, as data

/**
 * One kind of grant row a member may hold on an object: the table (aliased), how a row attaches
 * to the object (`$` stands for the object's alias) and its level column. Every source is
 * matched on the member's user id as well.
 */
interface GrantSource {
  from: string;
  on: string;
  level: string;
  user: string;
}

/** The override on this very environment. */
const OVERRIDE_OF_ENVIRONMENT: GrantSource = { from: `"EnvironmentPermission" ep`, on: `ep."environmentId" = $."id"`, level: `ep."level"`, user: `ep."userId"` };
/** The project-level grant on the environment's project. */
const GRANT_OF_ENVIRONMENTS_PROJECT: GrantSource = { from: `"ProjectPermission" pp`, on: `pp."projectId" = $."projectId"`, level: `pp."level"`, user: `pp."userId"` };
/** The project-level grant on this project. */
const GRANT_OF_PROJECT: GrantSource = { from: `"ProjectPermission" pp`, on: `pp."projectId" = $."id"`, level: `pp."level"`, user: `pp."userId"` };
/** An override on any environment of this project. */
const OVERRIDE_IN_PROJECT: GrantSource = {
  from: `"EnvironmentPermission" ep JOIN "Environment" pe ON pe."id" = ep."environmentId"`,
  on: `pe."projectId" = $."id"`,
  level: `ep."level"`,
  user: `ep."userId"`,
};

/**
 * For a member: `level` lists where an object's level comes from, the first present one deciding
 * (an environment override replaces the project grant, upwards or downwards); `visible` lists
 * what makes the object visible, any one sufficing. An environment is visible exactly when it
 * has a level; a project also when an override on one of its environments exists (the member
 * then sees it with that environment only, and without a project grant may not act on it: 403).
 */
const ENVIRONMENT_LEVEL = [OVERRIDE_OF_ENVIRONMENT, GRANT_OF_ENVIRONMENTS_PROJECT];
export const GRANT_RULES = {
  environment: { level: ENVIRONMENT_LEVEL, visible: ENVIRONMENT_LEVEL },
  project: { level: [GRANT_OF_PROJECT], visible: [GRANT_OF_PROJECT, OVERRIDE_IN_PROJECT] },
} as const satisfies Record<string, { level: readonly GrantSource[]; visible: readonly GrantSource[] }>;

export type GrantedObject = keyof typeof GRANT_RULES;

const at = (text: string, alias: string) => text.replace(/\$/g, alias);

/**
 * The SQL text of each rule depends only on the rule and the alias: built once, then bound with
 * the member's id (one parameter per source). A list read runs on every request.
 */
const texts = new Map<string, string>();
function text(key: string, build: () => string): string {
  let sql = texts.get(key);
  if (sql === undefined) texts.set(key, (sql = build()));
  return sql;
}

/** Any of the sources present, for the member `user`: a boolean condition. */
function anyOf(object: GrantedObject, alias: string, user: number): SqlFragment {
  const sources = GRANT_RULES[object].visible;
  const sql = text(`visible ${object} ${alias}`, () => `(${sources.map((s) => `EXISTS (SELECT 1 FROM ${s.from} WHERE ${at(s.on, alias)} AND ${s.user} = ?)`).join(" OR ")})`);
  return { sql, params: sources.map(() => user) };
}

/** The level of the first source present, for the member `user`, or NULL: a value. */
function firstOf(object: GrantedObject, alias: string, user: number): SqlFragment {
  const sources = GRANT_RULES[object].level;
  const sql = text(`level ${object} ${alias}`, () => {
    const parts = sources.map((s) => `(SELECT ${s.level} FROM ${s.from} WHERE ${at(s.on, alias)} AND ${s.user} = ?)`);
    return parts.length === 1 ? parts[0]! : `COALESCE(${parts.join(", ")})`;
  });
  return { sql, params: sources.map(() => user) };
}

/**
 * List filters: `project` is a condition on a "Project" aliased p, `environment` on an
 * "Environment" aliased e; each comes with its parameters. null: the caller sees every project
 * and environment of its team. Grants need no team check of their own: they are matched on the
 * object, and a list query already restricts it to the caller's team.
 */
export function visibilitySql(caller: Caller): { project: SqlFragment; environment: SqlFragment } | null {
  if (seesWholeTeam(caller)) return null;
  const user = caller.userId ?? -1;
  return { project: anyOf("project", "p", user), environment: anyOf("environment", "e", user) };
}

/**
 * The caller's level on one object as SQL over its row (aliased `alias`), with its visibility:
 * `level` is a level or NULL, `visible` is 1 or 0. For callers who see the whole team both are
 * constants, and no row needs reading (see fixedLevel).
 */
export function levelSql(caller: Caller, object: GrantedObject, alias: string): { level: SqlFragment; visible: SqlFragment } {
  const s = standing(caller);
  if (s.sees === "team") return { level: { sql: "?", params: [s.level] }, visible: { sql: "1", params: [] } };
  const user = caller.userId ?? -1;
  const visible = anyOf(object, alias, user);
  return { level: firstOf(object, alias, user), visible: { sql: `CASE WHEN ${visible.sql} THEN 1 ELSE 0 END`, params: visible.params } };
}

/** The level of callers who see the whole team, on any object of it; null for members (their grants decide). */
export function fixedLevel(caller: Caller): PermissionLevel | null {
  const s = standing(caller);
  return s.sees === "team" ? s.level : null;
}
