import { PERMISSION_LEVELS, PermissionLevel, TeamRole } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { isUniqueViolation } from "../db/errors.js";
import { whole, wholeRows } from "../db/relations.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Conflict, removedMeanwhile } from "../domain/errors.js";
import { effectiveLevel } from "../domain/permissions.js";

const projectPermissionInclude = {
  project: { select: { uuid: true, name: true } },
  user: { select: { name: true, email: true } },
} satisfies Prisma.ProjectPermissionInclude;
/** A grant with what it really gives its user (domain/permissions.ts effectiveLevel: the grant capped by the user's role). */
export type ProjectPermissionRow = Prisma.ProjectPermissionGetPayload<{ include: typeof projectPermissionInclude }> & Effective;
/** The relations the includes read: without one, the grant went with its project or user meanwhile (db/relations.ts). */
const PROJECT_GRANT_RELATIONS = ["project", "user"];

const environmentPermissionInclude = {
  environment: { select: { name: true, project: { select: { uuid: true } } } },
  user: { select: { name: true } },
} satisfies Prisma.EnvironmentPermissionInclude;
export type EnvironmentPermissionRow = Prisma.EnvironmentPermissionGetPayload<{ include: typeof environmentPermissionInclude }> & Effective;
const ENVIRONMENT_GRANT_RELATIONS = ["environment", "environment.project", "user"];

/** A grant just written and read back with its relations; a torn read means it is gone already. */
function written<T>(row: T, paths: readonly string[]): T {
  const complete = whole(row, paths);
  if (!complete) throw removedMeanwhile("Permission");
  return complete;
}

type Window = { skip?: number; take?: number };

interface Effective {
  /** The user's role in the team (null: no longer a member; the grant gives nothing then, shown as granted). */
  role: TeamRole | null;
  effectiveLevel: PermissionLevel;
}

const RANK: Record<PermissionLevel, number> = Object.fromEntries(PERMISSION_LEVELS.map((l, i) => [l, i])) as Record<PermissionLevel, number>;

/** What bulk grant did: grants created, changed (raised; also lowered with overwrite) and left as they were. */
export interface BulkGrantResult {
  members: number;
  created: number;
  changed: number;
  kept: number;
}

/**
 * Grants of spec 4.13. Owners and admins manage them; other members may read their own.
 * Every project, environment and user id is resolved inside the caller's team.
 */
export class PermissionService {
  constructor(private readonly db: Db) {}

  /**
   * The roles of the users whose grants are shown: one query for the team (no IN list, whatever
   * the number of rows), or one membership when there is one user.
   */
  private async roles(scope: TeamScope, userIds: number[]): Promise<Map<number, TeamRole>> {
    const unique = [...new Set(userIds)];
    if (unique.length === 0) return new Map();
    const rows =
      unique.length === 1
        ? await this.db.membership.findMany({ where: { ...scope.inTeam, userId: unique[0]! }, select: { userId: true, role: true } })
        : await this.db.membership.findMany({ where: scope.inTeam, select: { userId: true, role: true } });
    const out = new Map<number, TeamRole>();
    for (const r of rows) {
      const role = TeamRole.safeParse(r.role);
      if (role.success) out.set(r.userId, role.data);
    }
    return out;
  }

  /** The grants with what each really gives its user (the grant capped by the user's role). */
  private async effective<T extends { userId: number; level: string }>(scope: TeamScope, rows: T[]): Promise<(T & Effective)[]> {
    const roles = await this.roles(scope, rows.map((r) => r.userId));
    return rows.map((r) => {
      const granted = PermissionLevel.parse(r.level);
      const role = roles.get(r.userId) ?? null;
      return { ...r, role, effectiveLevel: role ? effectiveLevel(role, granted) : granted };
    });
  }

  private async effectiveOne<T extends { userId: number; level: string }>(scope: TeamScope, row: T): Promise<T & Effective> {
    return (await this.effective(scope, [row]))[0]!;
  }

  /** Members and viewers only ever see their own grants. */
  private ownOnly(scope: TeamScope): number | undefined {
    return scope.isTeamAdmin() ? undefined : (scope.caller.userId ?? -1);
  }

  // Project-level

  private projectWhere(scope: TeamScope, filter: { project_uuid?: string | undefined; user_id?: number | undefined }) {
    const own = this.ownOnly(scope);
    const where: Prisma.ProjectPermissionWhereInput = { project: scope.inTeam };
    if (filter.project_uuid !== undefined) where.project = { ...scope.inTeam, uuid: filter.project_uuid };
    if (filter.user_id !== undefined) where.userId = filter.user_id;
    if (own !== undefined) where.AND = [{ userId: own }];
    return where;
  }

  countProject(scope: TeamScope, filter: { project_uuid?: string | undefined; user_id?: number | undefined }) {
    return this.db.projectPermission.count({ where: this.projectWhere(scope, filter) });
  }

  async listProject(scope: TeamScope, filter: { project_uuid?: string | undefined; user_id?: number | undefined }, window: Window): Promise<ProjectPermissionRow[]> {
    const rows = await this.db.projectPermission.findMany({
      where: this.projectWhere(scope, filter),
      include: projectPermissionInclude,
      orderBy: { id: "asc" },
      ...window,
    });
    return this.effective(scope, wholeRows(rows, PROJECT_GRANT_RELATIONS));
  }

  private async findProject(scope: TeamScope, id: number) {
    const row = whole(
      await this.db.projectPermission.findFirst({
        where: { id, ...this.projectWhere(scope, {}) },
        include: projectPermissionInclude,
      }),
      PROJECT_GRANT_RELATIONS,
    );
    if (!row) throw new NotFound("Permission");
    return row;
  }

  async getProject(scope: TeamScope, id: number): Promise<ProjectPermissionRow> {
    return this.effectiveOne(scope, await this.findProject(scope, id));
  }

  async grantProject(scope: TeamScope, input: { project_uuid: string; user_id: number; permission_level: PermissionLevel }): Promise<ProjectPermissionRow> {
    scope.requireTeamAdmin("manage permissions");
    const project = await scope.project(input.project_uuid);
    await scope.member(input.user_id);
    try {
      const row = await this.db.projectPermission.create({
        data: { projectId: project.id, userId: input.user_id, level: input.permission_level },
        include: projectPermissionInclude,
      });
      return this.effectiveOne(scope, written(row, PROJECT_GRANT_RELATIONS));
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict("User already has access to this project.");
      throw err;
    }
  }

  async updateProject(scope: TeamScope, id: number, level: PermissionLevel): Promise<ProjectPermissionRow> {
    scope.requireTeamAdmin("manage permissions");
    const row = await this.findProject(scope, id);
    const updated = await this.db.projectPermission.update({ where: { id: row.id }, data: { level }, include: projectPermissionInclude });
    return this.effectiveOne(scope, written(updated, PROJECT_GRANT_RELATIONS));
  }

  async revokeProject(scope: TeamScope, id: number): Promise<void> {
    scope.requireTeamAdmin("manage permissions");
    const row = await this.findProject(scope, id);
    await this.db.projectPermission.delete({ where: { id: row.id } });
  }

  /**
   * Gives every member and viewer of the team at least this level on the project: missing
   * grants are created, lower ones raised, higher ones kept (a bulk "give everyone deploy" must
   * not take full access away from the project's maintainers). With `overwrite` every grant
   * becomes exactly this level, lowering higher ones. Owners and admins bypass permissions and
   * are left out; environment overrides are not touched.
   */
  async bulkGrant(scope: TeamScope, projectUuid: string, level: PermissionLevel, overwrite = false): Promise<BulkGrantResult> {
    scope.requireTeamAdmin("manage permissions");
    const project = await scope.project(projectUuid);
    return this.db.$transaction(async (tx) => {
      const members = await tx.membership.findMany({
        where: { ...scope.inTeam, role: { in: ["member", "viewer"] } },
        select: { userId: true },
      });
      const userIds = members.map((m) => m.userId);
      // Which levels give way: every other one with overwrite, else only the lower ones.
      const replaced = PERMISSION_LEVELS.filter((l) => l !== level && (overwrite || RANK[l] < RANK[level]));
      const changed = replaced.length
        ? (await tx.projectPermission.updateMany({ where: { projectId: project.id, userId: { in: userIds }, level: { in: replaced } }, data: { level } })).count
        : 0;
      const existing = new Set(
        (await tx.projectPermission.findMany({ where: { projectId: project.id }, select: { userId: true } })).map((p) => p.userId),
      );
      const missing = userIds.filter((id) => !existing.has(id));
      if (missing.length) {
        await tx.projectPermission.createMany({ data: missing.map((userId) => ({ projectId: project.id, userId, level })) });
      }
      return { members: userIds.length, created: missing.length, changed, kept: userIds.length - missing.length - changed };
    });
  }

  /** Removes every project-level grant and environment override of the project. */
  async bulkRevoke(scope: TeamScope, projectUuid: string): Promise<number> {
    scope.requireTeamAdmin("manage permissions");
    const project = await scope.project(projectUuid);
    return this.db.$transaction(async (tx) => {
      const a = await tx.projectPermission.deleteMany({ where: { projectId: project.id } });
      const b = await tx.environmentPermission.deleteMany({ where: { environment: { projectId: project.id } } });
      return a.count + b.count;
    });
  }

  // Environment overrides

  private environmentWhere(scope: TeamScope, filter: { environment_id?: number | undefined; user_id?: number | undefined }) {
    const own = this.ownOnly(scope);
    const where: Prisma.EnvironmentPermissionWhereInput = { environment: { project: scope.inTeam } };
    if (filter.environment_id !== undefined) where.environmentId = filter.environment_id;
    if (filter.user_id !== undefined) where.userId = filter.user_id;
    if (own !== undefined) where.AND = [{ userId: own }];
    return where;
  }

  countEnvironment(scope: TeamScope, filter: { environment_id?: number | undefined; user_id?: number | undefined }) {
    return this.db.environmentPermission.count({ where: this.environmentWhere(scope, filter) });
  }

  async listEnvironment(scope: TeamScope, filter: { environment_id?: number | undefined; user_id?: number | undefined }, window: Window): Promise<EnvironmentPermissionRow[]> {
    const rows = await this.db.environmentPermission.findMany({
      where: this.environmentWhere(scope, filter),
      include: environmentPermissionInclude,
      orderBy: { id: "asc" },
      ...window,
    });
    return this.effective(scope, wholeRows(rows, ENVIRONMENT_GRANT_RELATIONS));
  }

  async grantEnvironment(scope: TeamScope, input: { environment_id: number; user_id: number; permission_level: PermissionLevel }): Promise<EnvironmentPermissionRow> {
    scope.requireTeamAdmin("manage permissions");
    const env = await scope.environmentById(input.environment_id);
    await scope.member(input.user_id);
    try {
      const row = await this.db.environmentPermission.create({
        data: { environmentId: env.id, userId: input.user_id, level: input.permission_level },
        include: environmentPermissionInclude,
      });
      return this.effectiveOne(scope, written(row, ENVIRONMENT_GRANT_RELATIONS));
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict("User already has an override for this environment.");
      throw err;
    }
  }

  async revokeEnvironment(scope: TeamScope, id: number): Promise<void> {
    scope.requireTeamAdmin("manage permissions");
    const row = await this.db.environmentPermission.findFirst({ where: { id, ...this.environmentWhere(scope, {}) } });
    if (!row) throw new NotFound("Permission");
    await this.db.environmentPermission.delete({ where: { id: row.id } });
  }
}
