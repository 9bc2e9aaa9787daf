import { z } from "zod";
import { DockerName } from "../protocol/names.js";
import { NetworkDriver } from "../protocol/networks.js";
import { Timestamp, Uuid, listOf, resourceId, requestBody } from "./common.js";

/** Spec section 2, Network.scope. */
export const NETWORK_SCOPES = ["environment", "shared", "proxy", "system"] as const;
export const NetworkScope = z.enum(NETWORK_SCOPES);
export type NetworkScope = z.infer<typeof NetworkScope>;

/** Spec section 3, network status. */
export const NETWORK_STATUSES = ["active", "pending", "failed", "deleted"] as const;
export const NetworkStatus = z.enum(NETWORK_STATUSES);
export type NetworkStatus = z.infer<typeof NetworkStatus>;

/** Kinds of resources a network can be attached to (GET/POST/DELETE /networks/resource/{type}/...). */
export const NETWORK_RESOURCE_TYPES = ["application", "service", "database"] as const;
export const NetworkResourceType = z.enum(NETWORK_RESOURCE_TYPES);
export type NetworkResourceType = z.infer<typeof NetworkResourceType>;

/** Names the platform gives its own networks (capstan, capstan-env-*, capstan-proxy-net, a compose application's capstan-<uuid>): never a user's shared network. */
export const isReservedNetworkName = (name: string): boolean => /^capstan([-_.]|$)/i.test(name);

/**
 * Name of a shared network on the host: a Docker network name that cannot be mistaken for one
 * the platform names itself (capstan-*) or for the engine's own (bridge, host, none).
 */
export const SharedNetworkName = z
  .string()
  .trim()
  .min(1, "This field is required.")
  .max(64, "Use at most 64 characters.")
  .pipe(DockerName)
  .refine((v) => !isReservedNetworkName(v), "Names starting with capstan are reserved for the platform's own networks.")
  .refine((v) => !["bridge", "host", "none", "ingress", "docker_gwbridge"].includes(v.toLowerCase()), "This name belongs to the container engine.");

/** Request bodies are strict objects: a misspelt field is a 422 naming it, not silently ignored. */
export const CreateNetworkBody = requestBody(
  {
    name: SharedNetworkName,
    /** bridge on standalone servers, overlay on swarm managers; detected from the server's facts when omitted. */
    driver: NetworkDriver.optional(),
  },
);

export const Network = z
  .object({
    uuid: z.string(),
    container_network_name: z.string(),
    scope: NetworkScope,
    /** bridge or overlay; a discovered system network shows the engine's driver (host, null, macvlan...). */
    driver: z.string(),
    /** pending also while a requested deletion waits for the server to confirm it (deleting true). */
    status: NetworkStatus,
    /**
     * Deletion requested (DELETE, or its environment's deletion) and not yet confirmed by the
     * server: status stays pending until the agent removed it, then deleted (failed with the
     * reason if it could not).
     */
    deleting: z.boolean(),
    server_id: z.number().int(),
    /** Set for environment-scoped networks, null otherwise. */
    environment_id: z.number().int().nullable(),
    container_engine_id: z.string().nullable(),
    is_proxy_network: z.boolean(),
    /**
     * The team's resources (applications and databases) using the network under the settings in
     * effect: an environment network's are its environment's resources on the server (while
     * resources are placed on environment networks); the proxy network's, the applications with
     * an fqdn on the server (while proxy isolation is on); a shared network's, the resources
     * attached to it. 0 for system networks.
     */
    resource_count: z.number().int(),
    encrypted: z.boolean(),
    /** Why the last creation, removal or verification failed; null otherwise. */
    reason: z.string().nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "Network" });
export type Network = z.infer<typeof Network>;

/** What the engine reports about a network now (GET /networks/{serverUuid}/{networkUuid}). */
export const NetworkInspection = z
  .object({
    /** IPv4 subnet (CIDR) of the network's first IPAM pool; null when the engine reports none. */
    subnet: z.string().nullable(),
    gateway: z.string().nullable(),
    /** Engine scope: local (bridge) or swarm (overlay). */
    engine_scope: z.string(),
    internal: z.boolean(),
    encrypted: z.boolean(),
    labels: z.record(z.string(), z.string()),
    /** Containers connected now: name and IPv4 address on this network (without prefix length). */
    containers: z.array(z.object({ name: z.string(), ipv4: z.string().nullable() })),
  })
  .meta({ id: "NetworkInspection" });

export const NetworkDetail = Network.extend({
  /**
   * null when the engine's view is not available: the network is not on the server (deleted, or
   * not created yet), or the server's agent is not connected or did not answer. The stored
   * record is shown either way; inspection_reason says why.
   */
  inspection: NetworkInspection.nullable(),
  /** Why inspection is null (null when it is there). */
  inspection_reason: z.string().nullable(),
}).meta({ id: "NetworkDetail" });

export const CreatedNetwork = z.object({
  message: z.string(),
  data: z.object({ uuid: z.string(), container_network_name: z.string(), scope: z.literal("shared"), driver: NetworkDriver, status: NetworkStatus }),
});

export const NetworkSyncResult = z
  .object({
    message: z.string(),
    data: z.object({
      /** Networks on the engine now. */
      total: z.number().int(),
      /** Found on the engine without a record: recorded (system, or shared when made by the platform). */
      discovered: z.number().int(),
      /** Records confirmed present: active, with the engine's id (system records, and platform records found as the platform's network). */
      verified: z.number().int(),
      /** Active records whose network is gone: deleted. */
      deleted: z.number().int(),
      /** Records marked failed: pending ones whose network never appeared, and platform records whose name a network the platform did not make holds. */
      failed: z.number().int(),
    }),
  })
  .meta({ id: "NetworkSyncResult" });

export const ProxyMigrateResult = z
  .object({
    message: z.string(),
    data: z.object({
      network_uuid: z.string(),
      container_network_name: z.string(),
      /** Containers (proxy and public resources) connected to the proxy network by this call. */
      connected: z.array(z.string()),
    }),
  })
  .meta({ id: "ProxyMigrateResult" });

export const ProxyCleanupResult = z
  .object({
    message: z.string(),
    data: z.object({
      /** Networks the proxy left. */
      disconnected_from: z.array(z.string()),
    }),
  })
  .meta({ id: "ProxyCleanupResult" });

/** A network a resource joins (GET /networks/resource/{type}/{uuid}). */
export const ResourceNetwork = z
  .object({
    /** The network's record; null for a destination network the platform has not recorded (run sync). */
    uuid: z.string().nullable(),
    container_network_name: z.string(),
    /**
     * primary: the network the resource is created on (its environment's, or the destination's);
     * proxy: the dedicated proxy network (public resources under proxy isolation);
     * attached: a shared network attached by a user.
     */
    role: z.enum(["primary", "proxy", "attached"]),
    scope: NetworkScope.nullable(),
    status: NetworkStatus.nullable(),
    /** attached only: when it was attached (it takes effect on the next deployment). */
    attached_at: Timestamp.nullable(),
  })
  .meta({ id: "ResourceNetwork" });

export const AttachNetworkBody = requestBody({ network_uuid: Uuid });

export const NetworkServerParams = z.object({ serverUuid: resourceId("server", Uuid) });
export const NetworkParams = NetworkServerParams.extend({ networkUuid: resourceId("network", Uuid) });
export const NetworkResourceParams = z.object({
  type: resourceId("resource_type", NetworkResourceType),
  uuid: resourceId("network_resource", Uuid),
});
export const NetworkResourceItemParams = NetworkResourceParams.extend({ networkUuid: resourceId("network", Uuid) });

/** Spec section 1, rule 5: where a server's proxy stands with proxy isolation (docs/networks.md). */
export const PROXY_ISOLATION_PHASES = ["none", "migrated", "cleaned"] as const;
export const ProxyIsolationPhase = z.enum(PROXY_ISOLATION_PHASES);
export type ProxyIsolationPhase = z.infer<typeof ProxyIsolationPhase>;

/** Whether proxy isolation is in effect on a server (GET /networks/{serverUuid}, beside data). */
export const ProxyIsolationState = z
  .object({
    /** The instance's setting as it applies to this server: PLATFORM_PROXY_ISOLATION, or strict mode, with network management on. */
    enabled: z.boolean(),
    /**
     * none: never migrated (the proxy keeps its old networks next to the proxy network);
     * migrated: proxy/migrate ran; cleaned: proxy/cleanup ran, or the server ran no application
     * when isolation first applied to it (the proxy is on the proxy network only). A
     * deployment or proxy sync while enabled is false resets it to none.
     */
    phase: ProxyIsolationPhase,
  })
  .meta({ id: "ProxyIsolationState" });
export type ProxyIsolationState = z.infer<typeof ProxyIsolationState>;

export const NetworkList = listOf(Network).extend({ proxy_isolation: ProxyIsolationState });
export const ResourceNetworkList = listOf(ResourceNetwork);
