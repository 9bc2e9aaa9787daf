import {
  CpuLimit,
  DATABASE_CONFIGURATION_FORMAT,
  DatabaseConfiguration,
  DatabaseDescription,
  DatabaseName,
  DbCredentials,
  EnvKey,
  ImageRef,
  MAX_ENVS,
  MemoryLimit,
  PublicPort,
} from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import { lockInTransaction } from "../../db/locks.js";
import { buildDbDeployPayload } from "../database-spec.js";
import { containerChanged, isUp, publicPortRefusal, publishedPort, type ContainerSettings } from "../database-settings.js";
import { lockServersNetworks, type NetworkPlanSettings } from "../network-plan.js";
import { BackupLookups, PayloadError, safeJson } from "./common.js";
import { ConfigurationRefused, documentText, resetVariables, type ApplyRights, type ConfigurationKind } from "./configuration.js";

// ---- configuration and full resource backups of standalone databases (issue 19) ----

type Tx = Prisma.TransactionClient;

const documentSelect = {
  id: true,
  uuid: true,
  name: true,
  description: true,
  engine: true,
  image: true,
  isPublic: true,
  publicPort: true,
  limitsMemory: true,
  limitsCpus: true,
  credentials: true,
  envs: { orderBy: { id: "asc" }, select: { uuid: true, key: true, value: true, isPreview: true } },
} satisfies Prisma.StandaloneDatabaseSelect;

/**
 * The configuration document of a standalone database (shared DatabaseConfiguration): its
 * settings as the API names them, its engine credentials and variables sealed as at rest
 * (never opened here). Its data is the volume half of a full backup.
 */
export async function databaseConfigurationDocument(db: Db, databaseId: number, at: Date): Promise<string> {
  const d = await db.standaloneDatabase.findUnique({ where: { id: databaseId }, select: documentSelect });
  if (!d) throw new PayloadError("the database was deleted");
  const doc: DatabaseConfiguration = {
    format: DATABASE_CONFIGURATION_FORMAT,
    kind: "database",
    taken_at: at.toISOString(),
    database: {
      uuid: d.uuid,
      name: d.name,
      description: d.description,
      engine: d.engine,
      image: d.image,
      is_public: d.isPublic,
      public_port: d.publicPort,
      limits_memory: d.limitsMemory,
      limits_cpus: d.limitsCpus,
      credentials_sealed: d.credentials,
    },
    envs: d.envs.map((e) => ({ uuid: e.uuid, key: e.key, value_sealed: e.value, is_preview: e.isPreview })),
  };
  return documentText(DatabaseConfiguration, doc, "the database's");
}

interface Plan {
  doc: DatabaseConfiguration;
  databaseId: number;
  serverId: number;
  before: ContainerSettings;
  after: ContainerSettings;
  /** full restores only: the credentials that go with the restored data */
  credentials: string | null;
}

/**
 * Applies a database's configuration document: its settings and variables; with a full restore
 * also its credentials (the data volume restored beside them was made with those). The engine
 * does not change. A public port is checked as a PATCH checks it; a running database whose
 * container settings changed is re-deployed, as after a PATCH.
 */
export class DatabaseConfigurationKind implements ConfigurationKind<Plan, boolean> {
  constructor(
    private readonly lookups: BackupLookups,
    private readonly settings: { proxyPorts: { http: number; https: number }; network: NetworkPlanSettings },
  ) {}

  private get db(): Db {
    return this.lookups.db;
  }

  document(databaseId: number, at: Date): Promise<string> {
    return databaseConfigurationDocument(this.db, databaseId, at);
  }

  async plan(databaseId: number, text: string, rights: ApplyRights): Promise<Plan> {
    const parsed = DatabaseConfiguration.safeParse(safeJson(text));
    if (!parsed.success) throw new ConfigurationRefused(`the archive's configuration document is not one this version reads (${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message})`);
    const doc = parsed.data;
    const row = await this.db.standaloneDatabase.findUnique({ where: { id: databaseId }, select: { ...documentSelect, serverId: true } });
    if (!row) throw new ConfigurationRefused("the database was deleted");
    const d = doc.database;
    if (d.engine !== row.engine) throw new ConfigurationRefused(`the configuration is of a ${d.engine} database and this one is ${row.engine}: the engine of a database does not change`);
    // What the API would refuse is refused here too: whoever can write the archive can write the document (only an encrypted one is authenticated).
    const bad = [
      ...(DatabaseName.safeParse(d.name).success ? [] : ["name"]),
      ...(DatabaseDescription.safeParse(d.description).success ? [] : ["description"]),
      ...(ImageRef.safeParse(d.image).success ? [] : ["image"]),
      ...(d.public_port === null || PublicPort.safeParse(d.public_port).success ? [] : ["public_port"]),
      ...(d.is_public && d.public_port === null ? ["is_public without a public_port"] : []),
      ...(d.limits_memory === null || MemoryLimit.safeParse(d.limits_memory).success ? [] : ["limits_memory"]),
      ...(d.limits_cpus === null || CpuLimit.safeParse(d.limits_cpus).success ? [] : ["limits_cpus"]),
      ...doc.envs.filter((e) => !EnvKey.safeParse(e.key).success).map((e) => `variable ${JSON.stringify(e.key.slice(0, 64))}`),
    ];
    if (bad.length) throw new ConfigurationRefused(`the configuration has values the API does not accept: ${bad.slice(0, 5).join(", ")}`);
    if (doc.envs.length > MAX_ENVS) throw new ConfigurationRefused(`the configuration has ${doc.envs.length} variables; a database has at most ${MAX_ENVS}`);
    const keys = new Set(doc.envs.map((e) => `${e.key}\u0000${e.is_preview}`));
    if (keys.size !== doc.envs.length) throw new ConfigurationRefused("the configuration lists a variable twice");
    for (const e of doc.envs) {
      try {
        this.lookups.deps.box.open(e.value_sealed);
      } catch {
        throw new ConfigurationRefused(`the value of ${e.key} cannot be opened with this instance's key (the backup was sealed by another instance key)`);
      }
    }
    let credentials: string | null = null;
    if (rights.backupType === "full") {
      try {
        DbCredentials.parse(JSON.parse(this.lookups.deps.box.open(d.credentials_sealed)));
      } catch {
        throw new ConfigurationRefused("the database's credentials in the configuration cannot be opened with this instance's key (the backup was sealed by another instance key)");
      }
      credentials = d.credentials_sealed;
    }
    return {
      doc,
      databaseId: row.id,
      serverId: row.serverId,
      before: row,
      after: { image: d.image, isPublic: d.is_public, publicPort: d.public_port, limitsMemory: d.limits_memory, limitsCpus: d.limits_cpus },
      credentials,
    };
  }

  /** The server's public ports and the database's variables are held; a port published now is checked against the server's others again. */
  async check(tx: Tx, plan: Plan): Promise<string | null> {
    await lockInTransaction(tx, this.lookups.deps.dialect, "publicPorts", plan.serverId);
    await lockInTransaction(tx, this.lookups.deps.dialect, "databaseEnvs", plan.databaseId);
    const port = publishedPort(plan.after);
    const now = await tx.standaloneDatabase.findUnique({ where: { id: plan.databaseId }, select: { isPublic: true, publicPort: true } });
    if (!now) return "the database was deleted";
    if (port === null || port === publishedPort(now)) return null;
    const refusal = await publicPortRefusal(tx, this.settings.proxyPorts, plan.serverId, port, plan.databaseId);
    if (!refusal) return null;
    // No caller to weigh who may see the other database: it is not named.
    return "reserved" in refusal
      ? `the configuration publishes port ${port}, which is ${refusal.reserved} on server ${refusal.serverName}`
      : `the configuration publishes port ${port}, which another database of server ${refusal.serverName} publishes now; change one of them first`;
  }

  /** Writes the settings, then the variables matched by key (missing ones re-created, added ones removed). Answers whether the container must be re-created. */
  async write(tx: Tx, plan: Plan): Promise<boolean> {
    const { doc, databaseId } = plan;
    const d = doc.database;
    const before = await tx.standaloneDatabase.findUniqueOrThrow({ where: { id: databaseId }, select: { image: true, isPublic: true, publicPort: true, limitsMemory: true, limitsCpus: true, credentials: true } });
    await tx.standaloneDatabase.update({
      where: { id: databaseId },
      data: { name: d.name, description: d.description, ...plan.after, ...(plan.credentials !== null ? { credentials: plan.credentials } : {}) },
    });
    await resetVariables(tx, { databaseId }, doc.envs.map((e) => ({ uuid: e.uuid, key: e.key, isPreview: e.is_preview, data: { value: e.value_sealed } })));
    // Variables take effect on the next start, as after a change through the API; container settings and credentials at once.
    return containerChanged(before, plan.after) || (plan.credentials !== null && plan.credentials !== before.credentials);
  }

  /**
   * A running database gets what changed now (its container re-created by a db.deploy, as after a
   * PATCH); a stopped one on its next start. A re-deploy that cannot be queued is logged: the
   * restore has succeeded, and the next start deploys the restored settings.
   */
  async applied(plan: Plan, changed: boolean): Promise<void> {
    if (!changed) return;
    const { jobs, box, dialect } = this.lookups.deps;
    try {
      const queued = await this.db.$transaction(async (tx) => {
        await lockInTransaction(tx, dialect, "publicPorts", plan.serverId);
        await lockServersNetworks(tx, this.settings.network.dialect, [plan.serverId]);
        const row = await tx.standaloneDatabase.findUnique({ where: { id: plan.databaseId }, select: { status: true } });
        if (!row || !isUp(row.status)) return false;
        await jobs.enqueue(tx, plan.serverId, "db.deploy", await buildDbDeployPayload(tx, box, plan.databaseId, this.settings.network));
        return true;
      });
      if (queued) jobs.nudge(plan.serverId);
    } catch (err) {
      this.lookups.log.warn({ err: { message: (err as Error).message }, databaseId: plan.databaseId }, "re-deploying a database after its configuration was restored failed; its next start deploys it");
    }
  }
}
