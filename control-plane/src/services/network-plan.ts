import { LABEL_NETWORK_SCOPE, type NetworkDriver, type NetworkScope, type NetworkSpec, type ProxyIsolationPhase } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { lockInTransaction } from "../db/locks.js";
import type { NetworkConfig } from "../config.js";
import { newUuid } from "../lib/ids.js";
import { ServerService } from "./servers.js";

/**
 * The one place that decides which networks a resource joins and which the server's proxy
 * joins (spec section 1, "Network management behavior"; docs/networks.md):
 * - management off: every resource is on its destination network (one bridge per server);
 * - mode none: the destination network, no automatic isolation;
 * - mode environment / strict: the environment's own network `capstan-env-<env uuid>` (bridge,
 *   or overlay when the server is a swarm manager), created by the agent first (ensure_networks)
 *   and recorded as a Network row (pending until a job result or a sync confirms it);
 * - proxy isolation (PLATFORM_PROXY_ISOLATION, or strict): resources with an fqdn also join
 *   the dedicated proxy network and are routed there; the proxy joins only that network once
 *   the server's proxy was cleaned up (before: its old networks too, so nothing stops routing);
 * - shared networks a user attached to the resource are added to its networks.
 */

/** The dedicated proxy network of every server (scope proxy). */
export const PROXY_NETWORK = "capstan-proxy-net";
const ENV_PREFIX = "capstan-env-";
export const environmentNetworkName = (environmentUuid: string) => `${ENV_PREFIX}${environmentUuid}`;
/** The environment uuid a platform environment network is named after, or null. */
export const environmentUuidOf = (name: string): string | null => (name.startsWith(ENV_PREFIX) ? name.slice(ENV_PREFIX.length) : null);

/** Statuses of a record whose network exists on the server or is being created. */
export const LIVE_STATUSES = ["pending", "active"];

export interface NetworkPlanContext {
  /** The database, or the caller's transaction (then every write happens inside it). */
  db: Db | Tx;
  network: NetworkConfig;
  dialect: "sqlite" | "postgresql";
}

/** The instance settings the plan needs besides a database handle. */
export type NetworkPlanSettings = Omit<NetworkPlanContext, "db">;

/** A network would be created beyond PLATFORM_MAX_NETWORKS; the message says so to the user. */
export class NetworkLimitError extends Error {}

/** Matches DeployPayload.run / DbDeployPayload: the networks of one resource deployment. */
export interface ResourceNetworkPlan {
  network: string;
  networks: string[];
  ensure_networks: NetworkSpec[];
  proxy_network: string | null;
}

export type AttachableType = "application" | "database" | "service";

export interface ResourcePlacement {
  teamId: number;
  serverId: number;
  environment: { id: number; uuid: string };
  /** The destination's network: where everything runs without management or in mode none. */
  destinationNetwork: string;
  resource: { type: AttachableType; id: number };
  /** The resource has an fqdn: the proxy routes to it. */
  isPublic: boolean;
}

type Tx = Prisma.TransactionClient;
type NetworkRow = Awaited<ReturnType<Db["network"]["findFirstOrThrow"]>>;

/** bridge on a standalone engine, overlay on a swarm manager (the agent reports its swarm role). */
export async function serverDriver(db: Db | Tx, serverId: number): Promise<NetworkDriver> {
  const server = await db.server.findUnique({ where: { id: serverId }, select: { facts: true } });
  return server && ServerService.facts(server)?.engine.swarm_role === "manager" ? "overlay" : "bridge";
}

/** What the agent is asked to create for a record. */
export function specOf(row: { name: string; driver: string; encrypted: boolean; scope: string }): NetworkSpec {
  return {
    name: row.name,
    driver: row.driver === "overlay" ? "overlay" : "bridge",
    encrypted: row.driver === "overlay" && row.encrypted,
    attachable: true,
    labels: { [LABEL_NETWORK_SCOPE]: row.scope },
  };
}

/**
 * Runs fn in a transaction holding the server's network lock: the limit count and the insert
 * it guards are one step on PostgreSQL with several replicas (SQLite runs one transaction at a
 * time). Given a transaction already, fn runs in it (the lock lasts until it ends).
 */
export async function withServerNetworks<T>(ctx: Pick<NetworkPlanContext, "db" | "dialect">, serverId: number, fn: (tx: Tx) => Promise<T>): Promise<T> {
  const locked = async (tx: Tx) => {
    await lockInTransaction(tx, ctx.dialect, "networks", serverId);
    return fn(tx);
  };
  const db = ctx.db;
  return "$transaction" in db ? db.$transaction(locked) : locked(db);
}

/** Refuses one more network on the server at PLATFORM_MAX_NETWORKS (records pending or active count). */
export async function assertBelowLimit(tx: Db | Tx, config: NetworkConfig, serverId: number): Promise<void> {
  const used = await tx.network.count({ where: { serverId, status: { in: LIVE_STATUSES } } });
  if (used < config.maxNetworks) return;
  const server = await tx.server.findUnique({ where: { id: serverId }, select: { name: true } });
  throw new NetworkLimitError(
    `Server ${server?.name ?? serverId} has reached its limit of ${config.maxNetworks} networks (PLATFORM_MAX_NETWORKS); delete networks it no longer needs or raise the limit.`,
  );
}

interface NetworkRequest {
  teamId: number;
  serverId: number;
  name: string;
  scope: NetworkScope;
  environmentId?: number | null;
  /** Exempt from the limit: the one proxy network per server (routing must not stop at the limit). */
  exempt?: boolean;
}

/**
 * The record of a platform network the agent is about to be asked to create: the existing one
 * when it is pending or active, else a new (or revived) pending one, within the limit.
 * Driver and encryption are decided once, when it is first requested.
 */
export async function requestNetwork(ctx: NetworkPlanContext, req: NetworkRequest): Promise<NetworkRow> {
  return withServerNetworks(ctx, req.serverId, async (tx) => {
    const existing = await tx.network.findUnique({ where: { serverId_name: { serverId: req.serverId, name: req.name } } });
    if (existing && LIVE_STATUSES.includes(existing.status)) return existing;
    if (!req.exempt) await assertBelowLimit(tx, ctx.network, req.serverId);
    const driver = await serverDriver(tx, req.serverId);
    const data = {
      teamId: req.teamId,
      scope: req.scope,
      driver,
      encrypted: driver === "overlay" && ctx.network.overlayEncryption,
      environmentId: req.environmentId ?? null,
      isProxyNetwork: req.scope === "proxy",
      status: "pending",
      reason: null,
      containerEngineId: null,
    };
    if (existing) return tx.network.update({ where: { id: existing.id }, data });
    return tx.network.create({ data: { ...data, uuid: newUuid(), serverId: req.serverId, name: req.name } });
  });
}

/**
 * Shared networks a user attached to the resource (on its server, shared, not deleted or
 * failed), in attach order. Only shared ones: a record sync reclassified (it was not a user's
 * shared network after all) is never joined, whatever attachment is left.
 */
export async function attachedNetworks(db: Db | Tx, serverId: number, resource: ResourcePlacement["resource"]): Promise<NetworkRow[]> {
  const rows = await db.networkAttachment.findMany({
    where: { resourceType: resource.type, resourceId: resource.id, network: { serverId, scope: "shared", status: { in: LIVE_STATUSES } } },
    orderBy: { id: "asc" },
    include: { network: true },
  });
  return rows.map((r) => r.network);
}

/**
 * The networks of one resource deployment. With `record` (default) the environment and proxy
 * networks are recorded as requested (pending) and the limit applies: NetworkLimitError when
 * the environment's network would be one too many. Without, nothing is written (a view).
 */
export async function resourceNetworks(ctx: NetworkPlanContext, p: ResourcePlacement, opts: { record?: boolean } = {}): Promise<ResourceNetworkPlan> {
  const cfg = ctx.network;
  if (!cfg.management) return { network: p.destinationNetwork, networks: [], ensure_networks: [], proxy_network: null };
  const record = opts.record ?? true;
  const planned = async (req: NetworkRequest): Promise<NetworkSpec> => {
    if (record) return specOf(await requestNetwork(ctx, req));
    const row = await ctx.db.network.findUnique({ where: { serverId_name: { serverId: req.serverId, name: req.name } } });
    if (row && LIVE_STATUSES.includes(row.status)) return specOf(row);
    const driver = await serverDriver(ctx.db, req.serverId);
    return specOf({ name: req.name, driver, encrypted: cfg.overlayEncryption, scope: req.scope });
  };

  const ensure: NetworkSpec[] = [];
  let network = p.destinationNetwork;
  if (cfg.isolation !== "none") {
    const spec = await planned({
      teamId: p.teamId,
      serverId: p.serverId,
      name: environmentNetworkName(p.environment.uuid),
      scope: "environment",
      environmentId: p.environment.id,
    });
    ensure.push(spec);
    network = spec.name;
  }
  const networks: string[] = [];
  let proxyNetwork: string | null = null;
  if (cfg.proxyIsolation && p.isPublic) {
    const spec = await planned({ teamId: p.teamId, serverId: p.serverId, name: PROXY_NETWORK, scope: "proxy", exempt: true });
    ensure.push(spec);
    networks.push(spec.name);
    proxyNetwork = spec.name;
  }
  for (const n of await attachedNetworks(ctx.db, p.serverId, p.resource)) {
    if (n.name !== network && !networks.includes(n.name)) networks.push(n.name);
  }
  return { network, networks, ensure_networks: ensure, proxy_network: proxyNetwork };
}

/** A planned network cannot be recorded: its environment was deleted meanwhile. */
export class NetworkPlanGoneError extends Error {}

/**
 * Records the networks a job's payload asks the agent to ensure (a payload built with
 * record: false), in the transaction that writes the job, so that no record is pending
 * without a job that ensures it: the environment network (within the limit: NetworkLimitError;
 * NetworkPlanGoneError when its environment was deleted meanwhile) and the proxy network
 * (exempt). `proxyNetworks` (ProxySettings.networks): a payload that put the proxy on the proxy
 * network only while the server's phase is still none was built for a fresh server, which is
 * recorded cleaned here; proxy settings built with proxy isolation off reset the phase to none
 * (clearProxyPhase).
 */
export async function recordPlannedNetworks(
  ctx: NetworkPlanContext,
  p: { teamId: number; serverId: number; specs: readonly NetworkSpec[]; proxyNetworks?: readonly string[] },
): Promise<void> {
  const cfg = ctx.network;
  if (!cfg.proxyIsolation && p.proxyNetworks) await clearProxyPhase(ctx.db, p.serverId);
  if (!cfg.management) return;
  await withServerNetworks(ctx, p.serverId, async (tx) => {
    const inTx = { ...ctx, db: tx };
    const done = new Set<string>();
    for (const spec of p.specs) {
      if (done.has(spec.name)) continue;
      done.add(spec.name);
      const scope = spec.labels[LABEL_NETWORK_SCOPE];
      if (scope === "environment") {
        const envUuid = environmentUuidOf(spec.name);
        const env = envUuid ? await tx.environment.findFirst({ where: { uuid: envUuid, project: { teamId: p.teamId } }, select: { id: true } }) : null;
        if (!env) throw new NetworkPlanGoneError(`The environment of network ${spec.name} was deleted.`);
        await requestNetwork(inTx, { teamId: p.teamId, serverId: p.serverId, name: spec.name, scope: "environment", environmentId: env.id });
      } else if (scope === "proxy") {
        await requestNetwork(inTx, { teamId: p.teamId, serverId: p.serverId, name: spec.name, scope: "proxy", exempt: true });
      }
    }
    if (cfg.proxyIsolation && p.proxyNetworks && p.proxyNetworks.length === 1 && p.proxyNetworks[0] === PROXY_NETWORK) {
      const server = await tx.server.findUniqueOrThrow({ where: { id: p.serverId }, select: { uuid: true } });
      if ((await proxyPhase(tx, server.uuid)) === "none") await setProxyPhase(tx, server.uuid, "cleaned");
    }
  });
}

/**
 * The check of recordPlannedNetworks without a lock or a write (NetworkLimitError when an
 * environment network not recorded yet would be one too many now): a deployment that builds
 * elsewhere first fails before its build rather than after it. Checked again when the job is written.
 */
export async function assertPlannedNetworksFit(ctx: NetworkPlanContext, p: { serverId: number; specs: readonly NetworkSpec[] }): Promise<void> {
  if (!ctx.network.management) return;
  for (const spec of p.specs) {
    if (spec.labels[LABEL_NETWORK_SCOPE] === "environment") await assertRecordedOrFits(ctx, p.serverId, spec.name);
  }
}

/**
 * The same check before a resource deployment is admitted (NetworkLimitError when the
 * environment's network on the server is not recorded and would be one too many now), so the
 * request is refused while the caller is there to read why, instead of a deployment that can
 * only fail. Nothing is locked or written: the check when the job is written still decides.
 */
export async function assertEnvironmentNetworkFits(ctx: NetworkPlanContext, p: { serverId: number; environmentId: number }): Promise<void> {
  if (!ctx.network.management || ctx.network.isolation === "none") return;
  const env = await ctx.db.environment.findUnique({ where: { id: p.environmentId }, select: { uuid: true } });
  if (env) await assertRecordedOrFits(ctx, p.serverId, environmentNetworkName(env.uuid));
}

async function assertRecordedOrFits(ctx: NetworkPlanContext, serverId: number, name: string): Promise<void> {
  const row = await ctx.db.network.findUnique({ where: { serverId_name: { serverId, name } }, select: { status: true } });
  if (!row || !LIVE_STATUSES.includes(row.status)) await assertBelowLimit(ctx.db, ctx.network, serverId);
}

/**
 * Takes the network locks of several servers in one transaction, in id order (so two such
 * transactions never wait on each other in a cycle), as the first thing it does.
 */
export async function lockServersNetworks(tx: Tx, dialect: NetworkPlanContext["dialect"], serverIds: readonly number[]): Promise<void> {
  for (const id of [...new Set(serverIds)].sort((a, b) => a - b)) await lockInTransaction(tx, dialect, "networks", id);
}

// ---------------------------------------------------------------------------------------------
// The proxy

/**
 * Where a server's proxy stands with proxy isolation (Server.proxyIsolation):
 * - none: never migrated; the proxy keeps its old networks next to the proxy network;
 * - migrated: POST .../proxy/migrate ran (the proxy network exists, public containers joined it);
 * - cleaned: POST .../proxy/cleanup ran, or the server had nothing deployed when isolation
 *   first applied to it: the proxy is on the proxy network only.
 */
export type ProxyPhase = ProxyIsolationPhase;

/** The phase a Server.proxyIsolation value stands for (anything unknown is none: the proxy keeps its old networks). */
export const phaseOf = (stored: string | null | undefined): ProxyPhase => (stored === "migrated" || stored === "cleaned" ? stored : "none");

export async function proxyPhase(db: Db | Tx, serverUuid: string): Promise<ProxyPhase> {
  const row = await db.server.findUnique({ where: { uuid: serverUuid }, select: { proxyIsolation: true } });
  return phaseOf(row?.proxyIsolation);
}

export async function setProxyPhase(db: Db | Tx, serverUuid: string, phase: Exclude<ProxyPhase, "none">): Promise<void> {
  await db.server.update({ where: { uuid: serverUuid }, data: { proxyIsolation: phase } });
}

/**
 * Forgets a server's phase when proxy settings are written with proxy isolation off. Such a
 * proxy sync puts the proxy back on the old networks and such a deployment labels its
 * container to be routed there, so a migrated or cleaned phase is no longer true; kept, a
 * later switch back on would take the server for cleaned and put the proxy on the proxy
 * network only, leaving those containers unrouted. Done with the write that makes it untrue
 * (not once at start), so a replica started with other settings cannot leave it stale.
 */
export async function clearProxyPhase(db: Db | Tx, serverId: number): Promise<void> {
  await db.server.updateMany({ where: { id: serverId, proxyIsolation: { not: "none" } }, data: { proxyIsolation: "none" } });
}

/** Applications with an fqdn: the resources the proxy routes to. */
const PUBLIC_APP = { AND: [{ fqdn: { not: null } }, { fqdn: { not: "" } }] } satisfies Prisma.ApplicationWhereInput;
export const publicApplicationWhere = PUBLIC_APP;
/** w7/svcroute: services with a service application with an fqdn (routed like applications). */
const publicServiceWhere = (serverId: number) =>
  ({ serverId, components: { some: { kind: "application", AND: [{ fqdn: { not: null } }, { fqdn: { not: "" } }] } } }) satisfies Prisma.ServiceWhereInput;

/**
 * The networks the proxy reaches its upstreams on without the dedicated proxy network: the
 * server's destination networks, and (with isolation) every environment network of the server
 * that holds an application with an fqdn or a service with a routed service application.
 */
export async function sharedProxyNetworks(ctx: NetworkPlanContext, serverId: number, planned?: PlannedEnvironmentNetwork): Promise<string[]> {
  const destinations = await ctx.db.destination.findMany({ where: { serverId }, orderBy: { id: "asc" }, select: { networkName: true } });
  const names = destinations.map((d) => d.networkName);
  if (ctx.network.management && ctx.network.isolation !== "none") {
    const envs = await ctx.db.network.findMany({
      where: {
        serverId,
        scope: "environment",
        status: { in: LIVE_STATUSES },
        environment: { OR: [{ applications: { some: { serverId, ...PUBLIC_APP } } }, { services: { some: publicServiceWhere(serverId) } }] },
      },
      orderBy: { id: "asc" },
      select: { name: true },
    });
    names.push(...envs.map((e) => e.name));
    // The deployment's own environment network, recorded only when its job is written.
    if (
      planned &&
      !names.includes(planned.name) &&
      ((await ctx.db.application.count({ where: { serverId, environmentId: planned.environmentId, ...PUBLIC_APP } })) > 0 ||
        (await ctx.db.service.count({ where: { environmentId: planned.environmentId, ...publicServiceWhere(serverId) } })) > 0)
    ) {
      names.push(planned.name);
    }
  }
  return [...new Set(names)];
}

/** The environment network a deployment being prepared will ensure (not recorded yet). */
export interface PlannedEnvironmentNetwork {
  environmentId: number;
  name: string;
}

/**
 * A server that never ran anything the proxy routes to before proxy isolation applied to it
 * starts cleaned up: there is nothing to migrate, and internal resources must not share a
 * network with the proxy. Only finished application deployments count: migrating exists so
 * that containers the proxy already routes to keep being routed while they are redeployed,
 * and only an application (with an fqdn) is ever routed. Databases never are (they never
 * join the proxy network and carry no routing label), so a server that runs only databases
 * has nothing to migrate, and keeping its proxy on the old networks would put it on the
 * environment networks that hold them.
 */
async function isFreshServer(db: Db | Tx, serverId: number): Promise<boolean> {
  return (await db.deployment.count({ where: { serverId, status: "finished" } })) === 0;
}

/**
 * ProxySettings.networks and ensure_networks of a server. With `record`, the proxy network is
 * recorded as requested, and a fresh server's phase as cleaned (with proxy isolation off, the
 * phase is reset to none: clearProxyPhase); without, nothing is written
 * but the answer is the same (recordPlannedNetworks records it when the job is written).
 * `planned`: the environment network of the deployment these settings go with, which counts
 * as the server's although it is not recorded yet.
 */
export async function proxyNetworks(
  ctx: NetworkPlanContext,
  serverId: number,
  opts: { record?: boolean; planned?: PlannedEnvironmentNetwork } = {},
): Promise<{ networks: string[]; ensure_networks: NetworkSpec[] }> {
  const shared = await sharedProxyNetworks(ctx, serverId, opts.planned);
  const record = opts.record ?? true;
  if (!ctx.network.management || !ctx.network.proxyIsolation) {
    if (record) await clearProxyPhase(ctx.db, serverId);
    return { networks: shared, ensure_networks: [] };
  }
  const server = await ctx.db.server.findUniqueOrThrow({ where: { id: serverId }, select: { uuid: true, teamId: true } });
  let spec: NetworkSpec;
  if (record) {
    spec = specOf(await requestNetwork(ctx, { teamId: server.teamId, serverId, name: PROXY_NETWORK, scope: "proxy", exempt: true }));
  } else {
    const row = await ctx.db.network.findUnique({ where: { serverId_name: { serverId, name: PROXY_NETWORK } } });
    spec = specOf(row ?? { name: PROXY_NETWORK, driver: await serverDriver(ctx.db, serverId), encrypted: ctx.network.overlayEncryption, scope: "proxy" });
  }
  let phase = await proxyPhase(ctx.db, server.uuid);
  if (phase === "none" && (await isFreshServer(ctx.db, serverId))) {
    if (record) await setProxyPhase(ctx.db, server.uuid, "cleaned");
    phase = "cleaned";
  }
  const networks = phase === "cleaned" ? [PROXY_NETWORK] : [...shared.filter((n) => n !== PROXY_NETWORK), PROXY_NETWORK];
  return { networks, ensure_networks: [spec] };
}

/**
 * Attachments point at resources by type and id (no foreign key across resource tables):
 * whoever deletes a resource removes its attachments in the same transaction.
 */
export async function forgetAttachments(tx: Db | Tx, type: AttachableType, ids: number[]): Promise<void> {
  if (ids.length) await tx.networkAttachment.deleteMany({ where: { resourceType: type, resourceId: { in: ids } } });
}
