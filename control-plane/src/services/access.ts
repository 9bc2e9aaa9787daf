import type { PermissionLevel } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { Caller } from "../domain/caller.js";
import { NotFound, Forbidden } from "../domain/errors.js";

/** What an action needs, in the terms of the spec's ability table. */
export type Need = "view" | "deploy" | "manage" | "delete";

const LEVEL_ALLOWS: Record<PermissionLevel, ReadonlySet<Need>> = {
  view_only: new Set(["view"]),
  deploy: new Set(["view", "deploy"]),
  full_access: new Set(["view", "deploy", "manage", "delete"]),
};

interface Grants {
  projects: Map<number, PermissionLevel>;
  /** environment id -> [project id, level] */
  environments: Map<number, { projectId: number; level: PermissionLevel }>;
}

export interface SqlFragment {
  sql: string;
  params: (string | number)[];
}

export interface ProjectRef {
  id: number;
}
export interface EnvironmentRef {
  id: number;
  projectId: number;
}

/**
 * The single place where team roles and project/environment permissions are resolved
 * (spec section 5). Every resource that lives in a project asks here; the answer is 404
 * when the caller may not even see the object and 403 when it may see but not act.
 */
export class AccessService {
  private readonly cache = new WeakMap<Caller, Promise<Grants>>();

  constructor(private readonly db: Db) {}

  /** Owner and admin (and team automation tokens) bypass every permission check. */
  bypasses(auth: Caller): boolean {
    return auth.userId === null || auth.role === "owner" || auth.role === "admin";
  }

  isTeamAdmin(auth: Caller): boolean {
    return this.bypasses(auth);
  }

  requireTeamAdmin(auth: Caller, what: string): void {
    if (!this.isTeamAdmin(auth)) throw new Forbidden(`Only team owners and admins can ${what}.`);
  }

  private grants(auth: Caller): Promise<Grants> {
    let p = this.cache.get(auth);
    if (!p) {
      p = this.loadGrants(auth);
      this.cache.set(auth, p);
    }
    return p;
  }

  private async loadGrants(auth: Caller): Promise<Grants> {
    const grants: Grants = { projects: new Map(), environments: new Map() };
    if (auth.userId === null) return grants;
    const [projects, environments] = await Promise.all([
      this.db.projectPermission.findMany({
        where: { userId: auth.userId, project: { teamId: auth.teamId } },
        select: { projectId: true, level: true },
      }),
      this.db.environmentPermission.findMany({
        where: { userId: auth.userId, environment: { project: { teamId: auth.teamId } } },
        select: { environmentId: true, level: true, environment: { select: { projectId: true } } },
      }),
    ]);
    for (const p of projects) grants.projects.set(p.projectId, p.level as PermissionLevel);
    for (const e of environments) {
      grants.environments.set(e.environmentId, { projectId: e.environment.projectId, level: e.level as PermissionLevel });
    }
    return grants;
  }

  /**
   * A viewer is read-only everywhere in its team: grants never lift it above view_only, and it
   * sees every project without one (docs/decisions.md).
   */
  private cap(auth: Caller, level: PermissionLevel | null): PermissionLevel | null {
    if (auth.role === "viewer") return "view_only";
    return level;
  }

  async projectLevel(auth: Caller, projectId: number): Promise<PermissionLevel | null> {
    if (this.bypasses(auth)) return "full_access";
    const g = await this.grants(auth);
    return this.cap(auth, g.projects.get(projectId) ?? null);
  }

  /** The environment override when one exists, else the project-level permission. */
  async environmentLevel(auth: Caller, env: EnvironmentRef): Promise<PermissionLevel | null> {
    if (this.bypasses(auth)) return "full_access";
    const g = await this.grants(auth);
    const override = g.environments.get(env.id);
    return this.cap(auth, override ? override.level : (g.projects.get(env.projectId) ?? null));
  }

  /** A project is visible with a project-level grant or with a visible environment in it. */
  async canSeeProject(auth: Caller, projectId: number): Promise<boolean> {
    if (this.seesWholeTeam(auth)) return true;
    const g = await this.grants(auth);
    if (g.projects.has(projectId)) return true;
    for (const e of g.environments.values()) if (e.projectId === projectId) return true;
    return false;
  }

  async assertProject(auth: Caller, project: ProjectRef, need: Need, what = "Project"): Promise<void> {
    if (!(await this.canSeeProject(auth, project.id))) throw new NotFound(what);
    if (need === "view") return;
    const level = await this.projectLevel(auth, project.id);
    if (!level || !LEVEL_ALLOWS[level].has(need)) throw new Forbidden();
  }

  async assertEnvironment(auth: Caller, env: EnvironmentRef, need: Need, what = "Environment"): Promise<void> {
    const level = await this.environmentLevel(auth, env);
    if (!level) throw new NotFound(what);
    if (!LEVEL_ALLOWS[level].has(need)) throw new Forbidden();
  }

  /** Filter for list queries: null means "no restriction inside the team". */
  async visibleProjectIds(auth: Caller): Promise<number[] | null> {
    if (this.seesWholeTeam(auth)) return null;
    const g = await this.grants(auth);
    const ids = new Set(g.projects.keys());
    for (const e of g.environments.values()) ids.add(e.projectId);
    return [...ids];
  }

  /** Owner, admin, automation token and viewer see every project and environment of the team. */
  seesWholeTeam(auth: Caller): boolean {
    return this.bypasses(auth) || auth.role === "viewer";
  }

  /**
   * Callers with the same key (inside one team) see the same projects and environments:
   * "*" for those who see the whole team, else the member's own grants decide ("u<id>").
   * The response cache (http/response-cache.ts) keys bodies with it.
   */
  visibilityKey(auth: Caller): string {
    return this.seesWholeTeam(auth) ? "*" : `u${auth.userId}`;
  }

  /**
   * The rules of canSeeProject and canSeeEnvironment as SQL, for list reads done in one query
   * (services/projects.ts). `project` is a condition on a "Project" aliased p, `environment` on
   * an "Environment" aliased e; each comes with its parameters. null: the caller sees every
   * project and environment of its team (owner, admin, automation token, viewer).
   * Grants need no team check of their own: they are matched on p (or on an environment of
   * p), and the query already restricts p to the caller's team.
   */
  visibilitySql(auth: Caller): { project: SqlFragment; environment: SqlFragment } | null {
    if (this.seesWholeTeam(auth)) return null;
    const user = auth.userId ?? -1;
    return {
      // A project-level grant, or a visible environment (one with an override) in it.
      project: {
        sql: `(EXISTS (SELECT 1 FROM "ProjectPermission" pp WHERE pp."projectId" = p."id" AND pp."userId" = ?)
          OR EXISTS (SELECT 1 FROM "EnvironmentPermission" ep JOIN "Environment" pe ON pe."id" = ep."environmentId"
                     WHERE pe."projectId" = p."id" AND ep."userId" = ?))`,
        params: [user, user],
      },
      // The environment override when there is one (every level can view), else the project grant.
      environment: {
        sql: `(EXISTS (SELECT 1 FROM "EnvironmentPermission" ep WHERE ep."environmentId" = e."id" AND ep."userId" = ?)
          OR EXISTS (SELECT 1 FROM "ProjectPermission" pp WHERE pp."projectId" = e."projectId" AND pp."userId" = ?))`,
        params: [user, user],
      },
    };
  }

  /** Whether the caller sees one environment of a project it can see. */
  async canSeeEnvironment(auth: Caller, env: EnvironmentRef): Promise<boolean> {
    return (await this.environmentLevel(auth, env)) !== null;
  }
}
