/**
 * THE AUTHORIZATION MATRIX (issue 15): every token route of the route table × every token
 * scope set (each non-empty subset of read, write, deploy) × team role (owner, admin, member,
 * viewer) × project/environment permission (none; view_only, deploy, full_access as a project
 * grant; the same as environment overrides) × own or other team, asserting the outcome spec
 * section 5 and docs/decisions.md give:
 *
 *   401 Unauthenticated. without a token;
 *   403 Invalid ability provided. when the token lacks the route's scope (checked first);
 *   404 for another team's object, and for an object the member cannot view;
 *   403 for a visible object without the level the route needs (or a team-admin-only or
 *       team-owner-only route);
 *   success otherwise: 2xx, or the status the route answers on these fixtures for reasons
 *   outside authorization (no agent runs the fixture servers: OWN_STATUS of support/fixtures).
 *
 * The expected outcome is derived from the route's declared scope (route table) and NEEDS
 * below, which says what each route needs. A route missing from NEEDS fails the matrix until
 * it declares its need. Refused requests run concurrently on shared fixtures (and must change
 * nothing of the team: checked per route); requests expected to succeed get a fresh target
 * where they would use one up (FRESH), so every case runs on a known state.
 */
import { Agent, request } from "node:http";
import { hostname } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TOKEN_SCOPES, type PermissionLevel, type TeamRole, type TokenScope } from "@capstan/shared";
import { routes as allRoutes } from "../../control-plane/src/http/routes/index.js";
import { requiredScope, type AnyRoute } from "../../control-plane/src/http/route.js";
import { startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import {
  BODIES,
  OWN_STATUS,
  QUERY_TARGETS,
  QUIET_FREQUENCY,
  RESOURCE_VALUES,
  buildFixtures,
  gitAppKey,
  initFixtures,
  keyOf,
  kindOf,
  ok,
  pathParams,
  snapshot,
  changedKeys,
  withQuery,
  type Fixtures,
} from "./support/fixtures.js";

const routes = allRoutes.filter((r) => r.auth !== "none");

// ---------------------------------------------------------------------------------------------
// What each route needs (besides its token scope). "team": any member of the team (team-level
// reads; lists, which show each caller what it may see). "team-admin": owners and admins only,
// checked before any lookup (so a member gets 403 for any id). "team-owner": the team's owners
// only (admins get 403 too; the team's own settings). "create-project": anyone but
// viewers. "own-grant": a permission row, which members and viewers see only when it is their
// own (the fixture's row is someone else's: 404). Otherwise the level needed on the object's
// project or environment (spec 5: view_only < deploy < full_access; owner and admin bypass).

type Level = "view" | "deploy" | "manage" | "delete";
type Need = "team" | "team-admin" | "team-owner" | "create-project" | "own-grant" | { project: Level } | { environment: Level };

const NEEDS: Record<string, Need> = {
  "get /teams": "team",
  "get /teams/current": "team",
  "patch /teams/current/settings": "team-owner",
  "get /teams/current/members": "team",
  "get /teams/{id}": "team",
  "get /teams/{id}/members": "team",

  "get /projects": "team",
  "post /projects": "create-project",
  "get /projects/{uuid}": { project: "view" },
  "patch /projects/{uuid}": { project: "manage" },
  "delete /projects/{uuid}": { project: "delete" },
  "get /projects/{uuid}/environments": { project: "view" },
  "post /projects/{uuid}/environments": { project: "manage" },
  "get /projects/{uuid}/{environment_name_or_uuid}": { environment: "view" },
  "delete /projects/{uuid}/environments/{environment_name_or_uuid}": { environment: "delete" },

  "get /permissions/project": "team",
  "post /permissions/project/bulk": "team-admin",
  "delete /permissions/project/bulk/{project_uuid}": "team-admin",
  "get /permissions/project/{id}": "own-grant",
  "post /permissions/project": "team-admin",
  "put /permissions/project/{id}": "team-admin",
  "delete /permissions/project/{id}": "team-admin",
  "get /permissions/environment": "team",
  "post /permissions/environment": "team-admin",
  "delete /permissions/environment/{id}": "team-admin",

  "get /security/keys": "team",
  "get /services/templates": "team",
  "post /security/keys": "team-admin",
  "get /security/keys/{uuid}": "team",
  "patch /security/keys/{uuid}": "team-admin",
  "delete /security/keys/{uuid}": "team-admin",

  "get /servers": "team",
  "post /servers": "team-admin",
  "get /servers/{uuid}": "team",
  "patch /servers/{uuid}": "team-admin",
  "delete /servers/{uuid}": "team-admin",
  "post /servers/{uuid}/agent-token": "team-admin",
  "get /servers/{uuid}/validate": "team",
  "get /servers/{uuid}/resources": "team",
  "get /servers/{uuid}/domains": "team",
  "post /servers/{uuid}/install-agent": "team-admin",

  "get /applications": "team",
  "post /applications/public": { environment: "manage" },
  "post /applications/private-git-app": { environment: "manage" },
  "post /applications/private-github-app": { environment: "manage" },
  "post /applications/private-deploy-key": { environment: "manage" },
  "post /applications/dockerfile": { environment: "manage" },
  "post /applications/dockerimage": { environment: "manage" },
  "post /applications/dockercompose": { environment: "manage" },
  "get /applications/{uuid}": { environment: "view" },
  "patch /applications/{uuid}": { environment: "manage" },
  "delete /applications/{uuid}": { environment: "delete" },
  "post /applications/{uuid}/start": { environment: "deploy" },
  "post /applications/{uuid}/stop": { environment: "deploy" },
  "post /applications/{uuid}/restart": { environment: "deploy" },
  // Coolify's GET forms: the same actions, the same need (and the deploy scope, not read).
  "get /applications/{uuid}/start": { environment: "deploy" },
  "get /applications/{uuid}/stop": { environment: "deploy" },
  "get /applications/{uuid}/restart": { environment: "deploy" },
  "get /applications/{uuid}/logs": { environment: "view" },
  "get /applications/{uuid}/envs": { environment: "view" },
  "post /applications/{uuid}/envs": { environment: "manage" },
  "patch /applications/{uuid}/envs": { environment: "manage" },
  "patch /applications/{uuid}/envs/bulk": { environment: "manage" },
  "delete /applications/{uuid}/envs/{env_uuid}": { environment: "manage" },
  "get /applications/{uuid}/storages": { environment: "view" },
  "post /applications/{uuid}/storages": { environment: "manage" },
  "delete /applications/{uuid}/storages/{storage_uuid}": { environment: "manage" },
  "post /applications/{uuid}/webhook-secret": { environment: "manage" },

  "get /github-apps": "team",
  "post /github-apps": "team-admin",
  "get /github-apps/{uuid}": "team",
  "patch /github-apps/{uuid}": "team-admin",
  "delete /github-apps/{uuid}": "team-admin",

  "post /applications/{uuid}/deploy": { environment: "deploy" },
  // Coolify's deploy by uuid: deploy on the environment of every application (or database) named.
  "get /deploy": { environment: "deploy" },
  "post /deploy": { environment: "deploy" },
  "get /deployments": "team",
  "get /deployments/applications/{application_uuid}": { environment: "view" },
  "get /deployments/{uuid}": { environment: "view" },
  "post /deployments/{uuid}/cancel": { environment: "deploy" },
  "get /deployments/{uuid}/logs/stream": { environment: "view" },

  "get /databases": "team",
  ...Object.fromEntries(["postgresql", "mysql", "mariadb", "mongodb", "redis", "clickhouse", "dragonfly", "keydb"].map((e) => [`post /databases/${e}`, { environment: "manage" }])),
  "get /databases/{uuid}": { environment: "view" },
  "patch /databases/{uuid}": { environment: "manage" },
  "delete /databases/{uuid}": { environment: "delete" },
  "post /databases/{uuid}/start": { environment: "deploy" },
  "post /databases/{uuid}/stop": { environment: "deploy" },
  "post /databases/{uuid}/restart": { environment: "deploy" },
  "get /databases/{uuid}/start": { environment: "deploy" },
  "get /databases/{uuid}/stop": { environment: "deploy" },
  "get /databases/{uuid}/restart": { environment: "deploy" },
  "get /databases/{uuid}/logs": { environment: "view" },
  "get /databases/{uuid}/envs": { environment: "view" },
  "post /databases/{uuid}/envs": { environment: "manage" },
  "patch /databases/{uuid}/envs": { environment: "manage" },
  "patch /databases/{uuid}/envs/bulk": { environment: "manage" },
  "delete /databases/{uuid}/envs/{env_uuid}": { environment: "manage" },

  "get /networks/resource/{type}/{uuid}": { environment: "view" },
  "post /networks/resource/{type}/{uuid}/attach": { environment: "manage" },
  "delete /networks/resource/{type}/{uuid}/{networkUuid}": { environment: "manage" },
  "get /networks/{serverUuid}": "team",
  "post /networks/{serverUuid}": "team-admin",
  "post /networks/{serverUuid}/sync": "team-admin",
  "post /networks/{serverUuid}/proxy/migrate": "team-admin",
  "post /networks/{serverUuid}/proxy/cleanup": "team-admin",
  "get /networks/{serverUuid}/{networkUuid}": "team",
  "delete /networks/{serverUuid}/{networkUuid}": "team-admin",

  "get /s3-storages": "team",
  "post /s3-storages": "team-admin",
  "get /s3-storages/{id}": "team",
  "patch /s3-storages/{id}": "team-admin",
  "delete /s3-storages/{id}": "team-admin",
  "post /s3-storages/{id}/test": "team-admin",

  "get /databases/{uuid}/backups": { environment: "view" },
  "post /databases/{uuid}/backups": { environment: "manage" },
  "get /databases/{uuid}/backups/{backup_uuid}": { environment: "view" },
  "patch /databases/{uuid}/backups/{backup_uuid}": { environment: "manage" },
  "delete /databases/{uuid}/backups/{backup_uuid}": { environment: "manage" },
  "post /databases/{uuid}/backups/{backup_uuid}/execute": { environment: "deploy" },
  "get /databases/{uuid}/backups/{backup_uuid}/executions": { environment: "view" },
  "delete /databases/{uuid}/backups/{backup_uuid}/executions/{execution_uuid}": { environment: "manage" },
  "post /databases/{uuid}/backups/{backup_uuid}/executions/{execution_uuid}/restore": { environment: "manage" },

  "get /template-sources": "team",
  "post /template-sources": "team-admin",
  "post /template-sources/sync-all": "team-admin",
  "get /template-sources/{uuid}": "team",
  "put /template-sources/{uuid}": "team-admin",
  "delete /template-sources/{uuid}": "team-admin",
  "post /template-sources/{uuid}/sync": "team-admin",

  // services (issue 17)
  "get /services": "team",
  "post /services": { environment: "manage" },
  "get /services/{uuid}": { environment: "view" },
  "patch /services/{uuid}": { environment: "manage" },
  "delete /services/{uuid}": { environment: "delete" },
  "get /services/{uuid}/envs": { environment: "view" },
  "patch /services/{uuid}/envs": { environment: "manage" },
  "patch /services/{uuid}/envs/bulk": { environment: "manage" },
  "delete /services/{uuid}/envs/{env_uuid}": { environment: "manage" },
  "get /services/{uuid}/storages": { environment: "view" },
  "post /services/{uuid}/storages": { environment: "manage" },
  "delete /services/{uuid}/storages/{storage_uuid}": { environment: "manage" },
  // registries (issue 18)
  "get /registries": "team",
  "post /registries": "team-admin",
  "get /registries/{id}": "team",
  "patch /registries/{id}": "team-admin",
  "delete /registries/{id}": "team-admin",
  "post /registries/{id}/test": "team-admin",
  "post /registries/{id}/sync": "team-admin",
  // DNS (issue 21)
  "get /dns-providers": "team",
  "post /dns-providers": "team-admin",
  "get /dns-providers/{uuid}": "team",
  "delete /dns-providers/{uuid}": "team-admin",
  "post /dns-providers/{uuid}/test": "team-admin",
  "get /domains": "team",
  "post /domains": "team-admin",
  "get /domains/{uuid}": "team",
  "delete /domains/{uuid}": "team-admin",
  "post /domains/{uuid}/sync": "team-admin",
  // services lifecycle (issue 17)
  "post /services/{uuid}/start": { environment: "deploy" },
  "post /services/{uuid}/stop": { environment: "deploy" },
  "post /services/{uuid}/restart": { environment: "deploy" },

  // label overrides (w5/svcextras)
  "get /service-applications/{uuid}/label-overrides": { environment: "view" },
  "put /service-applications/{uuid}/label-overrides": { environment: "manage" },
  "delete /service-applications/{uuid}/label-overrides": { environment: "manage" },
  "get /service-databases/{uuid}/label-overrides": { environment: "view" },
  "put /service-databases/{uuid}/label-overrides": { environment: "manage" },
  "delete /service-databases/{uuid}/label-overrides": { environment: "manage" },
  // clusters (issue 20)
  "get /clusters": "team",
  "post /clusters/detect": "team-admin",
  "get /clusters/{uuid}": "team",
  "get /clusters/{uuid}/nodes": "team",
  "post /clusters/{uuid}/nodes/{nodeId}/drain": "team-admin",
  "post /clusters/{uuid}/nodes/{nodeId}/activate": "team-admin",
  "post /clusters/{uuid}/nodes/{nodeId}/promote": "team-admin",
  "post /clusters/{uuid}/nodes/{nodeId}/demote": "team-admin",
  "patch /clusters/{uuid}/nodes/{nodeId}/labels": "team-admin",
  // resource backups (issue 19): lists show what the caller sees; the rest by the application's environment.
  "get /resource-backups": "team",
  "post /resource-backups": { environment: "manage" },
  "get /resource-backups/{id}": { environment: "view" },
  "put /resource-backups/{id}": { environment: "manage" },
  "delete /resource-backups/{id}": { environment: "manage" },
  "post /resource-backups/{id}/execute": { environment: "deploy" },
  // ---- dns resources (issue 21, w6) ----
  "get /dns/resource/{type}/{uuid}": { environment: "view" },
  "post /dns/resource/{type}/{uuid}/resync": { environment: "deploy" },
  "post /dns/resource/{type}/{uuid}/assign-domain": { environment: "manage" },
  "get /domains/{uuid}/environment-bindings": "team",
  "post /domains/{uuid}/environment-bindings": "team-admin",
  "delete /domains/{uuid}/environment-bindings/{bindingId}": "team-admin",
  // ---- swarm services (issue 20) ----
  "get /clusters/{uuid}/services": "team",
  "get /clusters/{uuid}/services/{serviceId}/tasks": "team",
  "post /clusters/{uuid}/services/{serviceId}/scale": "team-admin",
  // ---- swarm secrets and configs (issue 20, w7) ----
  "get /clusters/{uuid}/secrets": "team",
  "post /clusters/{uuid}/secrets": "team-admin",
  "delete /clusters/{uuid}/secrets/{secretId}": "team-admin",
  "get /clusters/{uuid}/configs": "team",
  "post /clusters/{uuid}/configs": "team-admin",
  "delete /clusters/{uuid}/configs/{configId}": "team-admin",
  // ---- w7/svcroute: service applications' domains (issue 17) ----
  "patch /service-applications/{uuid}": { environment: "manage" },
  // ---- resource restores (issue 19, w7/restore) ----
  "post /resource-backups/{id}/executions/{execution_id}/restore": { environment: "manage" },
  // ---- connectivity history (dashboard, issue 22) ----
  "get /servers/{uuid}/connectivity": "team",
  // ---- cluster events (issue 20, w7/events) ----
  "get /clusters/{uuid}/events": "team",
};

// ---------------------------------------------------------------------------------------------
// The principals: every role × every permission configuration, each with a token per scope set.

const ROLES: TeamRole[] = ["owner", "admin", "member", "viewer"];
/** "none", or a level given as a project grant or as environment overrides (on every environment of the fixture project, no project grant). */
type Grant = { via: "none" } | { via: "project" | "environment"; level: PermissionLevel };
const GRANTS: Grant[] = [
  { via: "none" },
  ...(["view_only", "deploy", "full_access"] as const).map((level) => ({ via: "project" as const, level })),
  ...(["view_only", "deploy", "full_access"] as const).map((level) => ({ via: "environment" as const, level })),
];
const SCOPE_SETS: TokenScope[][] = [1, 2, 3, 4, 5, 6, 7].map((mask) => TOKEN_SCOPES.filter((_, i) => mask & (1 << i)));

const grantLabel = (g: Grant) => (g.via === "none" ? "no grant" : `${g.level} via ${g.via}`);

interface Principal {
  role: TeamRole;
  grant: Grant;
  userId: number;
  /** One token per SCOPE_SETS entry, same order. */
  tokens: string[];
}

interface World {
  f: Fixtures;
  principals: Principal[];
  /** Every environment of the fixture project (production and the fixture's own). */
  environmentIds: number[];
  projectId: number;
}

let t: TestInstance;
const keys = new KeyFactory();
let A: World;
let B: World;
/** Key material of the fresh keys (a team may hold the same key twice; generating one per case is slow). */
let freshKeyMaterial = "";

async function grantAll(userId: number, grant: Grant, projectId: number, environmentIds: number[]) {
  const db = t.instance.database.prisma;
  if (grant.via === "project") await db.projectPermission.create({ data: { projectId, userId, level: grant.level } });
  if (grant.via === "environment") {
    for (const environmentId of environmentIds) await db.environmentPermission.create({ data: { environmentId, userId, level: grant.level } });
  }
}

async function buildWorld(prefix: string): Promise<World> {
  const f = await buildFixtures(prefix);
  const db = t.instance.database.prisma;
  const project = await db.project.findUniqueOrThrow({ where: { uuid: f.project.uuid }, include: { environments: true } });
  const environmentIds = project.environments.map((e) => e.id);
  const principals: Principal[] = [];
  for (const role of ROLES) {
    for (const grant of GRANTS) {
      const userId = await t.instance.admin.createUser(`${role} ${grantLabel(grant)}`, `${prefix}-${role}-${principals.length}-${Date.now()}@matrix.test`);
      await t.instance.admin.setMember(f.teamId, userId, role);
      await grantAll(userId, grant, project.id, environmentIds);
      const tokens: string[] = [];
      for (const scopes of SCOPE_SETS) tokens.push(await t.instance.admin.createToken({ teamId: f.teamId, userId, name: scopes.join("+"), scopes }));
      principals.push({ role, grant, userId, tokens });
    }
  }
  return { f, principals, environmentIds, projectId: project.id };
}

// ---------------------------------------------------------------------------------------------
// Expected outcomes

type Outcome = { kind: "status"; status: number; message?: string } | { kind: "success" };
const UNAUTHENTICATED: Outcome = { kind: "status", status: 401, message: "Unauthenticated." };
const NO_SCOPE: Outcome = { kind: "status", status: 403, message: "Invalid ability provided." };
const NOT_FOUND: Outcome = { kind: "status", status: 404 };
const FORBIDDEN: Outcome = { kind: "status", status: 403 };
const SUCCESS: Outcome = { kind: "success" };

const RANK: Record<PermissionLevel, number> = { view_only: 0, deploy: 1, full_access: 2 };
const NEEDED: Record<Level, number> = { view: 0, deploy: 1, manage: 2, delete: 2 };

/** The caller's level on the fixture project or on one of its environments (null: cannot see it). */
function levelOf(p: Principal, on: "project" | "environment"): { visible: boolean; level: PermissionLevel | null } {
  if (p.role === "owner" || p.role === "admin") return { visible: true, level: "full_access" };
  if (p.role === "viewer") return { visible: true, level: "view_only" };
  if (p.grant.via === "none") return { visible: false, level: null };
  if (on === "project") return { visible: true, level: p.grant.via === "project" ? p.grant.level : null };
  return { visible: true, level: p.grant.level };
}

/** The outcome for a caller in the team that owns what the request names. */
function ownOutcome(need: Need, p: Principal): Outcome {
  const bypass = p.role === "owner" || p.role === "admin";
  if (need === "team") return SUCCESS;
  if (need === "team-admin") return bypass ? SUCCESS : FORBIDDEN;
  if (need === "team-owner") return p.role === "owner" ? SUCCESS : FORBIDDEN;
  if (need === "create-project") return p.role === "viewer" ? FORBIDDEN : SUCCESS;
  if (need === "own-grant") return bypass ? SUCCESS : NOT_FOUND;
  const [on, level] = "project" in need ? (["project", need.project] as const) : (["environment", need.environment] as const);
  const { visible, level: has } = levelOf(p, on);
  if (!visible) return NOT_FOUND;
  if (level === "view") return SUCCESS;
  return has !== null && RANK[has] >= NEEDED[level] ? SUCCESS : FORBIDDEN;
}

// ---------------------------------------------------------------------------------------------
// Cases

interface Case {
  route: AnyRoute;
  key: string;
  /** undefined: no token. */
  scopeIndex?: number;
  principal?: Principal;
  /** Whose team the caller is in: "own" is team A's principals on team A's objects. */
  team: "own" | "other";
  expected: Outcome;
  label: string;
}

const gaps: string[] = [];
for (const r of routes) if (!NEEDS[keyOf(r)]) gaps.push(`${keyOf(r)}: add it to NEEDS (what it needs: team, team-admin, team-owner, create-project, own-grant, {project: level} or {environment: level})`);
const known = new Set(routes.map(keyOf));
const stale = Object.keys(NEEDS).filter((k) => !known.has(k));

/** Routes whose requests name no object of a team in their path. */
const hasPathObjects = (r: AnyRoute) => pathParams(r).length > 0;

/**
 * The scope sets a principal's cases use on a route. The scope is checked before the role and
 * the permissions (http/auth.ts), and scopes beyond the needed one change nothing; so a token
 * that has the route's scope is tried with that scope alone and with every scope (the two ends),
 * and each set without it with every role, with no grant and with the widest grant: the callers
 * who would otherwise be refused for another reason and those who would act. That is every
 * boundary of the full product at ~40% of its requests (docs: CONTRIBUTING.md, "CI time").
 */
function scopeSetsFor(scope: TokenScope, p: Principal): number[] {
  const widest = p.grant.via === "none" || (p.grant.via === "project" && p.grant.level === "full_access");
  return SCOPE_SETS.flatMap((scopes, i) => {
    if (scopes.includes(scope)) return scopes.length === 1 || scopes.length === TOKEN_SCOPES.length ? [i] : [];
    return widest ? [i] : [];
  });
}

/** How many cases a route gets: one without a token, then scopeSetsFor over both teams' principals. */
function caseCount(r: AnyRoute, world: { A: World; B: World }): number {
  const scope = requiredScope(r);
  return 1 + [...world.A.principals, ...world.B.principals].reduce((n, p) => n + scopeSetsFor(scope, p).length, 0);
}

function buildCases(world: { A: World; B: World }): Case[] {
  const cases: Case[] = [];
  for (const r of routes) {
    const key = keyOf(r);
    const need = NEEDS[key];
    if (!need) continue;
    const scope = requiredScope(r);
    cases.push({ route: r, key, team: "own", expected: UNAUTHENTICATED, label: `${key} without a token` });
    for (const team of ["own", "other"] as const) {
      const callers = team === "own" ? world.A.principals : world.B.principals;
      for (const p of callers) {
        for (const scopeIndex of scopeSetsFor(scope, p)) {
          const scopes = SCOPE_SETS[scopeIndex]!;
          let expected: Outcome;
          if (!scopes.includes(scope)) expected = NO_SCOPE;
          else if (team === "own") expected = ownOutcome(need, p);
          else if (need === "team-admin" && p.role !== "owner" && p.role !== "admin") expected = FORBIDDEN;
          else if (need === "team-owner" && p.role !== "owner") expected = FORBIDDEN;
          else if (need === "create-project" && p.role === "viewer") expected = FORBIDDEN;
          else if (hasPathObjects(r) || typeof BODIES[key]?.foreign === "function" || QUERY_TARGETS[key]) expected = NOT_FOUND;
          // Nothing of team A is named: the caller acts in its own team, as there.
          else expected = ownOutcome(need, p);
          cases.push({ route: r, key, scopeIndex, principal: p, team, expected, label: `${key} [${p.role}, ${grantLabel(p.grant)}, ${scopes.join("+")}, ${team} team]` });
        }
      }
    }
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Requests

let seq = 0;
const unique = () => `${Date.now().toString(36)}${(seq++).toString(36)}`;

/** Path values of team A's (or B's) fixtures: the first variant of each kind. */
function pathOf(r: AnyRoute, f: Fixtures, override: Record<string, string | number> = {}): string {
  let path = r.path;
  for (const param of pathParams(r)) {
    const kind = kindOf(r, param)!;
    const value = override[param] ?? Object.values(RESOURCE_VALUES[kind]!)[0]!(f);
    path = path.replace(`{${param}}`, encodeURIComponent(String(value)));
  }
  return path;
}

/** One keep-alive connection pool for the cases: tens of thousands of requests, in the test's own process. */
const agent = new Agent({ keepAlive: true, maxSockets: 32 });

function call(token: string | undefined, r: AnyRoute, path: string, body: unknown): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const url = new URL(t.url);
    const payload = body === undefined || r.method === "get" ? undefined : Buffer.from(JSON.stringify(body));
    const headers: Record<string, string> = { accept: "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    if (payload) Object.assign(headers, { "content-type": "application/json", "content-length": String(payload.length) });
    const req = request({ host: url.hostname, port: url.port, path: `/api/v1${path}`, method: r.method.toUpperCase(), headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let parsed: unknown = text;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          /* a stream (deployment logs): kept as text */
        }
        resolve({ status: res.statusCode ?? 0, body: parsed, headers: new Headers() });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

/** A request built for a case: path, body, and what to clean up after a success. */
interface Prepared {
  path: string;
  body: unknown;
  after?: (res: ApiResponse) => Promise<unknown>;
}

const owner = (w: World) => w.f.api;

/** A fresh user in the team (for grants that may exist once per user). */
async function freshMember(w: World): Promise<number> {
  const id = await t.instance.admin.createUser(`fresh ${unique()}`, `fresh-${unique()}@matrix.test`);
  await t.instance.admin.setMember(w.f.teamId, id, "member");
  return id;
}

const imageApp = async (w: World) =>
  (
    await ok(
      owner(w).post("/applications/dockerimage", {
        project_uuid: w.f.project.uuid,
        environment_name: "production",
        server_uuid: w.f.server.uuid,
        destination_uuid: w.f.server.destinationUuid,
        docker_registry_image_name: "nginx:1.27",
      }),
      "fresh application",
    )
  ).uuid as string;

/**
 * Requests that use up what they name when they succeed (deletes, one-per-user grants, creates
 * of unique names, limits): each success case gets its own target, made by the team's owner.
 * `p` is the caller: grants it holds on the fixture project are given on a fresh one too.
 */
const FRESH: Record<string, (w: World, p: Principal, body: unknown) => Promise<Prepared>> = {
  // Not used up, but a team setting: put back after each success, so every case (and every
  // later route) finds the team as the fixtures made it.
  "patch /teams/current/settings": async (w, _p, body) => ({
    path: "/teams/current/settings",
    body,
    after: async () => ok(owner(w).patch("/teams/current/settings", { allow_member_bind_mounts: false }), "put the team setting back"),
  }),
  "delete /projects/{uuid}": async (w, p) => {
    const project = await ok(owner(w).post("/projects", { name: `fresh-${unique()}` }), "fresh project");
    const row = await t.instance.database.prisma.project.findUniqueOrThrow({ where: { uuid: project.uuid }, include: { environments: true } });
    await grantAll(p.userId, p.grant, row.id, row.environments.map((e) => e.id));
    return { path: `/projects/${project.uuid}`, body: undefined };
  },
  "post /projects/{uuid}/environments": async (w) => ({ path: `/projects/${w.f.project.uuid}/environments`, body: { name: `e-${unique()}` } }),
  "delete /projects/{uuid}/environments/{environment_name_or_uuid}": async (w, p) => {
    const name = `gone-${unique()}`;
    const env = (await ok(owner(w).post(`/projects/${w.f.project.uuid}/environments`, { name }), "fresh environment")).data;
    if (p.grant.via === "environment") await grantAll(p.userId, p.grant, w.projectId, [env.id]);
    return { path: `/projects/${w.f.project.uuid}/environments/${name}`, body: undefined };
  },
  "post /permissions/project/bulk": async (w) => {
    const project = await ok(owner(w).post("/projects", { name: `bulk-${unique()}` }), "fresh project");
    return { path: "/permissions/project/bulk", body: { project_uuid: project.uuid, permission_level: "view_only" } };
  },
  "delete /permissions/project/bulk/{project_uuid}": async (w) => {
    const project = await ok(owner(w).post("/projects", { name: `bulk-${unique()}` }), "fresh project");
    return { path: `/permissions/project/bulk/${project.uuid}`, body: undefined };
  },
  "post /permissions/project": async (w) => ({ path: "/permissions/project", body: { project_uuid: w.f.project.uuid, user_id: await freshMember(w), permission_level: "view_only" } }),
  "delete /permissions/project/{id}": async (w) => {
    const grant = await ok(owner(w).post("/permissions/project", { project_uuid: w.f.project.uuid, user_id: await freshMember(w), permission_level: "view_only" }), "fresh grant");
    return { path: `/permissions/project/${grant.data.id}`, body: undefined };
  },
  "post /permissions/environment": async (w) => ({
    path: "/permissions/environment",
    body: { environment_id: w.f.environment.id, user_id: await freshMember(w), permission_level: "view_only" },
  }),
  "delete /permissions/environment/{id}": async (w) => {
    const grant = await ok(owner(w).post("/permissions/environment", { environment_id: w.f.environment.id, user_id: await freshMember(w), permission_level: "view_only" }), "fresh override");
    return { path: `/permissions/environment/${grant.data.id}`, body: undefined };
  },
  "delete /security/keys/{uuid}": async (w) => {
    const key = await ok(owner(w).post("/security/keys", { name: `fresh-${unique()}`, private_key: freshKeyMaterial }), "fresh key");
    return { path: `/security/keys/${key.uuid}`, body: undefined };
  },
  "delete /servers/{uuid}": async (w) => {
    const server = await ok(owner(w).post("/servers", { name: `fresh-${unique()}`, ip: "192.0.2.30", private_key_uuid: w.f.key.uuid }), "fresh server");
    return { path: `/servers/${server.uuid}`, body: undefined };
  },
  "delete /applications/{uuid}": async (w) => ({ path: `/applications/${await imageApp(w)}`, body: { delete_volumes: true } }),
  "post /applications/{uuid}/envs": async (w) => ({ path: `/applications/${w.f.application.uuid}/envs`, body: { key: `MATRIX_${unique().toUpperCase()}`, value: "x" } }),
  "delete /applications/{uuid}/envs/{env_uuid}": async (w) => {
    const env = (await ok(owner(w).post(`/applications/${w.f.application.uuid}/envs`, { key: `GONE_${unique().toUpperCase()}`, value: "x" }), "fresh variable")).data;
    return { path: `/applications/${w.f.application.uuid}/envs/${env.uuid}`, body: undefined };
  },
  // At most 64 storages per application: each success on an application of its own.
  "post /applications/{uuid}/storages": async (w) => ({ path: `/applications/${await imageApp(w)}/storages`, body: { name: "data", mount_path: "/data" } }),
  "delete /applications/{uuid}/storages/{storage_uuid}": async (w) => {
    const storage = (await ok(owner(w).post(`/applications/${w.f.application.uuid}/storages`, { name: `s-${unique()}`, mount_path: `/m-${unique()}` }), "fresh storage")).data;
    return { path: `/applications/${w.f.application.uuid}/storages/${storage.uuid}`, body: undefined };
  },
  "delete /github-apps/{uuid}": async (w) => {
    const app = await ok(owner(w).post("/github-apps", { name: `fresh-${unique()}`, app_id: 3, installation_id: 3, private_key: gitAppKey }), "fresh git app");
    return { path: `/github-apps/${app.uuid}`, body: undefined };
  },
  // Each queued deployment counts against the server's queue limit: cancelled after the case.
  "post /applications/{uuid}/deploy": async (w) => ({
    path: `/applications/${await imageApp(w)}/deploy`,
    body: { force: true },
    after: async (res) => ok(owner(w).post(`/deployments/${res.body.deployment_uuid}/cancel`), "cancel the case's deployment"),
  }),
  // Start of a never-deployed application deploys it: the same, on an application of its own.
  ...Object.fromEntries(
    (["post", "get"] as const).map((method) => [
      `${method} /applications/{uuid}/start`,
      async (w: World) => ({
        path: `/applications/${await imageApp(w)}/start`,
        body: undefined,
        after: async (res: ApiResponse) => ok(owner(w).post(`/deployments/${res.body.deployment_uuid}/cancel`), "cancel the case's deployment"),
      }),
    ]),
  ),
  // Coolify's deploy by uuid: an application of its own, its deployment cancelled after the case.
  "get /deploy": async (w) => ({
    path: withQuery("/deploy", { uuid: await imageApp(w) }),
    body: undefined,
    after: async (res) => ok(owner(w).post(`/deployments/${res.body.deployments[0].deployment_uuid}/cancel`), "cancel the case's deployment"),
  }),
  "post /deploy": async (w) => ({
    path: "/deploy",
    body: { uuid: await imageApp(w) },
    after: async (res) => ok(owner(w).post(`/deployments/${res.body.deployments[0].deployment_uuid}/cancel`), "cancel the case's deployment"),
  }),
  "delete /databases/{uuid}": async (w) => {
    const db = await ok(
      owner(w).post("/databases/redis", { project_uuid: w.f.project.uuid, environment_name: "production", server_uuid: w.f.server.uuid, destination_uuid: w.f.server.destinationUuid, instant_deploy: false }),
      "fresh database",
    );
    return { path: `/databases/${db.uuid}`, body: { delete_volumes: true } };
  },
  "post /databases/{uuid}/envs": async (w) => ({ path: `/databases/${w.f.database.uuid}/envs`, body: { key: `MATRIX_${unique().toUpperCase()}`, value: "x" } }),
  "delete /databases/{uuid}/envs/{env_uuid}": async (w) => {
    const env = (await ok(owner(w).post(`/databases/${w.f.database.uuid}/envs`, { key: `GONE_${unique().toUpperCase()}`, value: "x" }), "fresh variable")).data;
    return { path: `/databases/${w.f.database.uuid}/envs/${env.uuid}`, body: undefined };
  },
  // Attach: the fixture network is attached already, and a resource takes at most 32 networks:
  // each success attaches a network of its own to an application of its own.
  "post /networks/resource/{type}/{uuid}/attach": async (w) => {
    const network = (await ok(owner(w).post(`/networks/${w.f.server.uuid}`, { name: `att-${unique()}` }), "fresh network")).data;
    return { path: `/networks/resource/application/${await imageApp(w)}/attach`, body: { network_uuid: network.uuid } };
  },
  "delete /networks/resource/{type}/{uuid}/{networkUuid}": async (w) => {
    const network = (await ok(owner(w).post(`/networks/${w.f.server.uuid}`, { name: `att-${unique()}` }), "fresh network")).data;
    await ok(owner(w).post(`/networks/resource/application/${w.f.application.uuid}/attach`, { network_uuid: network.uuid }), "attach");
    return { path: `/networks/resource/application/${w.f.application.uuid}/${network.uuid}`, body: undefined };
  },
  "post /networks/{serverUuid}": async (w) => ({ path: `/networks/${w.f.server.uuid}`, body: { name: `n-${unique()}` } }),
  "delete /networks/{serverUuid}/{networkUuid}": async (w) => {
    const network = (await ok(owner(w).post(`/networks/${w.f.server.uuid}`, { name: `gone-${unique()}` }), "fresh network")).data;
    return { path: `/networks/${w.f.server.uuid}/${network.uuid}`, body: undefined };
  },
  "delete /s3-storages/{id}": async (w) => {
    const storage = (
      await ok(owner(w).post("/s3-storages", { name: `fresh-${unique()}`, endpoint: "https://s3.example.com", bucket: "fresh-bucket", access_key: "ak", secret_key: "sk" }), "fresh storage")
    ).data;
    return { path: `/s3-storages/${storage.id}`, body: undefined };
  },
  "delete /template-sources/{uuid}": async (w) => {
    const source = (await ok(owner(w).post("/template-sources", { name: `fresh-${unique()}`, repository_url: `http://${hostname()}:1/fresh.git` }), "fresh template source")).data;
    return { path: `/template-sources/${source.uuid}`, body: undefined };
  },
  "delete /databases/{uuid}/backups/{backup_uuid}": async (w) => {
    const schedule = (await ok(owner(w).post(`/databases/${w.f.database.uuid}/backups`, { frequency: QUIET_FREQUENCY }), "fresh schedule")).data;
    return { path: `/databases/${w.f.database.uuid}/backups/${schedule.uuid}`, body: undefined };
  },
  // An execution of a schedule of its own (the fixture schedule may have been disabled by a PATCH case).
  "delete /databases/{uuid}/backups/{backup_uuid}/executions/{execution_uuid}": async (w) => {
    const schedule = (await ok(owner(w).post(`/databases/${w.f.database.uuid}/backups`, { frequency: QUIET_FREQUENCY }), "fresh schedule")).data;
    const row = await t.instance.database.prisma.backupSchedule.findUniqueOrThrow({ where: { uuid: schedule.uuid } });
    await t.instance.backupScheduler.fire(row.id, new Date("2026-01-01T03:00:00Z"));
    const execution = await t.instance.database.prisma.backupExecution.findFirstOrThrow({ where: { scheduleId: row.id } });
    return { path: `/databases/${w.f.database.uuid}/backups/${schedule.uuid}/executions/${execution.uuid}`, body: undefined };
  },
  // services (issue 17)
  "delete /services/{uuid}": async (w) => {
    const svc = await ok(
      owner(w).post("/services", { project_uuid: w.f.project.uuid, environment_name: "production", server_uuid: w.f.server.uuid, destination_uuid: w.f.server.destinationUuid, type: "uptime-kuma" }),
      "fresh service",
    );
    return { path: `/services/${svc.uuid}`, body: { delete_volumes: true } };
  },
  "delete /services/{uuid}/envs/{env_uuid}": async (w) => {
    const env = (await ok(owner(w).patch(`/services/${w.f.service.uuid}/envs`, { key: `GONE_${unique().toUpperCase()}`, value: "x" }), "fresh variable")).data;
    return { path: `/services/${w.f.service.uuid}/envs/${env.uuid}`, body: undefined };
  },
  // At most 64 storages per service, names unique: each success on a service of its own.
  "post /services/{uuid}/storages": async (w) => {
    const svc = await ok(
      owner(w).post("/services", { project_uuid: w.f.project.uuid, environment_name: "production", server_uuid: w.f.server.uuid, destination_uuid: w.f.server.destinationUuid, type: "uptime-kuma" }),
      "fresh service",
    );
    return { path: `/services/${svc.uuid}/storages`, body: { name: "data", mount_path: "/data" } };
  },
  "delete /services/{uuid}/storages/{storage_uuid}": async (w) => {
    const storage = (await ok(owner(w).post(`/services/${w.f.service.uuid}/storages`, { name: `s-${unique()}`, mount_path: `/m-${unique()}` }), "fresh storage")).data;
    return { path: `/services/${w.f.service.uuid}/storages/${storage.uuid}`, body: undefined };
  },
  // registries (issue 18)
  "delete /registries/{id}": async (w) => {
    const registry = (
      await ok(owner(w).post("/registries", { name: `fresh-${unique()}`, type: "custom", url: "https://registry.example.com", credentials: { username: "u", password: "p" } }), "fresh registry")
    ).data;
    return { path: `/registries/${registry.id}`, body: undefined };
  },
  // DNS (issue 21)
  "delete /dns-providers/{uuid}": async (w) => {
    const p = (await ok(owner(w).post("/dns-providers", { name: `fresh-${unique()}`, type: "cloudflare", credentials: { api_token: "fresh-token" } }), "fresh dns provider")).data;
    return { path: `/dns-providers/${p.uuid}`, body: undefined };
  },
  "delete /domains/{uuid}": async (w) => {
    const d = (await ok(owner(w).post("/domains", { name: `fresh-${unique()}.example.test`, dns_provider_uuid: w.f.dnsProvider.uuid, routing_mode: "per_hostname" }), "fresh domain")).data;
    return { path: `/domains/${d.uuid}`, body: undefined };
  },
  // resource backups (issue 19)
  "delete /resource-backups/{id}": async (w) => {
    const b = (await ok(owner(w).post("/resource-backups", { resource_type: "application", resource_id: w.f.applicationId, backup_type: "volume", frequency: QUIET_FREQUENCY }), "fresh resource backup")).data;
    return { path: `/resource-backups/${b.id}`, body: undefined };
  },
  // ---- dns resources (issue 21, w6) ----
  // The application's hostname as it is now (other cases PATCH its fqdn): unpinning it succeeds.
  "post /dns/resource/{type}/{uuid}/assign-domain": async (w) => {
    const fqdn = String((await ok(owner(w).get(`/applications/${w.f.application.uuid}`), "application")).fqdn);
    const hostname = new URL(/^[a-z]+:\/\//.test(fqdn.split(",")[0]!) ? fqdn.split(",")[0]! : `http://${fqdn.split(",")[0]}`).hostname;
    return { path: `/dns/resource/application/${w.f.application.uuid}/assign-domain`, body: { hostname, domain_uuid: null } };
  },
  "delete /domains/{uuid}/environment-bindings/{bindingId}": async (w) => {
    const b = (await ok(owner(w).post(`/domains/${w.f.domain.uuid}/environment-bindings`, { environment_role: `r-${unique()}` }), "fresh environment binding")).data;
    return { path: `/domains/${w.f.domain.uuid}/environment-bindings/${b.id}`, body: undefined };
  },
};

/** The request of a case: the fixture path and valid body (or a fresh target for a success that uses one up). */
async function prepare(c: Case, w: World, foreign: World | undefined): Promise<Prepared> {
  const r = c.route;
  const spec = BODIES[c.key];
  if (c.team === "other" && !hasPathObjects(r) && typeof spec?.foreign === "function") {
    // Team B's caller names team A's objects in the body.
    return { path: r.path, body: spec.foreign(foreign!.f, w.f)[0] };
  }
  const targets = QUERY_TARGETS[c.key];
  if (c.team === "other" && !hasPathObjects(r) && targets) {
    // ... or in the query string (Coolify's /deploy?uuid=).
    return { path: withQuery(r.path, targets.foreign(foreign!.f, w.f)[0]), body: undefined };
  }
  const target = c.team === "other" && hasPathObjects(r) ? foreign! : w;
  const body = r.body ? spec!.valid(w.f) : undefined;
  if (c.expected.kind === "success" && FRESH[c.key]) return FRESH[c.key]!(target, c.principal!, body);
  // Targets in the query only where the route takes no body (a body carries them otherwise).
  return { path: withQuery(pathOf(r, target.f), targets && !r.body ? targets.valid(target.f) : undefined), body: uniqueNames(c.key, body) };
}

/** Creates whose body names something unique get a new name per case. */
function uniqueNames(key: string, body: unknown): unknown {
  if (!body || typeof body !== "object" || !["post /projects", "post /security/keys", "post /servers", "post /github-apps", "post /s3-storages", "post /template-sources"].includes(key)) return body;
  return { ...(body as object), name: `m-${unique()}` };
}

/**
 * Successes whose requests write the same rows: run one at a time. Variable upserts and registry
 * server assignment are race-free (db/locks.ts; test/api/concurrent-upserts.test.ts) and run
 * concurrently like the rest.
 */
const SERIAL = new Set(["patch /teams/current/settings"]);

/**
 * What "the route acted" looks like where it depends on what earlier cases did to the shared
 * fixtures, beyond OWN_STATUS (support/fixtures.ts): proxy cleanup answers 409 before a
 * migration was asked for, and 503 (no agent) once one was.
 */
const ACTED: Record<string, number[]> = { "post /networks/{serverUuid}/proxy/cleanup": [409, 503] };

function check(c: Case, res: ApiResponse): string | undefined {
  const got = `${res.status} ${JSON.stringify(res.body)?.slice(0, 200)}`;
  if (c.expected.kind === "status") {
    if (res.status !== c.expected.status) return `${c.label}: expected ${c.expected.status}, got ${got}`;
    if (c.expected.message !== undefined && res.body?.message !== c.expected.message) return `${c.label}: expected message ${c.expected.message}, got ${got}`;
    if (typeof res.body?.message !== "string") return `${c.label}: an error without {message}: ${got}`;
    return undefined;
  }
  const acted = ACTED[c.key];
  if (acted) return acted.includes(res.status) ? undefined : `${c.label}: expected one of ${acted.join(", ")}, got ${got}`;
  const own = OWN_STATUS[c.key];
  if (own === "found") return [401, 403, 404, 422].includes(res.status) ? `${c.label}: expected the route to act (not 401/403/404/422), got ${got}` : undefined;
  if (own !== undefined) return res.status === own ? undefined : `${c.label}: expected success (${own} on these fixtures), got ${got}`;
  return res.status >= 200 && res.status < 300 ? undefined : `${c.label}: expected 2xx, got ${got}`;
}

/**
 * The jobs the successes queued end now, as their deadline would end them minutes later (no
 * agent runs the fixture servers): their outcomes (a service's action failed, an execution
 * failed) land within the route that caused them, not inside a later route's refusals.
 */
async function endJobsSince(since: Date): Promise<void> {
  const open = { status: { in: ["queued", "dispatched", "running"] }, createdAt: { gte: since } };
  // An outcome may queue a follow-up job: a few passes, each ending what the last one left.
  for (let pass = 0; pass < 3 && (await t.instance.database.prisma.job.count({ where: open })) > 0; pass++) {
    await t.instance.database.prisma.job.updateMany({ where: open, data: { deadlineAt: new Date(0) } });
    await t.instance.jobs.tick();
  }
}

async function inParallel<T>(items: T[], n: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: n }, async () => {
    while (next < items.length) await fn(items[next++]!);
  }));
}

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  // Network management on (the network routes get past "disabled"); a network limit the
  // matrix's fresh networks cannot reach.
  t = await startTestInstance({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_PROXY_ISOLATION: "true", PLATFORM_MAX_NETWORKS: "100000" });
  await initFixtures(t, keys);
  freshKeyMaterial = (await keys.generate("ed25519")).privateKey;
  A = await buildWorld("authz-a");
  B = await buildWorld("authz-b");
}, 300_000);
afterAll(async () => {
  agent.destroy();
  await t?.close();
  keys.cleanup();
});

describe("the authorization matrix", () => {
  it("knows what every route needs", () => {
    expect(gaps, `authorization matrix is missing entries:\n  ${gaps.join("\n  ")}\n`).toEqual([]);
    expect(stale, "NEEDS entries for routes that do not exist").toEqual([]);
  });

  // 10-12 minutes on PostgreSQL in CI beside the other suites (2 cores); the limit is for a hang, not a timing check.
  it("every route × scopes × roles × permission levels × own/other team answers as the spec says", { timeout: 1_800_000 }, async () => {
    const started = Date.now();
    const cases = buildCases({ A, B });
    const failures: string[] = [];
    const counts = { refused: 0, succeeded: 0 };
    const ms = { refused: 0, snapshots: 0, succeeded: 0 };
    const lap = (what: keyof typeof ms, since: number) => (ms[what] += Date.now() - since);
    const perRoute: [string, number][] = [];
    for (const r of routes) {
      const routeStarted = Date.now();
      const mine = cases.filter((c) => c.route === r);
      const refused = mine.filter((c) => c.expected.kind === "status");
      const succeeding = mine.filter((c) => c.expected.kind === "success");
      // Refused requests first, all at once on the shared fixtures: those of a route that may
      // write must change nothing of team A (a read-scope GET changes nothing by contract;
      // Coolify's GET forms of actions do, and are checked like writes).
      const writes = r.method !== "get" || requiredScope(r) !== "read";
      let at = Date.now();
      const before = writes ? await snapshot(A.f) : undefined;
      lap("snapshots", at);
      at = Date.now();
      await inParallel(refused, 16, async (c) => {
        const { path, body } = await prepare(c, c.team === "own" ? A : B, A);
        const problem = check(c, await call(c.principal ? c.principal.tokens[c.scopeIndex!] : undefined, r, path, body));
        if (problem) failures.push(problem);
      });
      counts.refused += refused.length;
      lap("refused", at);
      at = Date.now();
      const after = writes ? await snapshot(A.f) : undefined;
      lap("snapshots", at);
      at = Date.now();
      if (JSON.stringify(after) !== JSON.stringify(before)) failures.push(`${keyOf(r)}: a refused request changed team A (${changedKeys(before, after).join(", ")})`);
      // Then the successes, each on its own target where it would use one up; upserts of one row
      // one at a time (concurrent ones would be a race of the test's own making).
      await inParallel(succeeding, SERIAL.has(keyOf(r)) ? 1 : 16, async (c) => {
        const w = c.team === "own" ? A : B;
        const prepared = await prepare(c, w, A);
        const res = await call(c.principal!.tokens[c.scopeIndex!], r, prepared.path, prepared.body);
        const problem = check(c, res);
        if (problem) failures.push(problem);
        else await prepared.after?.(res);
      });
      counts.succeeded += succeeding.length;
      await endJobsSince(new Date(routeStarted));
      lap("succeeded", at);
      perRoute.push([keyOf(r), Date.now() - routeStarted]);
    }
    const slowest = perRoute.sort((a, b) => b[1] - a[1]).slice(0, 5).map(([k, v]) => `${k} ${(v / 1000).toFixed(1)}s`).join(", ");
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    console.log(
      `authorization matrix (${process.env.CAPSTAN_TEST_PG_URL ? "PostgreSQL" : "SQLite"}): ${cases.length} cases = ${routes.length} routes × (1 without a token + ` +
        `${ROLES.length} roles × ${GRANTS.length} permission configurations × 2 teams with the route's scope alone and with all scopes, ` +
        `${ROLES.length} roles × 2 permission configurations × 2 teams per scope set without it); ` +
        `${counts.refused} refused as expected, ${counts.succeeded} succeeded as expected; ${failures.length} failures; ${seconds}s (refused ${ms.refused / 1000}s, successes ${ms.succeeded / 1000}s, snapshots ${ms.snapshots / 1000}s; slowest routes: ${slowest})`,
    );
    expect(cases.length).toBe(routes.reduce((n, r) => n + caseCount(r, { A, B }), 0));
    // Every route: both ends of the scopes that allow it for every role and grant, every scope set that does not.
    for (const r of routes) {
      const mine = cases.filter((c) => c.route === r && c.scopeIndex !== undefined);
      expect(new Set(mine.map((c) => c.scopeIndex)).size, keyOf(r)).toBe(SCOPE_SETS.filter((s) => !s.includes(requiredScope(r))).length + 2);
      expect(new Set(mine.map((c) => `${c.team} ${c.principal!.role} ${grantLabel(c.principal!.grant)}`)).size, keyOf(r)).toBe(2 * ROLES.length * GRANTS.length);
    }
    expect(failures.slice(0, 60), `${failures.length} cases answered otherwise:\n${failures.slice(0, 60).join("\n")}`).toEqual([]);
  });
});
