import type { PermissionLevel } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { isUniqueViolation } from "../db/errors.js";
import type { Caller } from "../domain/caller.js";
import { NotFound, Conflict } from "../domain/errors.js";
import type { AccessService } from "./access.js";

const projectPermissionInclude = {
  project: { select: { uuid: true, name: true } },
  user: { select: { name: true, email: true } },
} satisfies Prisma.ProjectPermissionInclude;
export type ProjectPermissionRow = Prisma.ProjectPermissionGetPayload<{ include: typeof projectPermissionInclude }>;

const environmentPermissionInclude = {
  environment: { select: { name: true, project: { select: { uuid: true } } } },
  user: { select: { name: true } },
} satisfies Prisma.EnvironmentPermissionInclude;
export type EnvironmentPermissionRow = Prisma.EnvironmentPermissionGetPayload<{ include: typeof environmentPermissionInclude }>;

type Window = { skip?: number; take?: number };

/**
 * Grants of spec 4.13. Owners and admins manage them; other members may read their own.
 * Every project, environment and user id is resolved inside the caller's team.
 */
export class PermissionService {
  constructor(
    private readonly db: Db,
    private readonly access: AccessService,
  ) {}

  /** Members and viewers only ever see their own grants. */
  private ownOnly(auth: Caller): number | undefined {
    return this.access.isTeamAdmin(auth) ? undefined : (auth.userId ?? -1);
  }

  private async teamProject(auth: Caller, uuid: string) {
    const p = await this.db.project.findFirst({ where: { uuid, teamId: auth.teamId }, select: { id: true } });
    if (!p) throw new NotFound("Project");
    return p;
  }

  private async teamEnvironment(auth: Caller, id: number) {
    const e = await this.db.environment.findFirst({ where: { id, project: { teamId: auth.teamId } }, select: { id: true } });
    if (!e) throw new NotFound("Environment");
    return e;
  }

  private async teamMember(auth: Caller, userId: number) {
    const m = await this.db.membership.findUnique({ where: { teamId_userId: { teamId: auth.teamId, userId } } });
    if (!m) throw new NotFound("User");
    return m;
  }

  // Project-level

  private projectWhere(auth: Caller, filter: { project_uuid?: string | undefined; user_id?: number | undefined }) {
    const own = this.ownOnly(auth);
    const where: Prisma.ProjectPermissionWhereInput = { project: { teamId: auth.teamId } };
    if (filter.project_uuid !== undefined) where.project = { teamId: auth.teamId, uuid: filter.project_uuid };
    if (filter.user_id !== undefined) where.userId = filter.user_id;
    if (own !== undefined) where.AND = [{ userId: own }];
    return where;
  }

  countProject(auth: Caller, filter: { project_uuid?: string | undefined; user_id?: number | undefined }) {
    return this.db.projectPermission.count({ where: this.projectWhere(auth, filter) });
  }

  listProject(auth: Caller, filter: { project_uuid?: string | undefined; user_id?: number | undefined }, window: Window) {
    return this.db.projectPermission.findMany({
      where: this.projectWhere(auth, filter),
      include: projectPermissionInclude,
      orderBy: { id: "asc" },
      ...window,
    });
  }

  async getProject(auth: Caller, id: number): Promise<ProjectPermissionRow> {
    const row = await this.db.projectPermission.findFirst({
      where: { id, ...this.projectWhere(auth, {}) },
      include: projectPermissionInclude,
    });
    if (!row) throw new NotFound("Permission");
    return row;
  }

  async grantProject(auth: Caller, input: { project_uuid: string; user_id: number; permission_level: PermissionLevel }) {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const project = await this.teamProject(auth, input.project_uuid);
    await this.teamMember(auth, input.user_id);
    try {
      return await this.db.projectPermission.create({
        data: { projectId: project.id, userId: input.user_id, level: input.permission_level },
        include: projectPermissionInclude,
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict("User already has access to this project.");
      throw err;
    }
  }

  async updateProject(auth: Caller, id: number, level: PermissionLevel) {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const row = await this.getProject(auth, id);
    return this.db.projectPermission.update({ where: { id: row.id }, data: { level }, include: projectPermissionInclude });
  }

  async revokeProject(auth: Caller, id: number): Promise<void> {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const row = await this.getProject(auth, id);
    await this.db.projectPermission.delete({ where: { id: row.id } });
  }

  /**
   * Gives every member and viewer of the team this level on the project, creating or
   * updating their grant. Owners and admins bypass permissions and are left out.
   */
  async bulkGrant(auth: Caller, projectUuid: string, level: PermissionLevel): Promise<number> {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const project = await this.teamProject(auth, projectUuid);
    return this.db.$transaction(async (tx) => {
      const members = await tx.membership.findMany({
        where: { teamId: auth.teamId, role: { in: ["member", "viewer"] } },
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
  async bulkRevoke(auth: Caller, projectUuid: string): Promise<number> {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const project = await this.teamProject(auth, projectUuid);
    return this.db.$transaction(async (tx) => {
      const a = await tx.projectPermission.deleteMany({ where: { projectId: project.id } });
      const b = await tx.environmentPermission.deleteMany({ where: { environment: { projectId: project.id } } });
      return a.count + b.count;
    });
  }

  // Environment overrides

  private environmentWhere(auth: Caller, filter: { environment_id?: number | undefined; user_id?: number | undefined }) {
    const own = this.ownOnly(auth);
    const where: Prisma.EnvironmentPermissionWhereInput = { environment: { project: { teamId: auth.teamId } } };
    if (filter.environment_id !== undefined) where.environmentId = filter.environment_id;
    if (filter.user_id !== undefined) where.userId = filter.user_id;
    if (own !== undefined) where.AND = [{ userId: own }];
    return where;
  }

  countEnvironment(auth: Caller, filter: { environment_id?: number | undefined; user_id?: number | undefined }) {
    return this.db.environmentPermission.count({ where: this.environmentWhere(auth, filter) });
  }

  listEnvironment(auth: Caller, filter: { environment_id?: number | undefined; user_id?: number | undefined }, window: Window) {
    return this.db.environmentPermission.findMany({
      where: this.environmentWhere(auth, filter),
      include: environmentPermissionInclude,
      orderBy: { id: "asc" },
      ...window,
    });
  }

  async grantEnvironment(auth: Caller, input: { environment_id: number; user_id: number; permission_level: PermissionLevel }) {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const env = await this.teamEnvironment(auth, input.environment_id);
    await this.teamMember(auth, input.user_id);
    try {
      return await this.db.environmentPermission.create({
        data: { environmentId: env.id, userId: input.user_id, level: input.permission_level },
        include: environmentPermissionInclude,
      });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict("User already has an override for this environment.");
      throw err;
    }
  }

  async revokeEnvironment(auth: Caller, id: number): Promise<void> {
    this.access.requireTeamAdmin(auth, "manage permissions");
    const row = await this.db.environmentPermission.findFirst({ where: { id, ...this.environmentWhere(auth, {}) } });
    if (!row) throw new NotFound("Permission");
    await this.db.environmentPermission.delete({ where: { id: row.id } });
  }
}
