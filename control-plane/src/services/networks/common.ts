import type { EngineNetwork } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import type { Config } from "../../config.js";
import { NotFound, Conflict, Unavailable } from "../../domain/errors.js";
import type { JobQueue } from "../../jobs/queue.js";
import { ServerService } from "../servers.js";
import type { AttachableType, NetworkPlanContext } from "../network-plan.js";

export type Tx = Prisma.TransactionClient;
export type Window = { skip?: number; take?: number };

export type NetworkRow = Awaited<ReturnType<Db["network"]["findFirstOrThrow"]>>;
export type NetworkWithCount = NetworkRow & { _count: { attachments: number } };
/** A network as the API shows it: resourceCount is services/network-usage.ts's. */
export type NetworkView = NetworkWithCount & { resourceCount: number };

/** How long a request waits for the agent's answer (inspection, sync, migrate, cleanup steps). */
export const NETWORK_WAIT_MS = { inspect: 15_000, list: 30_000, ensure: 60_000, connect: 120_000 };
/** Jobs that change the server in the background wait this long for an agent that is away. */
export const ENSURE_TIMEOUT_MS = 3600_000;
export const REMOVE_TIMEOUT_MS = 24 * 3600_000;
/** Shared networks one resource may be attached to (a deploy payload carries at most 64 networks). */
export const MAX_ATTACHMENTS = 32;

export const withCount = { _count: { select: { attachments: true } } } satisfies Prisma.NetworkInclude;
/** What a resource's networks depend on besides its environment: its destination's network. */
export const withDestination = { destination: { select: { networkName: true } } } as const;

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
export interface ResourceRef {
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

/**
 * What every part of the network service shares: the database, the job queue, the instance's
 * network settings, and the lookups and guards below.
 */
export class NetworkBase {
  readonly ctx: NetworkPlanContext;

  constructor(
    readonly db: Db,
    readonly jobs: JobQueue,
    readonly config: { network: Config["network"]; dialect: Config["database"]["kind"]; proxyName: string },
  ) {
    this.ctx = { db, network: config.network, dialect: config.dialect };
  }

  async network(serverId: number, uuid: string): Promise<NetworkWithCount> {
    const row = await this.db.network.findFirst({ where: { uuid, serverId }, include: withCount });
    if (!row) throw new NotFound("Network");
    return row;
  }

  requireAgent(server: { status: string; name: string }): void {
    if (!ServerService.agentConnected(server)) throw new Unavailable(`Server ${server.name} is unreachable: its agent is not connected.`);
  }

  requireManagement(what: string): void {
    if (!this.config.network.management) {
      throw new Conflict(`Network management is disabled on this instance (PLATFORM_NETWORK_MANAGEMENT=false): ${what} is not possible.`);
    }
  }

  requireProxyIsolation(): void {
    this.requireManagement("proxy isolation");
    if (!this.config.network.proxyIsolation) {
      throw new Conflict("Proxy isolation is not enabled on this instance: set PLATFORM_PROXY_ISOLATION=true or PLATFORM_NETWORK_ISOLATION_MODE=strict.");
    }
  }
}
