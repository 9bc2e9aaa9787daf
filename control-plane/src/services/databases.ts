import { randomBytes } from "node:crypto";
import {
  DATABASE_ENGINE_FACTS,
  DATABASE_ENGINE_PARAMS,
  DELETE_DEFAULTS,
  DbActionResult,
  DbDeployResult,
  MASKED_PASSWORD,
  createMasker,
  databaseType,
  databaseUrl,
  defaultDatabaseImage,
  type CreateDatabaseCommon,
  DatabaseEngine,
  type DbCredentials,
  type RequestedCredentials,
  type UpdateDatabaseBody,
} from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { placedListSql, toInt, toIso, type SqlReader, type Window } from "../db/reader.js";
import { whole } from "../db/relations.js";
import { lockInTransaction } from "../db/locks.js";
import type { DatabaseRef, EnvironmentRef, TeamScope } from "../domain/scope.js";
import { Invalid, Conflict, Unavailable, UpstreamFailed, removedMeanwhile } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { CancelledJob, JobQueue, JobRow } from "../jobs/queue.js";
import type { DeleteFlags } from "./applications.js";
import { buildDbDeployPayload, openCredentials, sealCredentials } from "./database-spec.js";
import type { EnvOwnerResolver } from "./env-vars.js";
import { forgetAttachments, lockServersNetworks, type NetworkPlanSettings } from "./network-plan.js";
import { ServerService } from "./servers.js";
import { containerChanged, isUp, publicPortRefusal, publishedPort } from "./database-settings.js";

type Tx = Prisma.TransactionClient;

/** start/stop/restart: how long the request waits for the agent's outcome before answering 202. */
const ACTION_WAIT_MS = 30_000;
const ACTION_TIMEOUT_MS = 300_000;
/** Removal waits this long for an agent that is away: it runs once the server is back. */
const REMOVE_TIMEOUT_MS = 24 * 3600_000;
const LOGS_TIMEOUT_MS = 30_000;

export type DatabaseAction = "start" | "stop" | "restart";
const ACTION_WORDS: Record<DatabaseAction, { done: string; doing: string }> = {
  start: { done: "started", doing: "Starting" },
  stop: { done: "stopped", doing: "Stopping" },
  restart: { done: "restarted", doing: "Restarting" },
};

export type { DatabaseRef };

const withDetail = {
  environment: { include: { project: { select: { uuid: true, name: true } } } },
  server: { select: { uuid: true, ip: true } },
  destination: { select: { uuid: true } },
  envs: { orderBy: { id: "asc" } },
} satisfies Prisma.StandaloneDatabaseInclude;
export type DatabaseWithDetail = Prisma.StandaloneDatabaseGetPayload<{ include: typeof withDetail }>;
/** The required relations of withDetail (db/relations.ts: without one, the database was deleted meanwhile). */
const DETAIL_RELATIONS = ["environment", "environment.project", "server", "destination"];

type ListRow = [
  uuid: string,
  name: string,
  engine: string,
  status: string,
  image: string,
  isPublic: unknown,
  publicPort: unknown,
  createdAt: unknown,
  projectUuid: string,
  environmentName: string,
  serverUuid: string,
  lastError: string | null,
  lastErrorAt: unknown,
];

export interface DatabaseListItem {
  uuid: string;
  name: string;
  engine: DatabaseEngine;
  status: string;
  image: string;
  isPublic: boolean;
  publicPort: number | null;
  createdAt: string;
  projectUuid: string;
  environmentName: string;
  serverUuid: string;
  /** Why the last db.deploy / db.action failed (null after a success), and when (ISO 8601). */
  lastError: string | null;
  lastErrorAt: string | null;
}

/** Longest last_error kept, in characters: a reason, not a log (the job keeps its own log). */
export const LAST_ERROR_MAX = 2000;

/** A reason cut to LAST_ERROR_MAX characters; the cut is marked. */
export function boundedError(reason: string): string {
  return reason.length > LAST_ERROR_MAX ? reason.slice(0, LAST_ERROR_MAX - 1) + "…" : reason;
}

/** Every occurrence of each secret replaced by the masked form. */
export function maskSecrets(text: string, secrets: string[]): string {
  let out = text;
  // Longest first: a secret inside another is not left half-masked.
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) if (s) out = out.split(s).join(MASKED_PASSWORD);
  return out;
}

/** A public port another database of the server publishes; thrown inside the port transaction. */
class PortTaken extends Error {
  constructor(
    readonly port: number,
    readonly serverName: string,
    readonly other: { name: string; environment: EnvironmentRef },
  ) {
    super(`port ${port} taken`);
  }
}

/** Passwords and variable values of a database: the team scope's one rule for secrets (read scope and full access). */
const mayReveal = (scope: TeamScope, row: { environment: { id: number; projectId: number } }) => scope.maySeeSecrets(row.environment);

/** SQLite gives booleans as 0/1, PostgreSQL as booleans. */
const toBool = (v: unknown) => v === true || v === 1 || v === "1" || v === "t";

/** A generated password: 32 random bytes, URL-safe base64 (43 characters). */
export const generatePassword = () => randomBytes(32).toString("base64url");

export interface DatabaseServiceDeps {
  db: Db;
  reader: SqlReader;
  jobs: JobQueue;
  box: SecretBox;
  /** Host ports every server's reverse proxy publishes (a database cannot take them). */
  proxyPorts: { http: number; https: number };
  /** Network management settings: which networks a database joins (services/network-plan.ts). */
  network: NetworkPlanSettings;
  /** Backups of the database (services/backups/): running backup and restore jobs end before it goes. */
  backups?: { beforeDatabaseDelete(databaseId: number): Promise<void> };
}

/**
 * Standalone databases (spec 4.5): records, credentials (sealed JSON), public ports, and the
 * db.deploy / db.action / app.logs work the agent does for them. Every id a client sends is
 * resolved inside the caller's team; actions are checked on the database's environment.
 */
export class DatabaseService {
  /** How long start/stop/restart wait for the agent before answering 202 (tests shorten it). */
  actionWaitMs = ACTION_WAIT_MS;

  constructor(private readonly deps: DatabaseServiceDeps) {}

  /** Outcome of db.deploy (jobs/outcome-map.ts). */
  deployEnded(job: JobRow): Promise<void> {
    return this.settle(job, DbDeployResult);
  }

  /** Outcome of db.action (jobs/outcome-map.ts). */
  actionEnded(job: JobRow): Promise<void> {
    return this.settle(job, DbActionResult);
  }

  /**
   * The outcome of db.deploy and db.action (removals aside: their record is gone). Success
   * stores the agent's new engine status and clears the last error; a failure (the agent's
   * reason, a deadline reached while the agent was away or slow, a cancel) records why and when,
   * and leaves the status to the engine's reports: the control plane never writes a transient
   * status, so nothing waits on a job to leave one. "Last" is the order in which jobs end.
   */
  private async settle(job: JobRow, schema: typeof DbDeployResult | typeof DbActionResult): Promise<void> {
    const payload = JSON.parse(job.payload) as { db?: { uuid?: string }; action?: string } | null;
    if (!payload?.db?.uuid || payload.action === "remove") return;
    const where = { uuid: payload.db.uuid, serverId: job.serverId };
    if (job.status === "succeeded") {
      const result = schema.safeParse(JSON.parse(job.result ?? "null"));
      if (!result.success) return;
      await this.db.standaloneDatabase.updateMany({ where, data: { status: result.data.status, lastError: null, lastErrorAt: null } });
      return;
    }
    const row = await this.db.standaloneDatabase.findFirst({ where, select: { id: true, credentials: true } });
    if (!row) return;
    const reason = job.error || `the job was ${job.status} without a reason`;
    await this.db.standaloneDatabase.updateMany({
      where: { id: row.id },
      data: { lastError: boundedError(maskSecrets(reason, this.secretsOf(row.credentials))), lastErrorAt: new Date() },
    });
  }

  /** Passwords of a database, to keep them out of a reason shown to viewers (the agent masks them too). */
  private secretsOf(sealed: string): string[] {
    try {
      const c = openCredentials(this.deps.box, sealed);
      return [c.password, ...(c.root_password ? [c.root_password] : [])];
    } catch {
      return [];
    }
  }

  private get db(): Db {
    return this.deps.db;
  }

  // -------------------------------------------------------------------------------------------
  // Lookup

  /** The owners of database variables (services/env-vars.ts). */
  envOwners(): EnvOwnerResolver {
    return async (scope, uuid, need) => {
      const row = await scope.database(uuid, need);
      return { owner: { databaseId: row.id }, noun: "A database", canReveal: () => mayReveal(scope, row) };
    };
  }

  /** The caller's databases in one SQL statement: team, environment visibility, page window. */
  async list(scope: TeamScope, window: Window, filter: { environmentId?: number } = {}): Promise<DatabaseListItem[]> {
    const { where, params } = this.listFilter(scope, filter);
    const columns = `d."uuid", d."name", d."engine", d."status", d."image", d."isPublic", d."publicPort", d."createdAt",
        p."uuid", e."name", s."uuid", d."lastError", d."lastErrorAt"`;
    const sql = placedListSql("StandaloneDatabase", "d", columns, where, window, params);
    const rows = await this.deps.reader.rows<ListRow>(sql, params);
    return rows.map(([uuid, name, engine, status, image, isPublic, publicPort, createdAt, projectUuid, environmentName, serverUuid, lastError, lastErrorAt]) => ({
      uuid,
      name,
      engine: DatabaseEngine.parse(engine),
      status,
      image,
      isPublic: toBool(isPublic),
      publicPort: publicPort === null || publicPort === undefined ? null : toInt(publicPort),
      createdAt: toIso(createdAt),
      projectUuid,
      environmentName,
      serverUuid,
      lastError: lastError ?? null,
      lastErrorAt: lastErrorAt === null || lastErrorAt === undefined ? null : toIso(lastErrorAt),
    }));
  }

  async count(scope: TeamScope): Promise<number> {
    const { where, params } = this.listFilter(scope);
    const [row] = await this.deps.reader.all<{ n: unknown }>(
      `SELECT COUNT(*) AS "n" FROM "StandaloneDatabase" d JOIN "Environment" e ON e."id" = d."environmentId" WHERE ${where}`,
      params,
    );
    return toInt(row!.n);
  }

  private listFilter(scope: TeamScope, filter: { environmentId?: number } = {}): { where: string; params: (string | number)[] } {
    let { sql: where, params } = scope.visibleRows(`d."teamId"`, "environment");
    if (filter.environmentId !== undefined) {
      where += ` AND d."environmentId" = ?`;
      params.push(filter.environmentId);
    }
    return { where, params };
  }

  /** The full record, and whether the caller may see its secrets. */
  async detail(scope: TeamScope, uuid: string): Promise<{ row: DatabaseWithDetail; credentials: DbCredentials; reveal: boolean }> {
    const ref = await scope.database(uuid, "view");
    const row = whole(await this.db.standaloneDatabase.findUnique({ where: { id: ref.id }, include: withDetail }), DETAIL_RELATIONS);
    if (!row) throw removedMeanwhile("Database");
    return { row, credentials: openCredentials(this.deps.box, row.credentials), reveal: await mayReveal(scope, ref) };
  }

  // -------------------------------------------------------------------------------------------
  // Create and update

  /** Requested credentials with defaults for names and generated passwords, by role. */
  private credentialsFor(engine: DatabaseEngine, requested: RequestedCredentials): DbCredentials {
    const p = DATABASE_ENGINE_PARAMS[engine];
    return {
      user: p.user ? (requested.user ?? p.user.default) : null,
      password: requested.password ?? generatePassword(),
      database: p.database ? (requested.database ?? p.database.default) : null,
      root_password: p.rootPassword ? (requested.root_password ?? generatePassword()) : null,
    };
  }

  /**
   * Runs fn in a transaction that owns the server's public ports: on PostgreSQL an advisory
   * lock per server (replicas), SQLite runs one transaction at a time anyway.
   */
  private withPorts<T>(serverId: number, fn: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.deps.reader.kind, "publicPorts", serverId);
      // Then the server's network lock, before any row is written: a db.deploy written here
      // records the environment's network under it, and an environment's deletion takes it
      // before it deletes anything (the other order could wait on each other on PostgreSQL).
      await lockServersNetworks(tx, this.deps.network.dialect, [serverId]);
      return fn(tx);
    });
  }

  /**
   * A host port a database may be published on: not the proxy's ports nor the server's SSH port
   * (422), not published by another database of the server (PortTaken, answered as a 409 by
   * portConflict once the transaction is over). Applications never publish host ports
   * (docs/compose.md), so public databases and the proxy are all there is.
   */
  private async assertPortFree(tx: Tx, serverId: number, port: number, exceptId?: number): Promise<void> {
    const refusal = await publicPortRefusal(tx, this.deps.proxyPorts, serverId, port, exceptId);
    if (!refusal) return;
    if ("reserved" in refusal) throw new Invalid({ public_port: [`Port ${port} is ${refusal.reserved} on server ${refusal.serverName}; choose another.`] });
    throw new PortTaken(port, refusal.serverName, refusal.takenBy);
  }

  /** The 409 of a taken port: it names the other database only when the caller may see it. */
  private async portConflict<T>(scope: TeamScope, work: Promise<T>): Promise<T> {
    try {
      return await work;
    } catch (err) {
      if (!(err instanceof PortTaken)) throw err;
      const who = (await scope.canSeeEnvironment(err.other.environment)) ? `database ${err.other.name}` : "another database";
      throw new Conflict(`Port ${err.port} of server ${err.serverName} is already published by ${who}; choose another public_port.`);
    }
  }

  async create(
    scope: TeamScope,
    engine: DatabaseEngine,
    input: CreateDatabaseCommon,
    requested: RequestedCredentials,
  ): Promise<{ uuid: string; name: string; type: string; internal_db_url: string }> {
    const where = await scope.placement(input);
    const uuid = newUuid();
    const credentials = this.credentialsFor(engine, requested);
    const data: Prisma.StandaloneDatabaseUncheckedCreateInput = {
      uuid,
      teamId: scope.teamId,
      ...where,
      name: input.name ?? `${engine}-${uuid.slice(0, 8)}`,
      description: input.description ?? "",
      engine,
      image: input.image ?? defaultDatabaseImage(engine),
      isPublic: input.is_public,
      publicPort: input.public_port ?? null,
      limitsMemory: input.limits_memory ?? null,
      limitsCpus: input.limits_cpus ?? null,
      credentials: sealCredentials(this.deps.box, credentials),
    };
    const row = await this.portConflict(scope, this.withPorts(where.serverId, async (tx) => {
      if (input.is_public) await this.assertPortFree(tx, where.serverId, input.public_port!);
      const created = await tx.standaloneDatabase.create({ data, select: { id: true, uuid: true, name: true } });
      if (input.instant_deploy) await this.deps.jobs.enqueue(tx, where.serverId, "db.deploy", await buildDbDeployPayload(tx, this.deps.box, created.id, this.deps.network));
      return created;
    }));
    if (input.instant_deploy) this.deps.jobs.nudge(where.serverId);
    // The URL carries the password: masked for a caller who may not read it afterwards either.
    const environment = await this.db.environment.findUniqueOrThrow({ where: { id: where.environmentId }, select: { id: true, projectId: true } });
    const shown = (await scope.maySeeSecrets(environment)) ? credentials : { ...credentials, password: MASKED_PASSWORD };
    return { uuid: row.uuid, name: row.name, type: databaseType(engine), internal_db_url: this.internalUrl(engine, uuid, shown) };
  }

  internalUrl(engine: DatabaseEngine, uuid: string, credentials: DbCredentials): string {
    return databaseUrl(engine, credentials, uuid, DATABASE_ENGINE_FACTS[engine].port);
  }

  /**
   * PATCH: only the fields given change. A change to what the container is made of (image,
   * published port, limits) recreates it right away when it runs (db.deploy); a stopped
   * database gets it on its next start. Returns whether a re-deploy was queued.
   */
  async update(scope: TeamScope, uuid: string, input: UpdateDatabaseBody): Promise<{ redeploying: boolean }> {
    const ref = await scope.database(uuid, "manage");
    const isPublic = input.is_public ?? ref.isPublic;
    const publicPort = input.public_port !== undefined ? input.public_port : ref.publicPort;
    if (isPublic && publicPort === null) {
      throw new Invalid({ public_port: [input.public_port === null ? "Cannot be null while the database is public." : "Required when is_public is true."] });
    }
    const data: Prisma.StandaloneDatabaseUncheckedUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    if (input.image !== undefined) data.image = input.image;
    if (input.is_public !== undefined) data.isPublic = input.is_public;
    if (input.public_port !== undefined) data.publicPort = input.public_port;
    if (input.limits_memory !== undefined) data.limitsMemory = input.limits_memory;
    if (input.limits_cpus !== undefined) data.limitsCpus = input.limits_cpus;

    const changed = containerChanged(ref, {
      image: input.image ?? ref.image,
      isPublic,
      publicPort,
      limitsMemory: input.limits_memory !== undefined ? input.limits_memory : ref.limitsMemory,
      limitsCpus: input.limits_cpus !== undefined ? input.limits_cpus : ref.limitsCpus,
    });
    const redeploying = changed && isUp(ref.status);

    await this.portConflict(scope, this.withPorts(ref.serverId, async (tx) => {
      if (isPublic && publishedPort({ isPublic, publicPort }) !== publishedPort(ref)) await this.assertPortFree(tx, ref.serverId, publicPort!, ref.id);
      await tx.standaloneDatabase.update({ where: { id: ref.id }, data });
      if (redeploying) await this.deps.jobs.enqueue(tx, ref.serverId, "db.deploy", await buildDbDeployPayload(tx, this.deps.box, ref.id, this.deps.network));
    }));
    if (redeploying) this.deps.jobs.nudge(ref.serverId);
    return { redeploying };
  }

  // -------------------------------------------------------------------------------------------
  // Delete

  private removalPayload(row: { uuid: string; name: string }, flags: Omit<DeleteFlags, "delete_configurations">) {
    return { db: { uuid: row.uuid, name: row.name }, action: "remove" as const, delete_volumes: flags.delete_volumes, docker_cleanup: flags.docker_cleanup };
  }

  /**
   * Everything needed to remove the databases of some environments along with them (project and
   * environment deletes): read before the caller's transaction, enqueued inside it, delivered
   * after it. Their volumes stay (the spec's default delete_volumes=false).
   */
  async planRemoval(where: { environmentIds: number[] }): Promise<{ enqueue(tx: Tx): Promise<void>; kick(): void }> {
    const select = { id: true, uuid: true, name: true, serverId: true } as const;
    const before = where.environmentIds.length ? await this.db.standaloneDatabase.findMany({ where: { environmentId: { in: where.environmentIds } }, select }) : [];
    for (const row of before) await this.deps.backups?.beforeDatabaseDelete(row.id);
    const servers = new Set<number>();
    const cancelled: CancelledJob[] = [];
    return {
      enqueue: async (tx) => {
        // Read again in the caller's transaction (one created meanwhile goes too).
        const rows = where.environmentIds.length ? await tx.standaloneDatabase.findMany({ where: { environmentId: { in: where.environmentIds } }, select }) : [];
        for (const row of rows) servers.add(row.serverId);
        // Their deployments (db.deploy: start, restart, a changed setting) still queued or
        // running end here: one run after the removal would bring back the container and its
        // environment network.
        const uuids = new Set(rows.map((r) => r.uuid));
        cancelled.push(
          ...(await this.deps.jobs.cancelWithin(
            tx,
            { serverIds: [...servers], types: ["db.deploy"] },
            (payload) => uuids.has((payload as { db?: { uuid?: string } } | null)?.db?.uuid ?? ""),
            "cancelled: the database's environment was deleted",
          )),
        );
        for (const row of rows) await this.deps.jobs.enqueue(tx, row.serverId, "db.action", this.removalPayload(row, DELETE_DEFAULTS), REMOVE_TIMEOUT_MS);
        await forgetAttachments(tx, "database", rows.map((r) => r.id));
      },
      kick: () => {
        // The agents hear of the cancels before the removals are delivered.
        void this.deps.jobs.cancelled(cancelled).catch(() => {});
        for (const serverId of servers) this.deps.jobs.nudge(serverId);
      },
    };
  }

  /**
   * DELETE: the record goes (with its variables and backup schedules; backup files stay), and in
   * the same transaction a removal job for the server: its container always goes (a deleted
   * database must not keep running or keep its public port: issue 15); delete_volumes decides
   * its data volume, docker_cleanup its image. A database keeps no configuration files on the
   * server (its settings are the container's), so delete_configurations changes nothing there.
   */
  async remove(scope: TeamScope, uuid: string, flags: DeleteFlags): Promise<void> {
    const ref = await scope.database(uuid, "delete");
    await this.deps.backups?.beforeDatabaseDelete(ref.id);
    await this.db.$transaction(async (tx) => {
      await this.deps.jobs.enqueue(tx, ref.serverId, "db.action", this.removalPayload(ref, flags), REMOVE_TIMEOUT_MS);
      await forgetAttachments(tx, "database", [ref.id]);
      await tx.standaloneDatabase.delete({ where: { id: ref.id } });
    });
    this.deps.jobs.nudge(ref.serverId);
  }

  // -------------------------------------------------------------------------------------------
  // Start, stop, restart, logs

  private requireAgent(ref: DatabaseRef): void {
    if (!ServerService.agentConnected(ref.server)) {
      throw new Unavailable(`Server ${ref.server.name} is unreachable: its agent is not connected.`);
    }
  }

  /**
   * start: a running database is left as it is (db.action start); any other is (re)created from
   * its current settings on its volume and waited for until healthy (db.deploy): that also
   * covers a database never started and one whose container was removed on the host.
   * restart: always db.deploy, so changed variables and settings apply (docs/databases.md).
   * stop: db.action stop. Waits up to 30 s for the agent: 200 with the new status, else 202.
   */
  async action(scope: TeamScope, uuid: string, action: DatabaseAction): Promise<{ status: number; message: string; dbStatus: string }> {
    const ref = await scope.database(uuid, "deploy");
    this.requireAgent(ref);
    const deploy = action === "restart" || (action === "start" && !isUp(ref.status));
    const jobId = deploy
      ? // One transaction under the server's network lock: the environment network is recorded
        // with the job that ensures it, and an environment deleted meanwhile (the database with
        // it) leaves neither (404).
        await this.db.$transaction(async (tx) => {
          await lockServersNetworks(tx, this.deps.network.dialect, [ref.serverId]);
          return this.deps.jobs.enqueue(tx, ref.serverId, "db.deploy", await buildDbDeployPayload(tx, this.deps.box, ref.id, this.deps.network));
        })
      : await this.deps.jobs.enqueue(
          this.db,
          ref.serverId,
          "db.action",
          { db: { uuid: ref.uuid, name: ref.name }, action, delete_volumes: false, docker_cleanup: false },
          ACTION_TIMEOUT_MS,
        );
    this.deps.jobs.nudge(ref.serverId);
    const words = ACTION_WORDS[action];
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      this.deps.jobs.wait<"db.deploy" | "db.action">(jobId),
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), this.actionWaitMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!outcome) {
      return { status: 202, message: `${words.doing} ${ref.name}: the agent is still at it; the status will follow.`, dbStatus: ref.status };
    }
    if (outcome.status !== "succeeded") throw new UpstreamFailed(`${words.doing} ${ref.name} failed: ${outcome.error}`);
    return { status: 200, message: `Database ${words.done}.`, dbStatus: outcome.result.status };
  }

  /**
   * Recent log lines of the database's container (app.logs finds containers by the resource uuid
   * label), its passwords and variable values masked for every caller: the agent masks them
   * before the lines leave the server, and they are masked here again (an older agent).
   */
  async logs(scope: TeamScope, uuid: string, since: number, tail: number) {
    const ref = await scope.database(uuid, "view");
    this.requireAgent(ref);
    const envs = await this.db.envVar.findMany({ where: { databaseId: ref.id }, select: { value: true } });
    const secrets = [...this.secretsOf(ref.credentials), ...envs.map((e) => this.deps.box.open(e.value))];
    const job = await this.deps.jobs.run(ref.serverId, "app.logs", { app: { uuid: ref.uuid, name: ref.name }, since_s: since, tail, secrets }, LOGS_TIMEOUT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`Reading the logs of ${ref.name} failed: ${job.error}`);
    const mask = createMasker(secrets);
    return { ...job.result, lines: job.result.lines.map(mask) };
  }
}
