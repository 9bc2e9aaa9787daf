import type { Db, Prisma } from "../db/client.js";
import type { AuthContext } from "../http/auth.js";
import { conflict, forbidden, notFound } from "../http/errors.js";
import { newUuid } from "../lib/ids.js";
import { isUniqueViolation } from "../db/errors.js";
import type { AccessService } from "./access.js";

export const DEFAULT_ENVIRONMENT = "production";

const withEnvironments = { environments: { orderBy: { id: "asc" } } } satisfies Prisma.ProjectInclude;
export type ProjectWithEnvironments = Prisma.ProjectGetPayload<{ include: typeof withEnvironments }>;


/** Projects and environments (spec 4.2), always inside the caller's team. */
export class ProjectService {
  constructor(
    private readonly db: Db,
    private readonly access: AccessService,
  ) {}

  private async teamWhere(auth: AuthContext): Promise<Prisma.ProjectWhereInput> {
    const visible = await this.access.visibleProjectIds(auth);
    return visible === null ? { teamId: auth.teamId } : { teamId: auth.teamId, id: { in: visible } };
  }

  async count(auth: AuthContext): Promise<number> {
    return this.db.project.count({ where: await this.teamWhere(auth) });
  }

  async list(auth: AuthContext, window: { skip?: number; take?: number }): Promise<ProjectWithEnvironments[]> {
    const projects = await this.db.project.findMany({
      where: await this.teamWhere(auth),
      include: withEnvironments,
      orderBy: { id: "asc" },
      ...window,
    });
    return this.filterEnvironments(auth, projects);
  }

  /** Members see only the environments their permissions reach. */
  private async filterEnvironments(auth: AuthContext, projects: ProjectWithEnvironments[]) {
    if (this.access.bypasses(auth) || auth.role === "viewer") return projects;
    const out: ProjectWithEnvironments[] = [];
    for (const p of projects) {
      const envs = [];
      for (const e of p.environments) if (await this.access.canSeeEnvironment(auth, e)) envs.push(e);
      out.push({ ...p, environments: envs });
    }
    return out;
  }

  /** Finds a project of the caller's team that the caller may see, or 404. */
  async find(auth: AuthContext, uuid: string): Promise<ProjectWithEnvironments> {
    const project = await this.db.project.findFirst({ where: { uuid, teamId: auth.teamId }, include: withEnvironments });
    if (!project || !(await this.access.canSeeProject(auth, project.id))) throw notFound("Project");
    const [filtered] = await this.filterEnvironments(auth, [project]);
    return filtered!;
  }

  async create(auth: AuthContext, input: { name: string; description?: string | undefined }) {
    if (auth.role === "viewer") throw forbidden("Viewers cannot create projects.");
    return this.db.$transaction(async (tx) => {
      const project = await tx.project.create({
        data: {
          uuid: newUuid(),
          teamId: auth.teamId,
          name: input.name,
          description: input.description ?? "",
          environments: { create: { uuid: newUuid(), name: DEFAULT_ENVIRONMENT } },
        },
        include: withEnvironments,
      });
      // A member who creates a project can run it: it gets full access to it.
      if (!this.access.bypasses(auth) && auth.userId !== null) {
        await tx.projectPermission.create({ data: { projectId: project.id, userId: auth.userId, level: "full_access" } });
      }
      return project;
    });
  }

  async update(auth: AuthContext, uuid: string, input: { name?: string | undefined; description?: string | undefined }) {
    const project = await this.find(auth, uuid);
    await this.access.assertProject(auth, project, "manage");
    const data: Prisma.ProjectUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    await this.db.project.update({ where: { id: project.id }, data });
    return this.find(auth, uuid);
  }

  async remove(auth: AuthContext, uuid: string): Promise<void> {
    const project = await this.find(auth, uuid);
    await this.access.assertProject(auth, project, "delete");
    // Deleting a project deletes every environment: an override that withholds delete on
    // one of them (even one the caller cannot see) withholds deleting the project too.
    const all = await this.db.environment.findMany({ where: { projectId: project.id }, select: { id: true, projectId: true } });
    for (const env of all) await this.access.assertEnvironment(auth, env, "delete", "Project");
    await this.db.project.delete({ where: { id: project.id } });
  }

  /** Environment of a visible project by name or uuid; 404 when the caller cannot see it. */
  async findEnvironment(auth: AuthContext, projectUuid: string, nameOrUuid: string) {
    const project = await this.db.project.findFirst({ where: { uuid: projectUuid, teamId: auth.teamId } });
    if (!project || !(await this.access.canSeeProject(auth, project.id))) throw notFound("Project");
    const env = await this.db.environment.findFirst({
      where: { projectId: project.id, OR: [{ name: nameOrUuid }, { uuid: nameOrUuid }] },
    });
    if (!env || !(await this.access.canSeeEnvironment(auth, env))) throw notFound("Environment");
    return { project, environment: env };
  }

  async createEnvironment(auth: AuthContext, projectUuid: string, name: string) {
    const project = await this.find(auth, projectUuid);
    await this.access.assertProject(auth, project, "manage");
    try {
      return await this.db.environment.create({ data: { uuid: newUuid(), projectId: project.id, name } });
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(`Environment ${name} already exists in this project.`);
      throw err;
    }
  }

  async removeEnvironment(auth: AuthContext, projectUuid: string, nameOrUuid: string): Promise<void> {
    const { environment } = await this.findEnvironment(auth, projectUuid, nameOrUuid);
    await this.access.assertEnvironment(auth, environment, "delete");
    await this.db.environment.delete({ where: { id: environment.id } });
  }
}
