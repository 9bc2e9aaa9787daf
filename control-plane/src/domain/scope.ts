import type { PermissionLevel, ServiceComponentKind } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { PADDED_IN_MAX, paddedIn, toInt, type SqlReader } from "../db/reader.js";
import { chunks } from "../db/chunks.js";
import { whole } from "../db/relations.js";
import type { Caller } from "./caller.js";
import { Forbidden, NotFound } from "./errors.js";
import { allows, fixedLevel, isTeamAdmin, levelSql, visibilitySql, type Need, type SqlFragment } from "./permissions.js";

export type { Need };

/**
 * The environments of the caller's team (a level is only ever read for those: a grant held in
 * another team says nothing here), then one of them.
 */
const IN_TEAM_ENVIRONMENT = `JOIN "Project" tp ON tp."id" = e."projectId" WHERE tp."teamId" = ?`;

/** An environment as access checks need it. */
export interface EnvironmentRef {
  id: number;
  projectId: number;
}

const ENVIRONMENT = { select: { id: true, uuid: true, projectId: true } } as const;

const applicationBase = { environment: ENVIRONMENT, server: { select: { id: true, name: true, status: true } } } satisfies Prisma.ApplicationInclude;
/** The required relations of the lookups' includes: a row read without one was deleted meanwhile (db/relations.ts). */
const APPLICATION_RELATIONS = ["environment", "server"];
/** An application resolved for the caller: its row, its environment and the server it runs on. */
export type ApplicationRef = Prisma.ApplicationGetPayload<{ include: typeof applicationBase }>;

const databaseBase = { environment: ENVIRONMENT, server: { select: { id: true, name: true, status: true, ip: true, port: true } } } satisfies Prisma.StandaloneDatabaseInclude;
/** A standalone database resolved for the caller: its row, its environment and its server. */
export type DatabaseRef = Prisma.StandaloneDatabaseGetPayload<{ include: typeof databaseBase }>;
const DATABASE_RELATIONS = ["environment", "server"];

// services (issue 17)
const serviceBase = { environment: ENVIRONMENT, server: { select: { id: true, name: true, status: true } } } satisfies Prisma.ServiceInclude;
/** A service resolved for the caller: its row, its environment and its server. */
export type ServiceRef = Prisma.ServiceGetPayload<{ include: typeof serviceBase }>;
const SERVICE_RELATIONS = ["environment", "server"];
/** A service application or database resolved for the caller, with its service (as ServiceRef). */
export type ServiceComponentRef = Prisma.ServiceComponentGetPayload<{ include: { service: { include: typeof serviceBase } } }>;
const SERVICE_COMPONENT_RELATIONS = ["service", "service.environment", "service.server"];

const deploymentBase = {
  application: { select: { uuid: true, name: true, environmentId: true, environment: ENVIRONMENT } },
  server: { select: { uuid: true } },
} satisfies Prisma.DeploymentInclude;
/** A deployment resolved for the caller, with what names it to users (its application and server). */
export type DeploymentRef = Prisma.DeploymentGetPayload<{ include: typeof deploymentBase }>;
const DEPLOYMENT_RELATIONS = ["application", "application.environment", "server"];

/** Where a new application or database goes: ids of the client, resolved in the caller's team. */
export interface PlacementInput {
  project_uuid: string;
  environment_name: string;
  server_uuid: string;
  destination_uuid: string;
}

/**
 * The caller's team, for one request: the one place that turns ids a client sent into rows of
 * the caller's team, checked against the caller's role and permissions. Services receive a
 * scope instead of the caller and resolve every client id through it, so "find it in the team,
 * then check access" is written here only, and another team's id never reaches a service's
 * own queries.
 *
 * The answers are the spec's: an object of another team is 404; an object the caller may not
 * see is 404 and never named; an object it sees but may not act on with the need is 403.
 * Levels come from the SQL of domain/permissions.ts (the list reads use the same rules), read
 * once per object and request: a scope lives as long as its request.
 */
export class TeamScope {
  // Made on first use: most requests (every list read, every admin's) never need them.
  private envLevels?: Map<number, Promise<PermissionLevel | null>>;
  private projectStandings?: Map<number, Promise<{ visible: boolean; level: PermissionLevel | null }>>;
  private listFilters: ReturnType<typeof visibilitySql> | undefined;

  constructor(
    readonly caller: Caller,
    private readonly db: Db,
    private readonly reader: SqlReader,
  ) {}

  get teamId(): number {
    return this.caller.teamId;
  }

  /** The condition of the team's own rows (`where: scope.inTeam`), for reads of team-level things. */
  get inTeam(): { teamId: number } {
    return { teamId: this.caller.teamId };
  }

  // -------------------------------------------------------------------------------------------
  // Roles and levels

  isTeamAdmin(): boolean {
    return isTeamAdmin(this.caller);
  }

  requireTeamAdmin(what: string): void {
    if (!this.isTeamAdmin()) throw new Forbidden(`Only team owners and admins can ${what}.`);
  }

  /** List filters for the caller (domain/permissions.ts visibilitySql); null: it sees the whole team. */
  visibility(): { project: SqlFragment; environment: SqlFragment } | null {
    if (this.listFilters === undefined) this.listFilters = visibilitySql(this.caller);
    return this.listFilters;
  }

  /**
   * The condition of a list read: rows of the caller's team (`teamColumn`, e.g. `a."teamId"`)
   * that it may see, by their project (a "Project" aliased p in the query) or by their
   * environment (an "Environment" aliased e), with the list rule of domain/permissions.ts.
   */
  visibleRows(teamColumn: string, by: "project" | "environment"): SqlFragment {
    const vis = this.visibility();
    if (!vis) return { sql: `${teamColumn} = ?`, params: [this.teamId] };
    return { sql: `${teamColumn} = ? AND ${vis[by].sql}`, params: [this.teamId, ...vis[by].params] };
  }

  /** The environment override when one exists, else the project-level permission; null: invisible. */
  environmentLevel(env: EnvironmentRef): Promise<PermissionLevel | null> {
    const fixed = fixedLevel(this.caller);
    if (fixed) return Promise.resolve(fixed);
    this.envLevels ??= new Map();
    let level = this.envLevels.get(env.id);
    if (!level) {
      const { level: sql } = levelSql(this.caller, "environment", "e");
      level = this.reader
        .all<{ level: PermissionLevel | null }>(`SELECT ${sql.sql} AS "level" FROM "Environment" e ${IN_TEAM_ENVIRONMENT} AND e."id" = ?`, [...sql.params, this.teamId, env.id])
        .then(([row]) => row?.level ?? null);
      this.envLevels.set(env.id, level);
    }
    return level;
  }

  /** The levels of every environment of a project, in one statement (then answered from memory). */
  async loadEnvironmentLevels(projectId: number): Promise<void> {
    if (fixedLevel(this.caller)) return;
    const { level: sql } = levelSql(this.caller, "environment", "e");
    const rows = await this.reader.all<{ id: unknown; level: PermissionLevel | null }>(
      `SELECT e."id" AS "id", ${sql.sql} AS "level" FROM "Environment" e ${IN_TEAM_ENVIRONMENT} AND e."projectId" = ?`,
      [...sql.params, this.teamId, projectId],
    );
    this.envLevels ??= new Map();
    for (const r of rows) this.envLevels.set(toInt(r.id), Promise.resolve(r.level));
  }

  private projectStanding(projectId: number): Promise<{ visible: boolean; level: PermissionLevel | null }> {
    const fixed = fixedLevel(this.caller);
    if (fixed) return Promise.resolve({ visible: true, level: fixed });
    this.projectStandings ??= new Map();
    let standing = this.projectStandings.get(projectId);
    if (!standing) {
      const { level, visible } = levelSql(this.caller, "project", "p");
      standing = this.reader
        .all<{ visible: unknown; level: PermissionLevel | null }>(`SELECT ${visible.sql} AS "visible", ${level.sql} AS "level" FROM "Project" p WHERE p."teamId" = ? AND p."id" = ?`, [
          ...visible.params,
          ...level.params,
          this.teamId,
          projectId,
        ])
        .then(([row]) => ({ visible: row !== undefined && toInt(row.visible) === 1, level: row?.level ?? null }));
      this.projectStandings.set(projectId, standing);
    }
    return standing;
  }

  /** The project-level permission (an override on one of its environments gives none). */
  async projectLevel(projectId: number): Promise<PermissionLevel | null> {
    return (await this.projectStanding(projectId)).level;
  }

  /** A project is visible with a project-level grant or with a visible environment in it. */
  async canSeeProject(projectId: number): Promise<boolean> {
    return (await this.projectStanding(projectId)).visible;
  }

  async canSeeEnvironment(env: EnvironmentRef): Promise<boolean> {
    return (await this.environmentLevel(env)) !== null;
  }

  /**
   * canSeeEnvironment for many environments at once (the /fleet stream's batches of status
   * events): the levels not yet known are read in one statement per chunk, then answered from
   * memory. The same SQL rule as every other check; an environment of another team is invisible.
   */
  async canSeeEnvironments(envs: readonly EnvironmentRef[]): Promise<boolean[]> {
    if (fixedLevel(this.caller)) return envs.map(() => true);
    this.envLevels ??= new Map();
    const known = this.envLevels;
    const unknown = [...new Set(envs.map((e) => e.id))].filter((id) => !known.has(id));
    if (unknown.length) {
      const { level: sql } = levelSql(this.caller, "environment", "e");
      for (const ids of chunks(unknown, PADDED_IN_MAX)) {
        const { list, values } = paddedIn(ids, -1);
        const read = this.reader
          .all<{ id: unknown; level: PermissionLevel | null }>(`SELECT e."id" AS "id", ${sql.sql} AS "level" FROM "Environment" e ${IN_TEAM_ENVIRONMENT} AND e."id" IN (${list})`, [
            ...sql.params,
            this.teamId,
            ...values,
          ])
          .then((rows) => new Map(rows.map((r) => [toInt(r.id), r.level])));
        for (const id of ids) known.set(id, read.then((levels) => levels.get(id) ?? null));
      }
    }
    return Promise.all(envs.map((e) => this.canSeeEnvironment(e)));
  }

  /** Whether the caller may act on the environment with `need` (no error: e.g. whether secrets are shown). */
  async allows(env: EnvironmentRef, need: Need): Promise<boolean> {
    const level = await this.environmentLevel(env);
    return level !== null && allows(level, need);
  }

  /**
   * Whether secrets of things in the environment (a database's passwords and URLs, variable
   * values) are shown to the caller, on every response path (GET, list, create, PATCH, actions):
   * its token must have the read scope (showing a secret is a read, whatever the method: a
   * write-only token sees secrets masked) and its level must allow manage (full access; owners,
   * admins and automation tokens have it everywhere). Every mapper of a secret asks this.
   */
  async maySeeSecrets(env: EnvironmentRef): Promise<boolean> {
    return this.caller.scopes.has("read") && (await this.allows(env, "manage"));
  }

  /** 404 (as `what`) when the caller cannot see the project, 403 when it sees it without `need`. */
  async assertProject(project: { id: number }, need: Need, what = "Project"): Promise<void> {
    const { visible, level } = await this.projectStanding(project.id);
    if (!visible) throw new NotFound(what);
    if (need === "view") return;
    if (!level || !allows(level, need)) throw new Forbidden();
  }

  /** 404 (as `what`) when the caller cannot see the environment, 403 when it sees it without `need`. */
  async assertEnvironment(env: EnvironmentRef, need: Need, what = "Environment"): Promise<void> {
    const level = await this.environmentLevel(env);
    if (!level) throw new NotFound(what);
    if (!allows(level, need)) throw new Forbidden();
  }

  /** The projects the caller sees, by the list rule; null: every project of the team. */
  async visibleProjectIds(): Promise<number[] | null> {
    const vis = this.visibility();
    if (!vis) return null;
    const rows = await this.reader.all<{ id: unknown }>(`SELECT p."id" AS "id" FROM "Project" p WHERE p."teamId" = ? AND ${vis.project.sql} ORDER BY p."id"`, [
      this.teamId,
      ...vis.project.params,
    ]);
    return rows.map((r) => toInt(r.id));
  }

  // -------------------------------------------------------------------------------------------
  // Objects living in projects: team, then visibility and need

  async project<const I extends Prisma.ProjectInclude = {}>(uuid: string, need: Need = "view", include?: I): Promise<Prisma.ProjectGetPayload<{ include: I }>> {
    const row = await this.db.project.findFirst({ where: { uuid, teamId: this.teamId }, ...(include ? { include } : {}) });
    if (!row) throw new NotFound("Project");
    await this.assertProject(row, need);
    return row as Prisma.ProjectGetPayload<{ include: I }>;
  }

  /** An environment of a resolved project, by name (or by name or uuid). */
  async environment(project: { id: number }, match: { name: string } | { nameOrUuid: string }, need: Need = "view") {
    const where: Prisma.EnvironmentWhereInput =
      "name" in match ? { projectId: project.id, name: match.name } : { projectId: project.id, OR: [{ name: match.nameOrUuid }, { uuid: match.nameOrUuid }] };
    const env = await this.db.environment.findFirst({ where });
    if (!env) throw new NotFound("Environment");
    await this.assertEnvironment(env, need);
    return env;
  }

  /** An environment of the team by id, for grants (no visibility check: grants are an admin matter). */
  async environmentById(id: number): Promise<{ id: number }> {
    const env = await this.db.environment.findFirst({ where: { id, project: { teamId: this.teamId } }, select: { id: true } });
    if (!env) throw new NotFound("Environment");
    return env;
  }

  async application<const I extends Prisma.ApplicationInclude = {}>(
    uuid: string,
    need: Need,
    include?: I,
  ): Promise<Prisma.ApplicationGetPayload<{ include: typeof applicationBase & I }>> {
    const app = whole(await this.db.application.findFirst({ where: { uuid, teamId: this.teamId }, include: { ...include, ...applicationBase } }), APPLICATION_RELATIONS);
    if (!app) throw new NotFound("Application");
    await this.assertEnvironment(app.environment, need, "Application");
    return app as Prisma.ApplicationGetPayload<{ include: typeof applicationBase & I }>;
  }

  async database<const I extends Prisma.StandaloneDatabaseInclude = {}>(
    uuid: string,
    need: Need,
    include?: I,
  ): Promise<Prisma.StandaloneDatabaseGetPayload<{ include: typeof databaseBase & I }>> {
    const row = whole(await this.db.standaloneDatabase.findFirst({ where: { uuid, teamId: this.teamId }, include: { ...include, ...databaseBase } }), DATABASE_RELATIONS);
    if (!row) throw new NotFound("Database");
    await this.assertEnvironment(row.environment, need, "Database");
    return row as Prisma.StandaloneDatabaseGetPayload<{ include: typeof databaseBase & I }>;
  }

  // services (issue 17)
  async service<const I extends Prisma.ServiceInclude = {}>(uuid: string, need: Need, include?: I): Promise<Prisma.ServiceGetPayload<{ include: typeof serviceBase & I }>> {
    const row = whole(await this.db.service.findFirst({ where: { uuid, teamId: this.teamId }, include: { ...include, ...serviceBase } }), SERVICE_RELATIONS);
    if (!row) throw new NotFound("Service");
    await this.assertEnvironment(row.environment, need, "Service");
    return row as Prisma.ServiceGetPayload<{ include: typeof serviceBase & I }>;
  }

  /**
   * A service application or service database (kind) of the caller's team, checked on its
   * service's environment; the 404 names the kind. (w6/svcproxy: label overrides)
   */
  async serviceComponent(kind: ServiceComponentKind, uuid: string, need: Need): Promise<ServiceComponentRef> {
    const what = kind === "application" ? "Service application" : "Service database";
    const row = whole(
      await this.db.serviceComponent.findFirst({ where: { uuid, kind, service: { teamId: this.teamId } }, include: { service: { include: serviceBase } } }),
      SERVICE_COMPONENT_RELATIONS,
    );
    if (!row) throw new NotFound(what);
    await this.assertEnvironment(row.service.environment, need, what);
    return row;
  }

  /** A deployment, checked on its application's environment. */
  async deployment(uuid: string, need: Need): Promise<DeploymentRef> {
    const d = whole(await this.db.deployment.findFirst({ where: { uuid, teamId: this.teamId }, include: deploymentBase }), DEPLOYMENT_RELATIONS);
    if (!d) throw new NotFound("Deployment");
    await this.assertEnvironment(d.application.environment, need, "Deployment");
    return d;
  }

  /**
   * Where a new application or database goes: a project the caller sees, its environment by name
   * with manage on it, a server of the team and one of its destinations.
   */
  async placement(input: PlacementInput): Promise<{ environmentId: number; serverId: number; destinationId: number }> {
    const project = await this.project(input.project_uuid);
    const environment = await this.environment(project, { name: input.environment_name }, "manage");
    const server = await this.server(input.server_uuid);
    const destination = await this.db.destination.findFirst({ where: { uuid: input.destination_uuid, serverId: server.id }, select: { id: true } });
    if (!destination) throw new NotFound("Destination");
    return { environmentId: environment.id, serverId: server.id, destinationId: destination.id };
  }

  // -------------------------------------------------------------------------------------------
  // Team-level objects: every member sees them, owners and admins change them (the services say which)

  /** The caller's own team by id: a token sees exactly one team. */
  ownTeam(teamId: number): number {
    if (teamId !== this.teamId) throw new NotFound("Team");
    return teamId;
  }

  async member(userId: number) {
    const m = await this.db.membership.findUnique({ where: { teamId_userId: { teamId: this.teamId, userId } } });
    if (!m) throw new NotFound("User");
    return m;
  }

  async server<const I extends Prisma.ServerInclude = {}>(uuid: string, include?: I): Promise<Prisma.ServerGetPayload<{ include: I }>> {
    const row = await this.db.server.findFirst({ where: { uuid, teamId: this.teamId }, ...(include ? { include } : {}) });
    if (!row) throw new NotFound("Server");
    return row as Prisma.ServerGetPayload<{ include: I }>;
  }

  async privateKey(uuid: string) {
    const key = await this.db.privateKey.findFirst({ where: { uuid, teamId: this.teamId } });
    if (!key) throw new NotFound("Private key");
    return key;
  }

  async gitApp(uuid: string) {
    const app = await this.db.gitApp.findFirst({ where: { uuid, teamId: this.teamId } });
    if (!app) throw new NotFound("Git app");
    return app;
  }

  async s3Storage<const I extends Prisma.S3StorageInclude = {}>(id: number, include?: I): Promise<Prisma.S3StorageGetPayload<{ include: I }>> {
    const s = await this.db.s3Storage.findFirst({ where: { id, teamId: this.teamId }, ...(include ? { include } : {}) });
    if (!s) throw new NotFound("S3 storage");
    return s as Prisma.S3StorageGetPayload<{ include: I }>;
  }

  /** A template source of the team by uuid. */
  async templateSource(uuid: string) {
    // Not the stored template files (w5/svcextras): megabytes for a big catalog, read only by a service create.
    const source = await this.db.templateSource.findFirst({ where: { uuid, teamId: this.teamId }, omit: { templateFiles: true } });
    if (!source) throw new NotFound("Template source");
    return source;
  }

  /** A network of the team by uuid (on whichever of its servers). */
  async network(uuid: string) {
    const network = await this.db.network.findFirst({ where: { uuid, teamId: this.teamId } });
    if (!network) throw new NotFound("Network");
    return network;
  }

  // registries (issue 18)
  /** A registry of the team by its integer id. */
  async registry(id: number) {
    const registry = await this.db.registry.findFirst({ where: { id, teamId: this.teamId } });
    if (!registry) throw new NotFound("Registry");
    return registry;
  }

  /**
   * Servers of the team named by integer id or uuid (a registry's server_ids): all of them or a
   * 404, so one foreign or unknown id refuses the whole request.
   */
  async serversByIds(ids: readonly (number | string)[]): Promise<{ id: number; uuid: string; name: string }[]> {
    const ints = ids.filter((i): i is number => typeof i === "number");
    const uuids = ids.filter((i): i is string => typeof i === "string");
    const rows = ids.length
      ? await this.db.server.findMany({ where: { teamId: this.teamId, OR: [{ id: { in: ints } }, { uuid: { in: uuids } }] }, select: { id: true, uuid: true, name: true } })
      : [];
    const found = (i: number | string) => rows.find((r) => (typeof i === "number" ? r.id === i : r.uuid === i));
    if (ids.some((i) => !found(i))) throw new NotFound("Server");
    return [...new Map(rows.map((r) => [r.id, r])).values()];
  }
}

/** A scope per request; services/index.ts binds db and reader. */
export type ScopeFactory = (caller: Caller) => TeamScope;
