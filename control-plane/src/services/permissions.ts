import type { PermissionLevel } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { isUniqueViolation } from "../db/errors.js";
import { whole, wholeRows } from "../db/relations.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Conflict, removedMeanwhile } from "../domain/errors.js";

const projectPermissionInclude = {
  project: { select: { uuid: true, name: true } },
  user: { select: { name: true, email: true } },
} satisfies Prisma.ProjectPermissionInclude;
export type ProjectPermissionRow = Prisma.ProjectPermissionGetPayload<{ include: typeof projectPermissionInclude }>;
/** The relations the includes read: without one, the grant went with its project or user meanwhile (db/relations.ts). */
const PROJECT_GRANT_RELATIONS = ["project", "user"];

const environmentPermissionInclude = {
  environment: { select: { name: true, project: { select: { uuid: true } } } },
  user: { select: { name: true } },
} satisfies Prisma.EnvironmentPermissionInclude;
export type EnvironmentPermissionRow = Prisma.EnvironmentPermissionGetPayload<{ include: typeof environmentPermissionInclude }>;
const ENVIRONMENT_GRANT_RELATIONS = ["environment", "environment.project", "user"];

/** A grant just written and read back with its relations; a torn read means it is gone already. */
function written<T>(row: T, paths: readonly string[]): T {
  const complete = whole(row, paths);
  if (!complete) throw removedMeanwhile("Permission");
  return complete;
}

type Window = { skip?: number; take?: number };

/**
 * Grants of spec 4.13. Owners and admins manage them; other members may read their own.
 * Every project, environment and user id is resolved inside the caller's team.
 */
export class PermissionService {
  constructor(private readonly db: Db) {}

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

  async listProject(scope: TeamScope, filter: { project_uuid?: string | undefined; user_id?: number | undefined }, window: Window) {
    const rows = await this.db.projectPermission.findMany({
      where: this.projectWhere(scope, filter),
      include: projectPermissionInclude,
      orderBy: { id: "asc" },
      ...window,
    });
    return wholeRows(rows, PROJECT_GRANT_RELATIONS);
  }

  async getProject(scope: TeamScope, id: number): Promise<ProjectPermissionRow> {
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

  async grantProject(scope: TeamScope, input: { project_uuid: string; user_id: number; permission_level: PermissionLevel }) {
    scope.requireTeamAdmin("manage permissions");
    const project = await scope.project(input.project_uuid);
    await scope.member(input.user_id);
    try {
      const row = await this.db.projectPermission.create({
        data: { projectId: project.id, userId: input.user_id, level: input.permission_level },
        include: projectPermissionInclude,
      });
      return written(row, PROJECT_GRANT_RELATIONS);
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict("User already has access to this project.");
      throw err;
    }
  }

  async updateProject(scope: TeamScope, id: number, level: PermissionLevel) {
    scope.requireTeamAdmin("manage permissions");
    const row = await this.getProject(scope, id);
    return written(await this.db.projectPermission.update({ where: { id: row.id }, data: { level }, include: projectPermissionInclude }), PROJECT_GRANT_RELATIONS);
  }

  async revokeProject(scope: TeamScope, id: number): Promise<void> {
    scope.requireTeamAdmin("manage permissions");
    const row = await this.getProject(scope, id);
    await this.db.projectPermission.delete({ where: { id: row.id } });
  }

  /**
   * Gives every member and viewer of the team this level on the project, creating or
   * updating their grant. Owners and admins bypass permissions and are left out.
   */
  async bulkGrant(scope: TeamScope, projectUuid: string, level: PermissionLevel): Promise<number> {
    scope.requireTeamAdmin("manage permissions");
    const project = await scope.project(projectUuid);
    return this.db.$transaction(async (tx) => {
      const members = await tx.membership.findMany({
        where: { ...scope.inTeam, role: { in: ["member", "viewer"] } },
        select: { userId: true },
      });
      const userIds = members.map((m) => m.userId);
      await tx.projectPermission.updateMany({ where: { projectId: project.id, userId: { in: userIds } }, data: { level } });
      const existing = new Set(
        (await tx.projectPermission.findMany({ where: { projectId: project.id }, select: { userId: true } })).map((p) => p.userId),
      );
      const missing = userIds.filter((id) => !existing.has(id));
      if (missing.length) {
        await tx.projectPermission.createMany({ data: missing.map((userId) => ({ projectId: project.id, userId, level })) });
      }
      return userIds.length;
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

  async listEnvironment(scope: TeamScope, filter: { environment_id?: number | undefined; user_id?: number | undefined }, window: Window) {
    const rows = await this.db.environmentPermission.findMany({
      where: this.environmentWhere(scope, filter),
      include: environmentPermissionInclude,
      orderBy: { id: "asc" },
      ...window,
    });
    return wholeRows(rows, ENVIRONMENT_GRANT_RELATIONS);
  }

  async grantEnvironment(scope: TeamScope, input: { environment_id: number; user_id: number; permission_level: PermissionLevel }) {
    scope.requireTeamAdmin("manage permissions");
    const env = await scope.environmentById(input.environment_id);
    await scope.member(input.user_id);
    try {
      const row = await this.db.environmentPermission.create({
        data: { environmentId: env.id, userId: input.user_id, level: input.permission_level },
        include: environmentPermissionInclude,
      });
      return written(row, ENVIRONMENT_GRANT_RELATIONS);
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
