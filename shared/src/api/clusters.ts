import { z } from "zod";
import { PaginationQuery, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";
import { multiline } from "../validation/text.js";
import { SWARM_RESERVED_LABEL_PREFIX, SWARM_STORE_MAX_BYTES, SwarmLabelKey, SwarmLabels, SwarmObjectId, SwarmStoreName, utf8Bytes } from "../protocol/swarm.js";

/**
 * Clusters (spec 4.12, issue 20, docs/clusters.md): Docker Swarms whose nodes are the team's
 * servers, found by POST /clusters/detect and managed through the agents of their managers.
 */

export const CLUSTER_STATUSES = ["healthy", "degraded", "unreachable"] as const;

export const ClusterServerRef = z
  .object({
    uuid: z.string(),
    name: z.string(),
    node_id: z.string(),
    role: z.enum(["manager", "worker"]).nullable().meta({ description: "The node's role as last listed; null when the node is not in the last list" }),
    reachable: z.boolean().meta({ description: "Whether the server's agent is connected" }),
  })
  .meta({ id: "ClusterServer" });

export const Cluster = z
  .object({
    uuid: z.string(),
    name: z.string(),
    orchestrator_id: z.string().meta({ description: "The swarm's id as the engine reports it (GET /swarm)" }),
    status: z.enum(CLUSTER_STATUSES).meta({
      description: "unreachable: no manager server's agent is connected; degraded: a node is not ready, a manager is not reachable in the swarm, or a node's server agent is not connected; healthy otherwise. Computed when read.",
    }),
    status_reason: z.string().nullable(),
    manager_count: z.number().int(),
    worker_count: z.number().int(),
    node_count: z.number().int(),
    servers: z.array(ClusterServerRef),
    nodes_updated_at: Timestamp.nullable().meta({ description: "When a manager last listed the nodes" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "Cluster" });
export type Cluster = z.infer<typeof Cluster>;
export const ClusterList = listOf(Cluster);

export const DetectedCluster = z
  .object({ uuid: z.string(), name: z.string(), orchestrator_id: z.string(), manager_count: z.number().int(), worker_count: z.number().int() })
  .meta({ id: "DetectedCluster" });
export const DetectClustersResult = z.object({ message: z.string(), clusters_found: z.number().int(), data: z.array(DetectedCluster) }).meta({ id: "DetectClustersResult" });

export const ClusterNode = z
  .object({
    id: z.string(),
    hostname: z.string(),
    role: z.enum(["manager", "worker"]),
    status: z.string().meta({ description: "ready | down | unknown | disconnected" }),
    availability: z.enum(["active", "pause", "drain"]),
    engine_version: z.string().nullable(),
    ip: z.string().nullable(),
    labels: z.record(z.string(), z.string()),
    leader: z.boolean(),
    reachability: z.string().nullable().meta({ description: "Managers: reachable | unreachable | unknown; null on workers" }),
    version: z.number().int().meta({ description: "The node object's version index" }),
    server_uuid: z.string().nullable().meta({ description: "The team's server that is this node, when detect linked one" }),
  })
  .meta({ id: "ClusterNode" });
export type ClusterNode = z.infer<typeof ClusterNode>;
export const ClusterNodeList = z.object({ data: z.array(ClusterNode), refreshed: z.boolean().meta({ description: "false: no manager answered; the list is the last one stored" }) });
export const ClusterNodeMutation = z.object({ message: z.string(), data: ClusterNode }).meta({ id: "ClusterNodeMutation" });

export const ClusterParams = z.object({ uuid: resourceId("cluster", Uuid) });
export const ClusterNodeParams = z.object({ uuid: resourceId("cluster", Uuid), nodeId: resourceId("cluster_node", SwarmObjectId) });
export const ClusterListQuery = PaginationQuery;

/** PATCH .../labels: the node's user labels become exactly these (capstan.* labels are the platform's). */
export const ClusterNodeLabelsBody = requestBody({
  labels: z
    .record(
      SwarmLabelKey.refine((k) => !k.startsWith(SWARM_RESERVED_LABEL_PREFIX), `labels starting with ${SWARM_RESERVED_LABEL_PREFIX} are reserved for the platform`),
      z.string().max(4096),
    )
    .refine((l) => Object.keys(l).length <= 100, "at most 100 labels"),
});
export type ClusterNodeLabelsBody = z.infer<typeof ClusterNodeLabelsBody>;

// ---- swarm services (issue 20) ----
export const ClusterSwarmService = z
  .object({
    id: z.string(),
    name: z.string(),
    image: z.string().meta({ description: "Without the digest the swarm pins it to" }),
    mode: z.enum(["replicated", "global"]),
    replicas: z.string().meta({ description: '"running/desired" (global: desired is the tasks the swarm wants running, one per eligible node)' }),
    ports: z.array(z.string()).meta({ description: '"published:target" (with "/udp" or "/sctp" when not tcp); ":target" when the port is not published' }),
    version: z.number().int().meta({ description: "The service object's version index" }),
    updated_at: z.string().nullable(),
  })
  .meta({ id: "ClusterSwarmService" });
export const ClusterServiceList = z.object({ data: z.array(ClusterSwarmService) }).meta({ id: "ClusterServiceList" });
export const ClusterServiceMutation = z.object({ message: z.string(), data: ClusterSwarmService }).meta({ id: "ClusterServiceMutation" });
export const ClusterTask = z
  .object({
    id: z.string(),
    slot: z.number().int().nullable().meta({ description: "The replica's slot; null for a global service" }),
    node_id: z.string().nullable(),
    node_hostname: z.string().nullable(),
    server_uuid: z.string().nullable().meta({ description: "The team's server that is the task's node, when detect linked one" }),
    state: z.string().meta({ description: "The task's state: new, pending, assigned, preparing, starting, running, complete, shutdown, failed, rejected, ..." }),
    desired_state: z.string(),
    message: z.string().nullable(),
    error: z.string().nullable(),
    updated_at: z.string().nullable(),
  })
  .meta({ id: "ClusterTask" });
export const ClusterTaskList = z.object({ data: z.array(ClusterTask) }).meta({ id: "ClusterTaskList" });
export const ClusterServiceParams = z.object({ uuid: resourceId("cluster", Uuid), serviceId: resourceId("cluster_service", SwarmObjectId) });
/** POST .../scale: the replicas a replicated service should run (0 stops every task and keeps the service). */
export const ClusterServiceScaleBody = requestBody({ replicas: z.number().int().min(0).max(10_000) });
export type ClusterServiceScaleBody = z.infer<typeof ClusterServiceScaleBody>;

// ---- swarm secrets and configs (issue 20, w7) ----
const storedFields = {
  id: z.string(),
  name: z.string(),
  labels: z.record(z.string(), z.string()),
  version: z.number().int().meta({ description: "The object's version index" }),
  created_at: z.string().nullable(),
  updated_at: z.string().nullable(),
};
/** A swarm secret: its data is never returned (not even by create). */
export const ClusterSecret = z.object(storedFields).meta({ id: "ClusterSecret" });
/** A swarm config: its data is returned (configs hold no secrets; decoded as UTF-8). */
export const ClusterConfig = z.object({ ...storedFields, data: z.string().meta({ description: "The config's data (UTF-8)" }) }).meta({ id: "ClusterConfig" });
export const ClusterSecretList = z.object({ data: z.array(ClusterSecret) }).meta({ id: "ClusterSecretList" });
export const ClusterConfigList = z.object({ data: z.array(ClusterConfig) }).meta({ id: "ClusterConfigList" });
export const ClusterSecretMutation = z.object({ message: z.string(), data: ClusterSecret }).meta({ id: "ClusterSecretMutation" });
export const ClusterConfigMutation = z.object({ message: z.string(), data: ClusterConfig }).meta({ id: "ClusterConfigMutation" });
export const ClusterSecretParams = z.object({ uuid: resourceId("cluster", Uuid), secretId: resourceId("cluster_secret", SwarmObjectId) });
export const ClusterConfigParams = z.object({ uuid: resourceId("cluster", Uuid), configId: resourceId("cluster_config", SwarmObjectId) });

const storedBody = (kind: "secret" | "config") =>
  requestBody({
    name: SwarmStoreName,
    // Multi-line (certificates, config files): tab, line feed and carriage return allowed.
    data: multiline(
      z
        .string()
        .min(1, "must not be empty")
        .refine((d) => utf8Bytes(d) < SWARM_STORE_MAX_BYTES[kind], `must be under ${SWARM_STORE_MAX_BYTES[kind] / 1024} KiB (UTF-8)`),
    ),
    labels: SwarmLabels.refine((l) => Object.keys(l).length <= 100, "at most 100 labels").optional(),
  });
/** POST /clusters/{uuid}/secrets: name (the engine's rules), data (under 500 KiB), labels. */
export const ClusterSecretBody = storedBody("secret");
export type ClusterSecretBody = z.infer<typeof ClusterSecretBody>;
/** POST /clusters/{uuid}/configs: name, data (under 1000 KiB), labels. */
export const ClusterConfigBody = storedBody("config");
export type ClusterConfigBody = z.infer<typeof ClusterConfigBody>;

// ---- cluster events (issue 20, w7/events) ----

export const CLUSTER_EVENTS_LIMIT = { default: 50, max: 500 } as const;

const RFC3339 = /^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$/;
const UNIX_SECONDS = /^(\d{1,11})(?:\.(\d{1,9}))?$/;

/**
 * A `since` of GET /clusters/{uuid}/events as nanoseconds since the epoch (20 zero-padded digits,
 * ordered as text like the stored events), or null when it is neither RFC 3339 nor Unix seconds.
 */
export function sinceToNano(since: string): string | null {
  let seconds: bigint;
  let fraction: string | undefined;
  const unix = UNIX_SECONDS.exec(since);
  if (unix) {
    seconds = BigInt(unix[1]!);
    fraction = unix[2];
  } else {
    const m = RFC3339.exec(since);
    if (!m) return null;
    const ms = Date.parse(`${m[1]}T${m[2]}${m[4]!.toUpperCase()}`);
    if (!Number.isFinite(ms) || ms < 0) return null;
    // Date.parse accepts 2026-02-31; a date that does not round-trip is refused.
    if (new Date(Date.parse(`${m[1]}T00:00:00Z`)).toISOString().slice(0, 10) !== m[1]) return null;
    seconds = BigInt(Math.floor(ms / 1000));
    fraction = m[3];
  }
  const nanos = seconds * 1_000_000_000n + BigInt((fraction ?? "").padEnd(9, "0") || "0");
  return nanos.toString().padStart(20, "0");
}

export const ClusterEventsQuery = z.object({
  since: z
    .string()
    .max(64)
    .refine((s) => sinceToNano(s) !== null, "Must be an RFC 3339 time (e.g. 2026-11-27T10:00:00Z) or Unix seconds.")
    .optional()
    .meta({ description: "Only events after this time (exclusive): RFC 3339 with up to nanoseconds, or Unix seconds (fraction allowed). Without it, the latest events." }),
  limit: z
    .string()
    .regex(/^[0-9]+$/, "Must be a positive integer.")
    .transform(Number)
    .pipe(z.number().int().min(1).max(CLUSTER_EVENTS_LIMIT.max))
    .optional()
    .meta({ description: `At most this many events (default ${CLUSTER_EVENTS_LIMIT.default}, max ${CLUSTER_EVENTS_LIMIT.max})` }),
});
export type ClusterEventsQuery = z.infer<typeof ClusterEventsQuery>;

export const ClusterEvent = z
  .object({
    time: z.string().meta({ description: "RFC 3339 with nanoseconds (UTC)" }),
    time_nano: z.string().meta({ description: "Nanoseconds since the epoch, decimal (exact; the engine's timeNano)" }),
    type: z.enum(["node", "service", "secret", "config"]),
    action: z.string().meta({ description: "The engine's action: create, update, remove" }),
    actor_id: z.string().meta({ description: "The engine's id of the node, service, secret or config" }),
    attributes: z.record(z.string(), z.string()).meta({ description: "The engine's attributes (name; for updates the changed fields' old and new values)" }),
  })
  .meta({ id: "ClusterEvent" });
export type ClusterEvent = z.infer<typeof ClusterEvent>;
export const ClusterEventList = z
  .object({
    data: z.array(ClusterEvent),
    collected_at: Timestamp.nullable().meta({ description: "When a manager last answered for the events (null: never); a request collects first when that is older than a few seconds" }),
  })
  .meta({ id: "ClusterEventList" });
