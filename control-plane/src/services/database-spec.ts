import { DatabaseEngine, DbCredentials, DbDeployPayload } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import type { SecretBox } from "../crypto/secret-box.js";
import { NotFound, Invalid, Internal } from "../domain/errors.js";
import { NetworkLimitError, resourceNetworks, type NetworkPlanSettings } from "./network-plan.js";

type Reader = Db | Prisma.TransactionClient;

/** The sealed credentials of a database, opened (a value this instance's key cannot open is a 500 naming no secret). */
export function openCredentials(box: SecretBox, sealed: string): DbCredentials {
  let json: unknown;
  try {
    json = JSON.parse(box.open(sealed));
  } catch {
    throw new Internal("The database's credentials cannot be decrypted with this instance's key.");
  }
  const parsed = DbCredentials.safeParse(json);
  if (!parsed.success) throw new Internal("The database's stored credentials are malformed.");
  return parsed.data;
}

export function sealCredentials(box: SecretBox, credentials: DbCredentials): string {
  return box.seal(JSON.stringify(DbCredentials.parse(credentials)));
}

/** What decides the networks of a database deployment. */
export interface DatabasePlacement {
  teamId: number;
  serverId: number;
  environmentId: number;
  databaseId: number;
  /** The destination's network: where the database runs without network management. */
  destinationNetwork: string;
}

/**
 * The networks part of db.deploy, decided by services/network-plan.ts: the destination's network
 * without management (or in mode none), else the environment's network (recorded as requested,
 * within PLATFORM_MAX_NETWORKS: 422 beyond it), plus the shared networks attached to it. A
 * database has no fqdn, so it never joins the proxy network.
 */
export async function databaseNetworks(db: Reader, settings: NetworkPlanSettings, p: DatabasePlacement): Promise<Pick<DbDeployPayload, "network" | "networks" | "ensure_networks">> {
  const environment = await db.environment.findUniqueOrThrow({ where: { id: p.environmentId }, select: { id: true, uuid: true } });
  try {
    const plan = await resourceNetworks(
      { db, ...settings },
      { teamId: p.teamId, serverId: p.serverId, environment, destinationNetwork: p.destinationNetwork, resource: { type: "database", id: p.databaseId }, isPublic: false },
    );
    return { network: plan.network, networks: plan.networks, ensure_networks: plan.ensure_networks };
  } catch (err) {
    if (err instanceof NetworkLimitError) {
      const message = `The database's environment network cannot be created: ${err.message}`;
      // Named under environment_name: the environment whose network the server has no room for.
      throw new Invalid({ environment_name: [message] }, message);
    }
    throw err;
  }
}

/**
 * The db.deploy payload of a database as it is now: engine, image, opened credentials, user
 * variables (opened), networks, public port (only while public) and limits. Checked with the
 * protocol schema. `db` may be a transaction: create and PATCH enqueue in the same one.
 */
export async function buildDbDeployPayload(db: Reader, box: SecretBox, databaseId: number, network: NetworkPlanSettings): Promise<DbDeployPayload> {
  const row = await db.standaloneDatabase.findUnique({
    where: { id: databaseId },
    include: { destination: { select: { networkName: true } }, envs: { where: { isPreview: false }, orderBy: { id: "asc" } } },
  });
  if (!row) throw new NotFound("Database");
  const env: Record<string, string> = {};
  for (const v of row.envs) {
    try {
      env[v.key] = box.open(v.value);
    } catch {
      throw new Internal(`Environment variable ${v.key} cannot be decrypted with this instance's key.`);
    }
  }
  const networks = await databaseNetworks(db, network, {
    teamId: row.teamId,
    serverId: row.serverId,
    environmentId: row.environmentId,
    databaseId: row.id,
    destinationNetwork: row.destination.networkName,
  });
  const candidate = {
    db: { uuid: row.uuid, name: row.name },
    engine: DatabaseEngine.parse(row.engine),
    image: row.image,
    credentials: openCredentials(box, row.credentials),
    env,
    ...networks,
    public_port: row.isPublic ? row.publicPort : null,
    memory: row.limitsMemory,
    cpus: row.limitsCpus,
  };
  const parsed = DbDeployPayload.safeParse(candidate);
  if (!parsed.success) {
    // Field names only: values may be secrets.
    const fields = [...new Set(parsed.error.issues.map((i) => i.path.join(".") || "payload"))].join(", ");
    throw new Internal(`The database's settings do not form a valid deployment (${fields}).`);
  }
  return parsed.data;
}
