import {
  type EngineNetwork,
  LABEL_DOMAINS,
  LABEL_MANAGED,
  LABEL_NETWORK_SCOPE,
  LABEL_PROXY_NETWORK,
  LABEL_RESOURCE_UUID,
  type NetworkDriver,
  type NetworkResourceType,
  type NetworkScope,
  type ProxyIsolationState,
  isReservedNetworkName,
} from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import { wholeRows } from "../db/relations.js";
import type { Config } from "../config.js";
import type { Need, TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict, Unavailable } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import type { CancelledJob, JobQueue, JobRow } from "../jobs/queue.js";
import { ServerService } from "./servers.js";
import { foreignNetworkReason } from "./network-ownership.js";
import { withResourceCounts } from "./network-usage.js";
import {
  LIVE_STATUSES,
  NetworkLimitError,
  PROXY_NETWORK,
  assertBelowLimit,
  environmentUuidOf,
  lockServersNetworks,
  phaseOf,
  proxyPhase,
  publicApplicationWhere,
  requestNetwork,
  resourceNetworks,
  serverDriver,
  setProxyPhase,
  specOf,
  withServerNetworks,
  type AttachableType,
  type NetworkPlanContext,
} from "./network-plan.js";

type Tx = Prisma.TransactionClient;
type Window = { skip?: number; take?: number };

export type NetworkRow = Awaited<ReturnType<Db["network"]["findFirstOrThrow"]>>;
export type NetworkWithCount = NetworkRow & { _count: { attachments: number } };
/** A network as the API shows it: resourceCount is services/network-usage.ts's. */
export type NetworkView = NetworkWithCount & { resourceCount: number };

/** How long a request waits for the agent's answer (inspection, sync, migrate, cleanup steps). */
export const NETWORK_WAIT_MS = { inspect: 15_000, list: 30_000, ensure: 60_000, connect: 120_000 };
/** Jobs that change the server in the background wait this long for an agent that is away. */
const ENSURE_TIMEOUT_MS = 3600_000;
const REMOVE_TIMEOUT_MS = 24 * 3600_000;
/** Shared networks one resource may be attached to (a deploy payload carries at most 64 networks). */
export const MAX_ATTACHMENTS = 32;

const withCount = { _count: { select: { attachments: true } } } satisfies Prisma.NetworkInclude;
/** What a resource's networks depend on besides its environment: its destination's network. */
const withDestination = { destination: { select: { networkName: true } } } as const;

/** The engine's view of one network as GET /networks/{serverUuid}/{networkUuid} shows it. */
export function inspectionOf(n: EngineNetwork) {
  return {
    subnet: n.subnet,
    gateway: n.gateway,
    engine_scope: n.scope,
    internal: n.internal,
    encrypted: n.encrypted,
    labels: n.labels,
    containers: n.containers.map((c) => ({ name: c.name, ipv4: c.ipv4 ? c.ipv4.split("/")[0]! : null })).sort((a, b) => a.name.localeCompare(b.name)),
  };
}

/** A resource networks can be attached to, found in the caller's team with the needed permission. */
interface ResourceRef {
  type: AttachableType;
  id: number;
  name: string;
  teamId: number;
  serverId: number;
  environment: { id: number; uuid: string; projectId: number };
  destinationNetwork: string;
  isPublic: boolean;
}

/** A network attached to a resource, as GET /networks/resource/{type}/{uuid} shows it. */
export interface ResourceNetworkView {
  uuid: string | null;
  name: string;
  role: "primary" | "proxy" | "attached";
  scope: string | null;
  status: string | null;
  attachedAt: Date | null;
}

/**
 * Networks of a server (spec 4.8): records of what the platform created (environment, shared,
 * proxy) and found (system), kept in step with the engine through the agent's jobs and sync;
 * shared networks users attach to resources; the proxy isolation migration.
 */
export class NetworkService {
  private readonly ctx: NetworkPlanContext;

  constructor(
    private readonly db: Db,
    private readonly jobs: JobQueue,
    private readonly config: { network: Config["network"]; dialect: Config["database"]["kind"]; proxyName: string },
  ) {
    this.ctx = { db, network: config.network, dialect: config.dialect };
    jobs.onFinished("network.ensure", (job) => this.afterEnsure(job));
    jobs.onFinished("network.remove", (job) => this.afterRemove(job));
    // A deployment (or proxy sync) that succeeded created the networks it was asked to ensure.
    for (const type of ["app.deploy", "app.action", "db.deploy", "db.action"] as const) {
      jobs.onFinished(type, (job) => this.afterResourceJob(job));
    }
  }

  get settings(): Config["network"] {
    return this.config.network;
  }

  // -------------------------------------------------------------------------------------------
  // Lookup

  private async network(serverId: number, uuid: string): Promise<NetworkWithCount> {
    const row = await this.db.network.findFirst({ where: { uuid, serverId }, include: withCount });
    if (!row) throw new NotFound("Network");
    return row;
  }

  private requireAgent(server: { status: string; name: string }): void {
    if (!ServerService.agentConnected(server)) throw new Unavailable(`Server ${server.name} is unreachable: its agent is not connected.`);
  }

  private requireManagement(what: string): void {
    if (!this.config.network.management) {
      throw new Conflict(`Network management is disabled on this instance (PLATFORM_NETWORK_MANAGEMENT=false): ${what} is not possible.`);
    }
  }

  private requireProxyIsolation(): void {
    this.requireManagement("proxy isolation");
    if (!this.config.network.proxyIsolation) {
      throw new Conflict("Proxy isolation is not enabled on this instance: set PLATFORM_PROXY_ISOLATION=true or PLATFORM_NETWORK_ISOLATION_MODE=strict.");
    }
  }

  // -------------------------------------------------------------------------------------------
  // Reads

  /** Whether proxy isolation is in effect on the server: the instance's setting and the server's recorded phase. */
  async proxyIsolation(scope: TeamScope, serverUuid: string): Promise<ProxyIsolationState> {
    const server = await scope.server(serverUuid);
    return { enabled: this.config.network.proxyIsolation, phase: phaseOf(server.proxyIsolation) };
  }

  async count(scope: TeamScope, serverUuid: string): Promise<number> {
    const server = await scope.server(serverUuid);
    return this.db.network.count({ where: { serverId: server.id } });
  }

  /** A page of the server's networks by id, with the resources using each (a fixed number of statements per page). */
  async list(scope: TeamScope, serverUuid: string, window: Window): Promise<NetworkView[]> {
    const server = await scope.server(serverUuid);
    const rows = await this.db.network.findMany({ where: { serverId: server.id }, orderBy: { id: "asc" }, include: withCount, ...window });
    return withResourceCounts(this.db, this.config.network, server, rows);
  }

  /**
   * One network: the stored record, with what the engine reports about it now when the agent
   * answers (within NETWORK_WAIT_MS.inspect). Without the engine's view (agent away, inspection
   * failed, network not on the server) inspection is null and inspectionReason says why: the
   * record is still worth showing, so this is never a 503 (issue 15).
   */
  async detail(
    scope: TeamScope,
    serverUuid: string,
    networkUuid: string,
  ): Promise<{ network: NetworkView; inspection: ReturnType<typeof inspectionOf> | null; inspectionReason: string | null }> {
    const server = await scope.server(serverUuid);
    const [network] = await withResourceCounts(this.db, this.config.network, server, [await this.network(server.id, networkUuid)]);
    if (!network) throw new NotFound("Network");
    const without = (inspectionReason: string) => ({ network, inspection: null, inspectionReason });
    if (network.status === "deleted") {
      return without(network.deleting ? "Deletion requested: the server's agent has not confirmed the removal yet." : "The network is deleted: it is not on the server.");
    }
    if (!ServerService.agentConnected(server)) return without(`Server ${server.name} is unreachable: its agent is not connected, so this is the stored record only.`);
    const job = await this.jobs.run(server.id, "networks.list", { names: [network.name] }, NETWORK_WAIT_MS.inspect);
    if (job.status !== "succeeded") return without(`Inspecting network ${network.name} on server ${server.name} failed: ${job.error}`);
    // By id when the engine knows it (a name can be held twice on a swarm), else by name.
    const found =
      job.result.networks.find((n) => network.containerEngineId !== null && n.id === network.containerEngineId) ?? job.result.networks.find((n) => n.name === network.name);
    return found ? { network, inspection: inspectionOf(found), inspectionReason: null } : without("The network is not on the server.");
  }

  // -------------------------------------------------------------------------------------------
  // Shared networks

  /**
   * Records a shared network (pending) and asks the agent to create it, in one transaction under
   * the server's network lock: 409 for a name the server already has, 422 at the limit.
   */
  async createShared(scope: TeamScope, serverUuid: string, input: { name: string; driver?: NetworkDriver | undefined }): Promise<NetworkRow> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.requireManagement("creating shared networks");
    const facts = ServerService.facts(await this.db.server.findUniqueOrThrow({ where: { id: server.id }, select: { facts: true } }));
    const role = facts?.engine.swarm_role;
    if (input.driver === "overlay" && role && role !== "manager") {
      throw new Invalid({ driver: [`Overlay networks need a swarm manager; server ${server.name} is ${role === "inactive" ? "not in a swarm" : "a swarm worker"}. Use bridge.`] });
    }
    const driver: NetworkDriver = input.driver ?? (await serverDriver(this.db, server.id));
    const encrypted = driver === "overlay" && this.config.network.overlayEncryption;
    try {
      return await withServerNetworks(this.ctx, server.id, async (tx) => {
        const existing = await tx.network.findUnique({ where: { serverId_name: { serverId: server.id, name: input.name } } });
        if (existing && (LIVE_STATUSES.includes(existing.status) || existing.scope !== "shared")) {
          throw new Conflict(`Server ${server.name} already has a network named ${input.name} (scope ${existing.scope}, status ${existing.status}).`);
        }
        await assertBelowLimit(tx, this.config.network, server.id);
        // A deleted or failed shared network of that name gives way to the new one.
        if (existing) await tx.network.delete({ where: { id: existing.id } });
        const row = await tx.network.create({
          data: { uuid: newUuid(), teamId: server.teamId, serverId: server.id, name: input.name, scope: "shared", driver, encrypted, status: "pending" },
        });
        await this.jobs.enqueue(tx, server.id, "network.ensure", { networks: [specOf(row)] }, ENSURE_TIMEOUT_MS);
        return row;
      });
    } catch (err) {
      if (err instanceof NetworkLimitError) throw new Invalid({ name: [err.message] }, err.message);
      throw err;
    } finally {
      this.jobs.nudge(server.id);
    }
  }

  /**
   * Removes a shared network: attachments go, the record is marked deleted, and the agent
   * disconnects every container from it and removes it. Environment networks go with their
   * environment; one whose environment is gone already (left behind) is removed the same way.
   * The proxy network and system networks are not removed through the API (409).
   */
  async remove(scope: TeamScope, serverUuid: string, networkUuid: string): Promise<NetworkWithCount> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    const found = await this.network(server.id, networkUuid);
    const network = await withServerNetworks(this.ctx, server.id, async (tx) => {
      // Read again under the lock: a deployment or an environment deletion may have changed it.
      const row = await tx.network.findUniqueOrThrow({ where: { id: found.id }, include: withCount });
      const refusal: Record<string, string> = {
        environment: "it belongs to an environment and is removed when the environment is deleted",
        proxy: "it is the server's dedicated proxy network",
        system: "it was not created by the platform as a shared network (system network)",
      };
      const orphan = row.scope === "environment" && row.environmentId === null;
      if (refusal[row.scope] && !orphan) throw new Conflict(`Network ${row.name} cannot be deleted: ${refusal[row.scope]}.`);
      if (row.status === "deleted") throw new Conflict(`Network ${row.name} is already ${row.deleting ? "being deleted" : "deleted"}.`);
      await tx.networkAttachment.deleteMany({ where: { networkId: row.id } });
      // deleting: shown pending until the server confirms the removal (services/network-removal.ts).
      await tx.network.update({ where: { id: row.id }, data: { status: "deleted", deleting: true, reason: null } });
      await this.jobs.enqueue(tx, server.id, "network.remove", { name: row.name }, REMOVE_TIMEOUT_MS);
      return row;
    });
    this.jobs.nudge(server.id);
    return network;
  }

  // -------------------------------------------------------------------------------------------
  // Sync

  /**
   * Compares the records with the engine's networks: networks found without a record are
   * recorded (classify), records found are active with the engine's id, active records not
   * found are deleted, pending ones not found failed. The engine's answer describes the moment
   * it was listed: a record changed since (a create, a deployment, a delete committed while the
   * agent listed) is left as it is, and a deleted record whose removal is still queued or
   * running is not brought back. A shared record with a name reserved for the platform's own
   * networks is not a user's shared network (an earlier sync took a compose application's own
   * network for one): it becomes system and loses its attachments. An environment, shared or
   * proxy record found as a network the platform did not make (foreignNetworkReason) becomes
   * failed, never active: sync is no way around the agent's refusal to take such a network over.
   */
  async sync(scope: TeamScope, serverUuid: string) {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.requireAgent(server);
    const listedAt = new Date();
    const job = await this.jobs.run(server.id, "networks.list", {}, NETWORK_WAIT_MS.list);
    if (job.status !== "succeeded") throw new Unavailable(`Listing the networks of server ${server.name} failed: ${job.error}`);
    const engine = job.result.networks;
    const destinations = new Set((await this.db.destination.findMany({ where: { serverId: server.id }, select: { networkName: true } })).map((d) => d.networkName));
    const counts = { total: engine.length, discovered: 0, verified: 0, deleted: 0, failed: 0 };
    await withServerNetworks(this.ctx, server.id, async (tx) => {
      const rows = await tx.network.findMany({ where: { serverId: server.id } });
      const byName = new Map(rows.map((r) => [r.name, r]));
      const changedSince = (r: NetworkRow) => r.updatedAt.getTime() > listedAt.getTime();
      const removing = new Set(
        (await this.jobs.openJobs(tx, { serverIds: [server.id], types: ["network.remove"] })).map((j) => (j.payload as { name?: unknown } | null)?.name).filter((n) => typeof n === "string"),
      );
      const seen = new Set<string>();
      for (const n of engine) {
        if (seen.has(n.name)) continue; // a duplicate name (swarm): the first one stands for it
        seen.add(n.name);
        const row = byName.get(n.name);
        if (row) {
          const reclassify = row.scope === "shared" && isReservedNetworkName(row.name);
          const foreign = reclassify ? null : foreignNetworkReason(row, n);
          if (foreign === null) counts.verified++;
          if (changedSince(row) || (row.status === "deleted" && removing.has(row.name))) continue;
          if (reclassify) {
            // A platform name can never be a user's shared network (POST refuses it): an earlier sync took one for it.
            await tx.networkAttachment.deleteMany({ where: { networkId: row.id } });
            await tx.network.update({
              where: { id: row.id },
              data: { scope: "system", status: "active", containerEngineId: n.id, reason: "reclassified by sync: a platform network, not a shared one (it cannot be attached or deleted)" },
            });
          } else if (foreign !== null) {
            if (await this.refuseForeign(tx, row, foreign)) counts.failed++;
          } else if (row.status !== "active" || row.containerEngineId !== n.id || row.reason !== null) {
            await tx.network.update({ where: { id: row.id }, data: { status: "active", containerEngineId: n.id, reason: null } });
          }
          continue;
        }
        const found = await this.classify(tx, server, n, destinations);
        await tx.network.create({
          data: {
            uuid: newUuid(),
            teamId: server.teamId,
            serverId: server.id,
            name: n.name,
            scope: found.scope,
            environmentId: found.environmentId,
            driver: n.driver,
            encrypted: n.encrypted,
            isProxyNetwork: found.scope === "proxy",
            status: "active",
            containerEngineId: n.id,
          },
        });
        counts.discovered++;
      }
      for (const row of rows) {
        if (seen.has(row.name) || changedSince(row)) continue;
        if (row.status === "active") {
          await tx.network.update({ where: { id: row.id }, data: { status: "deleted", reason: "not found on the server by sync" } });
          counts.deleted++;
        } else if (row.status === "pending") {
          await tx.network.update({ where: { id: row.id }, data: { status: "failed", reason: "creation was requested but the network is not on the server (sync)" } });
          counts.failed++;
        }
      }
    });
    return counts;
  }

  /**
   * A platform record whose name a network not made by the platform holds on the engine: never
   * active (it would be attached and joined as the platform's), failed with the reason instead.
   * A deleted record stays deleted: the platform's network of that name is gone, which is what
   * it says. The engine's id is dropped, as it is not this record's network. True when the
   * record became failed here.
   */
  private async refuseForeign(tx: Tx, row: NetworkRow, reason: string): Promise<boolean> {
    if (row.status === "deleted") return false;
    if (row.status === "failed" && row.reason === reason && row.containerEngineId === null) return false;
    await tx.network.update({ where: { id: row.id }, data: { status: "failed", reason, containerEngineId: null } });
    return row.status !== "failed";
  }

  /**
   * The scope of a network found on the engine without a record. Only what the platform
   * labelled for a scope gets it: shared needs capstan.network.scope=shared (a user's shared
   * network); an environment network needs its label and an environment of the team. Every
   * other network is system, among them the platform's own that are not users' (the
   * destination network, a compose application's network capstan-<app uuid>, which carries
   * capstan.managed=true but no scope): system networks cannot be attached or deleted.
   */
  private async classify(tx: Tx, server: { teamId: number }, n: EngineNetwork, destinations: Set<string>): Promise<{ scope: NetworkScope; environmentId: number | null }> {
    const platform = n.labels[LABEL_MANAGED] === "true";
    const scope = n.labels[LABEL_NETWORK_SCOPE];
    if (!platform || destinations.has(n.name)) return { scope: "system", environmentId: null };
    // Labelled as verification (foreignNetworkReason) expects, so the next sync keeps it active.
    if (n.name === PROXY_NETWORK && scope === "proxy") return { scope: "proxy", environmentId: null };
    const envUuid = environmentUuidOf(n.name);
    if (envUuid && scope === "environment") {
      const env = await tx.environment.findFirst({ where: { uuid: envUuid, project: { teamId: server.teamId } }, select: { id: true } });
      if (env) return { scope: "environment", environmentId: env.id };
    }
    if (scope === "shared") return { scope: "shared", environmentId: null };
    return { scope: "system", environmentId: null };
  }

  // -------------------------------------------------------------------------------------------
  // Proxy isolation

  /**
   * Creates the dedicated proxy network and connects the proxy and every container of an
   * application with an fqdn to it, so nothing stops being routed while resources are
   * redeployed (each redeploy labels its container with the proxy network).
   */
  async migrateProxy(scope: TeamScope, serverUuid: string): Promise<{ network: NetworkRow; connected: string[] }> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.requireProxyIsolation();
    this.requireAgent(server);
    const network = await requestNetwork(this.ctx, { teamId: server.teamId, serverId: server.id, name: PROXY_NETWORK, scope: "proxy", exempt: true });
    const ensured = await this.jobs.run(server.id, "network.ensure", { networks: [specOf(network)] }, NETWORK_WAIT_MS.ensure);
    if (ensured.status !== "succeeded") throw new Unavailable(`Creating the proxy network on server ${server.name} failed: ${ensured.error}`);

    const containers = [this.config.proxyName, ...(await this.publicContainers(server.id)).map((c) => c.name)];
    const connected = await this.jobs.run(server.id, "network.connect", { network: PROXY_NETWORK, containers, disconnect: false }, NETWORK_WAIT_MS.connect);
    if (connected.status !== "succeeded") throw new Unavailable(`Connecting containers to the proxy network on server ${server.name} failed: ${connected.error}`);
    if ((await proxyPhase(this.db, server.uuid)) !== "cleaned") await setProxyPhase(this.db, server.uuid, "migrated");
    const fresh = await this.db.network.findUniqueOrThrow({ where: { id: network.id } });
    return { network: fresh, connected: connected.result.changed };
  }

  /**
   * Disconnects the proxy from every network but the proxy network; from then on the proxy
   * joins only that one. Refused before migrate, and while a routed container still names
   * one of the networks the proxy would leave (it has not been redeployed since migrate).
   */
  async cleanupProxy(scope: TeamScope, serverUuid: string): Promise<{ disconnectedFrom: string[] }> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.requireProxyIsolation();
    if ((await proxyPhase(this.db, server.uuid)) === "none") {
      throw new Conflict(`Proxy isolation has not been migrated on server ${server.name}: run POST /networks/${server.uuid}/proxy/migrate, redeploy every resource, then clean up.`);
    }
    this.requireAgent(server);
    // Every network the proxy may have joined before: the destinations' and all environment networks.
    const [destinations, envNetworks] = await Promise.all([
      this.db.destination.findMany({ where: { serverId: server.id }, orderBy: { id: "asc" }, select: { networkName: true } }),
      this.db.network.findMany({ where: { serverId: server.id, scope: "environment", status: { in: LIVE_STATUSES } }, orderBy: { id: "asc" }, select: { name: true } }),
    ]);
    const leaving = [...new Set([...destinations.map((d) => d.networkName), ...envNetworks.map((n) => n.name)])].filter((n) => n !== PROXY_NETWORK);
    const stale = (await this.publicContainers(server.id)).filter((c) => leaving.includes(c.labels[LABEL_PROXY_NETWORK] ?? ""));
    if (stale.length) {
      const names = stale.slice(0, 10).map((c) => c.name);
      throw new Conflict(
        `${stale.length} routed container(s) on server ${server.name} still use a network the proxy would leave; redeploy their resources first: ${names.join(", ")}${stale.length > names.length ? ", ..." : ""}.`,
      );
    }
    // The phase first: every payload built from now on puts the proxy on the proxy network
    // only, so no deployment started during the disconnects brings it back onto a network it
    // just left. One built before and run after is caught when its job ends (afterResourceJob).
    // A failed disconnect leaves the phase cleaned: the next proxy sync leaves the rest, and
    // cleanup may be run again.
    await setProxyPhase(this.db, server.uuid, "cleaned");
    const disconnectedFrom: string[] = [];
    for (const network of leaving) {
      const job = await this.jobs.run(server.id, "network.connect", { network, containers: [this.config.proxyName], disconnect: true }, NETWORK_WAIT_MS.connect);
      if (job.status !== "succeeded") throw new Unavailable(`Disconnecting the proxy from network ${network} on server ${server.name} failed: ${job.error}`);
      if (job.result.changed.length) disconnectedFrom.push(network);
    }
    return { disconnectedFrom };
  }

  /** Containers on the server serving an application with an fqdn (the proxy's targets), from the engine now. */
  private async publicContainers(serverId: number) {
    const apps = await this.db.application.findMany({ where: { serverId, ...publicApplicationWhere }, select: { uuid: true } });
    if (!apps.length) return [];
    const uuids = new Set(apps.map((a) => a.uuid));
    const job = await this.jobs.run(serverId, "containers.list", {}, NETWORK_WAIT_MS.list);
    if (job.status !== "succeeded") throw new Unavailable(`Listing the server's containers failed: ${job.error}`);
    // A compose application's internal services carry an empty domains label: not routed.
    return job.result.containers.filter((c) => uuids.has(c.labels[LABEL_RESOURCE_UUID] ?? "") && (c.labels[LABEL_DOMAINS] ?? "") !== "");
  }

  // -------------------------------------------------------------------------------------------
  // Resources

  /** The resource in the caller's team with `need` on its environment; services do not exist yet. */
  private async resource(scope: TeamScope, type: NetworkResourceType, uuid: string, need: Need): Promise<ResourceRef> {
    if (type === "service") throw new NotFound("Service", "Services are not available on this instance yet, so no service has networks.");
    if (type === "application") {
      const app = await scope.application(uuid, need, withDestination);
      return {
        type,
        id: app.id,
        name: app.name,
        teamId: app.teamId,
        serverId: app.serverId,
        environment: app.environment,
        destinationNetwork: app.destination.networkName,
        isPublic: !!app.fqdn,
      };
    }
    const db = await scope.database(uuid, need, withDestination);
    return { type, id: db.id, name: db.name, teamId: db.teamId, serverId: db.serverId, environment: db.environment, destinationNetwork: db.destination.networkName, isPublic: false };
  }

  /**
   * The networks the resource joins on its next deployment (primary, proxy) and the shared
   * networks attached to it (all of them, whatever their status).
   */
  async resourceNetworks(scope: TeamScope, type: NetworkResourceType, uuid: string): Promise<ResourceNetworkView[]> {
    const r = await this.resource(scope, type, uuid, "view");
    const plan = await resourceNetworks(
      this.ctx,
      { teamId: r.teamId, serverId: r.serverId, environment: r.environment, destinationNetwork: r.destinationNetwork, resource: { type: r.type, id: r.id }, isPublic: r.isPublic },
      { record: false },
    );
    const names = [plan.network, ...(plan.proxy_network ? [plan.proxy_network] : [])];
    const rows = new Map((await this.db.network.findMany({ where: { serverId: r.serverId, name: { in: names } } })).map((n) => [n.name, n]));
    const view = (name: string, role: ResourceNetworkView["role"]): ResourceNetworkView => {
      const row = rows.get(name);
      return { uuid: row?.uuid ?? null, name, role, scope: row?.scope ?? null, status: row?.status ?? null, attachedAt: null };
    };
    const out = [view(plan.network, "primary")];
    if (plan.proxy_network) out.push(view(plan.proxy_network, "proxy"));
    const attachments = await this.db.networkAttachment.findMany({
      where: { resourceType: r.type, resourceId: r.id },
      orderBy: { id: "asc" },
      include: { network: { select: { uuid: true, name: true, scope: true, status: true } } },
    });
    // An attachment read without its network went with the network meanwhile (db/relations.ts).
    for (const a of wholeRows(attachments, ["network"])) out.push({ uuid: a.network.uuid, name: a.network.name, role: "attached", scope: a.network.scope, status: a.network.status, attachedAt: a.createdAt });
    return out;
  }

  /** Attaches a shared network of the resource's server; it joins it on its next deployment. */
  async attach(scope: TeamScope, type: NetworkResourceType, uuid: string, networkUuid: string): Promise<{ resource: ResourceRef; network: NetworkRow }> {
    const r = await this.resource(scope, type, uuid, "manage");
    const network = await scope.network(networkUuid);
    this.requireManagement("attaching networks");
    if (network.serverId !== r.serverId) throw new Invalid({ network_uuid: [`Network ${network.name} is on another server than the ${r.type}.`] });
    if (network.scope !== "shared") throw new Invalid({ network_uuid: [`Only shared networks can be attached; ${network.name} is a ${network.scope} network.`] });
    if (!LIVE_STATUSES.includes(network.status)) throw new Invalid({ network_uuid: [`Network ${network.name} is ${network.status}; create it again first.`] });
    // The count and the insert are one step under the server's network lock (a resource's
    // networks are all on its server), so concurrent attaches cannot pass the cap together.
    await withServerNetworks(this.ctx, r.serverId, async (tx) => {
      const already = await tx.networkAttachment.findFirst({ where: { networkId: network.id, resourceType: r.type, resourceId: r.id }, select: { id: true } });
      if (already) throw new Conflict(`Network ${network.name} is already attached to this ${r.type}.`);
      const existing = await tx.networkAttachment.count({ where: { resourceType: r.type, resourceId: r.id } });
      if (existing >= MAX_ATTACHMENTS) throw new Invalid({ network_uuid: [`A resource can be attached to at most ${MAX_ATTACHMENTS} networks.`] });
      // Deleted meanwhile (DELETE takes the same lock): nothing to attach to.
      const live = await tx.network.findUnique({ where: { id: network.id }, select: { status: true } });
      if (!live || !LIVE_STATUSES.includes(live.status)) throw new Invalid({ network_uuid: [`Network ${network.name} is ${live?.status ?? "deleted"}; create it again first.`] });
      await tx.networkAttachment.create({ data: { networkId: network.id, resourceType: r.type, resourceId: r.id } });
    });
    return { resource: r, network };
  }

  async detach(scope: TeamScope, type: NetworkResourceType, uuid: string, networkUuid: string): Promise<{ resource: ResourceRef; network: NetworkRow }> {
    const r = await this.resource(scope, type, uuid, "manage");
    const network = await scope.network(networkUuid);
    const removed = await this.db.networkAttachment.deleteMany({ where: { networkId: network.id, resourceType: r.type, resourceId: r.id } });
    if (removed.count === 0) throw new NotFound(`Attachment of network ${network.name} to this ${r.type}`);
    return { resource: r, network };
  }

  // -------------------------------------------------------------------------------------------
  // Environments

  /**
   * Removal of the networks of environments being deleted, in the caller's transaction:
   * lock() first (the network locks of every server of the team, so a deployment cannot record
   * the environment's first network on any of them unseen until the transaction ends), then
   * enqueue() after the resources' removal jobs reads the records under those locks, marks
   * them deleted and writes a network.remove for each (the agent's network.remove disconnects
   * whatever is still attached first, so the order in which the agent runs them does not
   * matter), then kick() delivers them.
   */
  async planEnvironmentRemoval(teamId: number, environmentIds: number[]): Promise<{ lock(tx: Tx): Promise<void>; enqueue(tx: Tx): Promise<void>; kick(): void }> {
    const servers = new Set<number>();
    const cancelled: CancelledJob[] = [];
    return {
      lock: async (tx) => {
        const rows = await tx.server.findMany({ where: { teamId }, select: { id: true } });
        await lockServersNetworks(tx, this.config.dialect, rows.map((r) => r.id));
      },
      enqueue: async (tx) => {
        if (!environmentIds.length) return;
        const rows = await tx.network.findMany({
          where: { environmentId: { in: environmentIds }, scope: "environment", status: { not: "deleted" } },
          orderBy: { id: "asc" },
          select: { id: true, name: true, serverId: true },
        });
        // A verification (network.ensure) of these networks still queued or running goes too.
        const names = new Set(rows.map((n) => n.name));
        cancelled.push(
          ...(await this.jobs.cancelWithin(
            tx,
            { serverIds: [...new Set(rows.map((n) => n.serverId))], types: ["network.ensure"] },
            (payload) => ((payload as { networks?: { name?: unknown }[] } | null)?.networks ?? []).some((n) => typeof n?.name === "string" && names.has(n.name)),
            "cancelled: the environment of the network was deleted",
          )),
        );
        for (const n of rows) {
          await tx.network.update({ where: { id: n.id }, data: { status: "deleted", deleting: true, reason: null } });
          await this.jobs.enqueue(tx, n.serverId, "network.remove", { name: n.name }, REMOVE_TIMEOUT_MS);
          servers.add(n.serverId);
        }
      },
      kick: () => {
        // The agents hear of the cancels before the removals are delivered.
        void this.jobs.cancelled(cancelled).catch(() => {});
        for (const serverId of servers) this.jobs.nudge(serverId);
      },
    };
  }

  // -------------------------------------------------------------------------------------------
  // Job outcomes

  private payloadOf(job: JobRow): Record<string, unknown> | null {
    try {
      const p = JSON.parse(job.payload) as unknown;
      return typeof p === "object" && p !== null ? (p as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }

  private async afterEnsure(job: JobRow): Promise<void> {
    const names = ((this.payloadOf(job)?.networks as { name?: unknown }[] | undefined) ?? []).map((n) => n.name).filter((n): n is string => typeof n === "string");
    if (job.status === "succeeded") {
      const result = JSON.parse(job.result ?? "null") as { networks?: EngineNetwork[] } | null;
      for (const n of result?.networks ?? []) {
        await this.db.network.updateMany({
          where: { serverId: job.serverId, name: n.name, status: { in: ["pending", "failed", "active"] } },
          data: { status: "active", containerEngineId: n.id, reason: null },
        });
      }
      return;
    }
    if (!names.length) return;
    await this.db.network.updateMany({
      where: { serverId: job.serverId, name: { in: names }, status: "pending" },
      data: { status: "failed", reason: (job.error ?? "creation failed").slice(0, 1000) },
    });
  }

  private async afterRemove(job: JobRow): Promise<void> {
    if (job.status === "succeeded") return;
    const name = this.payloadOf(job)?.name;
    if (typeof name !== "string") return;
    // Still marked deleted (not created again since): the network may still be on the server.
    await this.db.network.updateMany({
      where: { serverId: job.serverId, name, status: "deleted" },
      data: { status: "failed", reason: `removal failed: ${job.error ?? "no reason"}`.slice(0, 1000) },
    });
  }

  /**
   * A deployment (or an action's proxy sync) ended. Succeeded: it created what it was asked to
   * ensure, and those records are active. Failed or cancelled: it may not have, and the records
   * still pending are verified by a network.ensure of their own (active or failed when it
   * ends), so that none stays pending without a job. Either way, a proxy sync built before the
   * server's proxy was cleaned up is undone (proxyLeftovers).
   */
  private async afterResourceJob(job: JobRow): Promise<void> {
    const p = this.payloadOf(job);
    if (!p) return;
    const lists = [(p.run as { ensure_networks?: unknown } | undefined)?.ensure_networks, p.ensure_networks, (p.proxy as { ensure_networks?: unknown } | undefined)?.ensure_networks];
    const names = [
      ...new Set(
        lists
          .flatMap((l) => (Array.isArray(l) ? l : []))
          .map((n: { name?: unknown }) => n?.name)
          .filter((n): n is string => typeof n === "string"),
      ),
    ];
    if (names.length && job.status === "succeeded") {
      await this.db.network.updateMany({ where: { serverId: job.serverId, name: { in: names }, status: { in: ["pending", "failed"] } }, data: { status: "active", reason: null } });
    } else if (names.length) {
      const pending = await this.db.network.findMany({ where: { serverId: job.serverId, name: { in: names }, status: "pending" }, orderBy: { id: "asc" } });
      if (pending.length) {
        await this.jobs.enqueue(this.db, job.serverId, "network.ensure", { networks: pending.map(specOf) }, ENSURE_TIMEOUT_MS);
        this.jobs.nudge(job.serverId);
      }
    }
    await this.proxyLeftovers(job.serverId, p);
  }

  /**
   * A job whose proxy settings were built before the server's proxy was cleaned up (the phase
   * changed while it was queued or running) may have put the proxy back on networks cleanup
   * took it off: once the server is cleaned, the proxy is taken off them again.
   */
  private async proxyLeftovers(serverId: number, p: Record<string, unknown>): Promise<void> {
    if (!this.config.network.management || !this.config.network.proxyIsolation) return;
    const listed = (p.proxy as { networks?: unknown } | undefined)?.networks;
    const stale = (Array.isArray(listed) ? listed : []).filter((n): n is string => typeof n === "string" && n !== PROXY_NETWORK);
    if (!stale.length) return;
    const server = await this.db.server.findUnique({ where: { id: serverId }, select: { uuid: true } });
    if (!server || (await proxyPhase(this.db, server.uuid)) !== "cleaned") return;
    await this.db.$transaction(async (tx) => {
      for (const network of stale) {
        await this.jobs.enqueue(tx, serverId, "network.connect", { network, containers: [this.config.proxyName], disconnect: true }, ENSURE_TIMEOUT_MS);
      }
    });
    this.jobs.nudge(serverId);
  }
}
