import type { Db, Prisma } from "../db/client.js";
import { pageSql, toInt, toIso, type SqlReader } from "../db/reader.js";
import type { Need, TeamScope } from "../domain/scope.js";
import { NotFound, Forbidden, Conflict } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { isUniqueViolation } from "../db/errors.js";
import { bypasses } from "../domain/permissions.js";
import type { ApplicationService } from "./applications.js";
import type { NetworkService } from "./networks/index.js";
import type { DatabaseService } from "./databases.js";
// services lifecycle (issue 17)
import type { ServiceService } from "./services/index.js";

export const DEFAULT_ENVIRONMENT = "production";

const withEnvironments = { environments: { orderBy: { id: "asc" } } } satisfies Prisma.ProjectInclude;
export type ProjectWithEnvironments = Prisma.ProjectGetPayload<{ include: typeof withEnvironments }>;

/**
 * How many resources an environment (or a whole project) holds: applications, databases and
 * services. Served from the response cache, so each table has TeamVersion triggers
 * (prisma/migrations/*_team_version_resources, *_team_version_services).
 */
export interface ResourceCounts {
  applications: number;
  databases: number;
  services: number;
  total: number;
}

/** createdAt: a Date from Prisma, or already ISO 8601 (UTC, milliseconds) from the plain read path. */
export interface EnvironmentView {
  id: number;
  uuid: string;
  name: string;
  createdAt: Date | string;
  /** Only in the project detail (read with counts). */
  counts?: ResourceCounts;
}
/** What GET /projects and GET /projects/{uuid} show (ProjectWithEnvironments has the same shape and more). */
export interface ProjectView {
  uuid: string;
  name: string;
  description: string;
  createdAt: Date | string;
  environments: EnvironmentView[];
  /** Only in the project detail: the sums over the environments shown. */
  counts?: ResourceCounts;
}

/** A row of read(): a project, and one of its environments or nulls (LEFT JOIN); the counts only when asked. */
type ProjectEnvironmentRow = [
  id: unknown,
  uuid: string,
  name: string,
  description: string,
  createdAt: unknown,
  envId: unknown,
  envUuid: string | null,
  envName: string | null,
  envCreatedAt: unknown,
  applications?: unknown,
  databases?: unknown,
  services?: unknown,
];

const counts = (applications: number, databases: number, services: number): ResourceCounts => ({ applications, databases, services, total: applications + databases + services });

const byId = (a: { id: number }, b: { id: number }) => a.id - b.id;

/** Projects and environments (spec 4.2), always inside the caller's team. */
export class ProjectService {
  constructor(
    private readonly db: Db,
    private readonly reader: SqlReader,
    private readonly apps: ApplicationService,
    private readonly networks: NetworkService,
    private readonly databases: DatabaseService,
    private readonly services: ServiceService,
    /** w6/dnsres: records follow the hostnames of the applications and services an environment takes along (DnsService.hostsChanged). */
    private readonly hostsChanged: (teamId: number, fqdns: (string | null)[]) => Promise<void> = async () => undefined,
  ) {}

  /** The hostnames (fqdn values) of the applications and services of these environments, read before they go. */
  private async fqdnsOf(environmentIds: number[]): Promise<string[]> {
    const [apps, components] = await Promise.all([
      this.db.application.findMany({ where: { environmentId: { in: environmentIds }, fqdn: { not: null } }, select: { fqdn: true } }),
      this.db.serviceComponent.findMany({ where: { service: { environmentId: { in: environmentIds } }, fqdn: { not: null } }, select: { fqdn: true } }),
    ]);
    return [...apps, ...components].map((r) => r.fqdn!);
  }

  /**
   * Projects of the caller's team that it may see, each with the environments it may see, in
   * one SQL statement through the plain read path (db/reader.ts): GET /projects and
   * GET /projects/{uuid}. No IN list: a page of any size binds the same few parameters.
   * withCounts (the detail): each environment's applications and databases are counted in the
   * same statement (two indexed subqueries per environment row), not in a query of their own.
   */
  private async read(scope: TeamScope, match: { uuid: string } | { window: { skip?: number; take?: number } }, withCounts = false): Promise<ProjectView[]> {
    const vis = scope.visibility();
    const visible = scope.visibleRows(`p."teamId"`, "project");
    const params = [...visible.params];
    let inner = `SELECT p."id", p."uuid", p."name", p."description", p."createdAt" FROM "Project" p WHERE ${visible.sql}`;
    if ("uuid" in match) {
      inner += ` AND p."uuid" = ?`;
      params.push(match.uuid);
    }
    if ("window" in match) {
      inner += ` ORDER BY p."id"`;
      inner += pageSql(match.window, params);
    }
    const countColumns = withCounts
      ? `, (SELECT COUNT(*) FROM "Application" a WHERE a."environmentId" = e."id") AS "applications",
        (SELECT COUNT(*) FROM "StandaloneDatabase" d WHERE d."environmentId" = e."id") AS "databases",
        (SELECT COUNT(*) FROM "Service" sv WHERE sv."environmentId" = e."id") AS "services"`
      : "";
    let sql = `SELECT p."id", p."uuid", p."name", p."description", p."createdAt",
        e."id" AS "envId", e."uuid" AS "envUuid", e."name" AS "envName", e."createdAt" AS "envCreatedAt"${countColumns}
      FROM (${inner}) p LEFT JOIN "Environment" e ON e."projectId" = p."id"`;
    if (vis) {
      sql += ` AND ${vis.environment.sql}`;
      params.push(...vis.environment.params);
    }
    // Environments are put in id order here, per project (a handful each): ordering the join by
    // e."id" too costs SQLite a temporary b-tree over every row, as no index gives that order.
    sql += ` ORDER BY p."id"`;
    const rows = await this.reader.rows<ProjectEnvironmentRow>(sql, params);
    const out: ProjectView[] = [];
    let last: ProjectView | undefined;
    let lastId: unknown;
    for (const [id, uuid, name, description, createdAt, envId, envUuid, envName, envCreatedAt, apps, dbs, svcs] of rows) {
      if (!last || id !== lastId) {
        if (last && last.environments.length > 1) last.environments.sort(byId);
        last = { uuid, name, description, createdAt: toIso(createdAt), environments: [], ...(withCounts ? { counts: counts(0, 0, 0) } : {}) };
        lastId = id;
        out.push(last);
      }
      if (envId === null) continue;
      const env: EnvironmentView = { id: toInt(envId), uuid: envUuid!, name: envName!, createdAt: toIso(envCreatedAt) };
      if (withCounts) {
        env.counts = counts(toInt(apps), toInt(dbs), toInt(svcs));
        last.counts = counts(
          last.counts!.applications + env.counts.applications,
          last.counts!.databases + env.counts.databases,
          last.counts!.services + env.counts.services,
        );
      }
      last.environments.push(env);
    }
    if (last && last.environments.length > 1) last.environments.sort(byId);
    return out;
  }

  async count(scope: TeamScope): Promise<number> {
    const visible = scope.visibleRows(`p."teamId"`, "project");
    const [row] = await this.reader.all<{ n: unknown }>(`SELECT COUNT(*) AS "n" FROM "Project" p WHERE ${visible.sql}`, visible.params);
    return toInt(row!.n);
  }

  /** A page (or all) of the projects the caller may see, by id, with the environments it may see. */
  list(scope: TeamScope, window: { skip?: number; take?: number }): Promise<ProjectView[]> {
    return this.read(scope, { window });
  }

  /** One project for reading (GET): as find, through the plain read path. */
  async view(scope: TeamScope, uuid: string): Promise<ProjectView> {
    const [project] = await this.read(scope, { uuid });
    if (!project) throw new NotFound("Project");
    return project;
  }

  /**
   * GET /projects/{uuid}: the project with its environments and how many resources each holds
   * (the spec's "resource counts"), in one statement. Served from the response cache: the counts
   * change only with writes the TeamVersion triggers watch (Application, StandaloneDatabase, Service).
   */
  async detail(scope: TeamScope, uuid: string): Promise<ProjectView> {
    const [project] = await this.read(scope, { uuid }, true);
    if (!project) throw new NotFound("Project");
    return project;
  }

  /**
   * A project of the caller's team that the caller may see with `need` (404, 403), with the
   * environments it may see (a member: those its permissions reach, read in one statement).
   */
  async find(scope: TeamScope, uuid: string, need: Need = "view"): Promise<ProjectWithEnvironments> {
    const project = await scope.project(uuid, need, withEnvironments);
    await scope.loadEnvironmentLevels(project.id);
    const environments = [];
    for (const e of project.environments) if (await scope.canSeeEnvironment(e)) environments.push(e);
    return { ...project, environments };
  }

  async create(scope: TeamScope, input: { name: string; description?: string | undefined }) {
    if (scope.caller.role === "viewer") throw new Forbidden("Viewers cannot create projects.");
    return this.db.$transaction(async (tx) => {
      const project = await tx.project.create({
        data: {
          uuid: newUuid(),
          teamId: scope.teamId,
          name: input.name,
          description: input.description ?? "",
          environments: { create: { uuid: newUuid(), name: DEFAULT_ENVIRONMENT } },
        },
        include: withEnvironments,
      });
      // A member who creates a project can run it: it gets full access to it.
      const userId = scope.caller.userId;
      if (!bypasses(scope.caller) && userId !== null) {
        await tx.projectPermission.create({ data: { projectId: project.id, userId, level: "full_access" } });
      }
      return project;
    });
  }

  async update(scope: TeamScope, uuid: string, input: { name?: string | undefined; description?: string | undefined }) {
    const project = await this.find(scope, uuid, "manage");
    const data: Prisma.ProjectUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    await this.db.project.update({ where: { id: project.id }, data });
    return this.detail(scope, uuid);
  }

  async remove(scope: TeamScope, uuid: string): Promise<void> {
    const project = await scope.project(uuid, "delete");
    // Deleting a project deletes every environment: an override that withholds delete on
    // one of them (even one the caller cannot see) withholds deleting the project too.
    const all = await this.db.environment.findMany({ where: { projectId: project.id }, select: { id: true, projectId: true } });
    await scope.loadEnvironmentLevels(project.id);
    for (const env of all) await scope.assertEnvironment(env, "delete", "Project");
    // The applications go with their environments: their containers are removed from the servers.
    const removal = await this.apps.planRemoval({ environmentIds: all.map((e) => e.id) });
    // So do the databases (their data volumes stay: the spec's default delete_volumes=false).
    const dbRemoval = await this.databases.planRemoval({ environmentIds: all.map((e) => e.id) });
    // And the services (containers, networks, routes; volumes stay, as for databases).
    const serviceRemoval = await this.services.planRemoval({ environmentIds: all.map((e) => e.id) });
    // Their environment networks go after them (network.remove disconnects what is left first).
    const networks = await this.networks.planEnvironmentRemoval(scope.teamId, all.map((e) => e.id));
    const fqdns = await this.fqdnsOf(all.map((e) => e.id));
    await this.db.$transaction(async (tx) => {
      // First: the network locks (no deployment records one of these environments' networks meanwhile).
      await networks.lock(tx);
      await removal.enqueue(tx);
      await dbRemoval.enqueue(tx);
      // services (issue 17): removal jobs, and their network attachments (no foreign key).
      await serviceRemoval.enqueue(tx);
      await networks.enqueue(tx);
      await tx.project.delete({ where: { id: project.id } });
    });
    removal.kick();
    dbRemoval.kick();
    serviceRemoval.kick();
    networks.kick();
    await this.hostsChanged(scope.teamId, fqdns);
  }

  /** Environment of a visible project by name or uuid; 404 when the caller cannot see it. */
  async findEnvironment(scope: TeamScope, projectUuid: string, nameOrUuid: string, need: Need = "view") {
    const project = await scope.project(projectUuid);
    const environment = await scope.environment(project, { nameOrUuid }, need);
    return { project, environment };
  }

  async createEnvironment(scope: TeamScope, projectUuid: string, name: string) {
    const project = await scope.project(projectUuid, "manage");
    try {
      return await this.db.environment.create({ data: { uuid: newUuid(), projectId: project.id, name } });
    } catch (err) {
      if (isUniqueViolation(err)) throw new Conflict(`Environment ${name} already exists in this project.`);
      throw err;
    }
  }

  async removeEnvironment(scope: TeamScope, projectUuid: string, nameOrUuid: string): Promise<void> {
    const { environment } = await this.findEnvironment(scope, projectUuid, nameOrUuid, "delete");
    const removal = await this.apps.planRemoval({ environmentIds: [environment.id] });
    const dbRemoval = await this.databases.planRemoval({ environmentIds: [environment.id] });
    const serviceRemoval = await this.services.planRemoval({ environmentIds: [environment.id] });
    const networks = await this.networks.planEnvironmentRemoval(scope.teamId, [environment.id]);
    const fqdns = await this.fqdnsOf([environment.id]);
    await this.db.$transaction(async (tx) => {
      // First: the network locks (no deployment records this environment's network meanwhile).
      await networks.lock(tx);
      await removal.enqueue(tx);
      await dbRemoval.enqueue(tx);
      // services (issue 17)
      await serviceRemoval.enqueue(tx);
      await networks.enqueue(tx);
      await tx.environment.delete({ where: { id: environment.id } });
    });
    removal.kick();
    dbRemoval.kick();
    serviceRemoval.kick();
    networks.kick();
    await this.hostsChanged(scope.teamId, fqdns);
  }
}
