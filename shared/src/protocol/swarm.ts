import { z } from "zod";

/**
 * Swarm clusters (issue 20, docs/clusters.md): what an agent reports of its engine's swarm
 * (Docker Engine API: GET /info's Swarm section, GET /swarm, GET /nodes) and the node changes it
 * makes (POST /nodes/{id}/update?version=N with the whole NodeSpec).
 */

/** Engine-made ids (nodes, swarms, services, tasks): 25 lowercase alphanumerics, bounded loosely. */
export const SwarmObjectId = z.string().regex(/^[a-z0-9]{1,64}$/, "a swarm object id");

/** Node labels the platform owns start with this; a user's PATCH keeps them and may not set them. */
export const SWARM_RESERVED_LABEL_PREFIX = "capstan.";

/** A node label key as the engine takes it (no '=' or whitespace), bounded. */
export const SwarmLabelKey = z.string().min(1).max(255).regex(/^[^=\s]+$/, "no '=' or whitespace");
export const SwarmLabels = z.record(SwarmLabelKey, z.string().max(4096));

export const SwarmNode = z.object({
  id: SwarmObjectId,
  /** The node object's version index: the engine refuses an update naming another one ("out of sequence"). */
  version: z.number().int().min(0),
  hostname: z.string().max(255),
  role: z.enum(["manager", "worker"]),
  /** active | pause | drain */
  availability: z.enum(["active", "pause", "drain"]),
  /** unknown | down | ready | disconnected */
  status: z.string().max(50),
  /** The address the node is seen at (Status.Addr). */
  addr: z.string().max(255).nullable(),
  engine_version: z.string().max(100).nullable(),
  labels: z.record(z.string(), z.string()),
  /** Managers: reachable | unreachable | unknown (ManagerStatus.Reachability); null on workers. */
  reachability: z.string().max(50).nullable(),
  leader: z.boolean(),
});
export type SwarmNode = z.infer<typeof SwarmNode>;

export const SwarmInfoResult = z.object({
  /** The engine's LocalNodeState: inactive | pending | active | error | locked. */
  state: z.string().max(50),
  /** This engine's node in the swarm; null when it is in none. */
  node_id: SwarmObjectId.nullable(),
  /** manager when it runs swarm control (ControlAvailable), worker when merely joined, null when in none. */
  role: z.enum(["manager", "worker"]).nullable(),
  /** The swarm's id (GET /swarm, managers only; workers cannot read it). */
  swarm_id: SwarmObjectId.nullable(),
  /** Swarm spec name ("default" unless set). */
  swarm_name: z.string().max(255).nullable(),
  /** Managers: every node of the swarm; workers: none. */
  nodes: z.array(SwarmNode).max(10_000),
});
export type SwarmInfoResult = z.infer<typeof SwarmInfoResult>;

/** What one node update changes; fields left out keep the node's current value. */
export const SwarmNodeChange = z
  .object({
    availability: z.enum(["active", "pause", "drain"]).optional(),
    role: z.enum(["manager", "worker"]).optional(),
    /** Replaces the node's labels except those with the reserved prefix, which are kept. */
    labels: SwarmLabels.optional(),
  })
  .refine((c) => c.availability !== undefined || c.role !== undefined || c.labels !== undefined, "nothing to change");
export type SwarmNodeChange = z.infer<typeof SwarmNodeChange>;

export const SwarmNodeUpdatePayload = z.object({ node_id: SwarmObjectId, change: SwarmNodeChange });
/**
 * updated: the engine took it (node as read back); refused: a change that would leave the swarm
 * without a reachable manager or lose quorum (reason); conflict: the version index moved twice
 * in a row ("update out of sequence" on the retry with the fresh version too).
 */
export const SwarmNodeUpdateResult = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("updated"), node: SwarmNode, attempts: z.number().int().min(1) }),
  z.object({ outcome: z.literal("refused"), reason: z.string().max(2000) }),
  z.object({ outcome: z.literal("conflict"), reason: z.string().max(2000) }),
]);
export type SwarmNodeUpdateResult = z.infer<typeof SwarmNodeUpdateResult>;

const isReachableManager = (n: SwarmNode) => n.role === "manager" && n.reachability === "reachable" && n.status === "ready";

/** Raft needs a majority of the managers: floor(n/2)+1. */
export const swarmQuorum = (managers: number) => Math.floor(managers / 2) + 1;

/**
 * Why a node change must not be made on a swarm whose nodes are `nodes` (the manager's fresh
 * list), or null when it may: demoting or draining the last reachable manager, and any role
 * change after which the reachable managers are no longer a majority of the managers (a
 * promoted node that is down counts as a manager that cannot vote), are refused.
 */
export function swarmNodeChangeRefusal(nodes: SwarmNode[], nodeId: string, change: SwarmNodeChange): string | null {
  const node = nodes.find((n) => n.id === nodeId);
  if (!node) return null; // the engine answers for an unknown node
  const reachable = nodes.filter(isReachableManager);
  const others = reachable.filter((n) => n.id !== node.id);
  if (change.role === "worker" && node.role === "manager" && others.length === 0) {
    return `node ${node.hostname} is the last reachable manager: demoting it would leave the swarm without a manager; promote another node first`;
  }
  if (change.availability === "drain" && node.role === "manager" && isReachableManager(node) && !others.some((n) => n.availability === "active")) {
    return `node ${node.hostname} is the last reachable active manager: draining it would leave no manager to run manager-only tasks; activate or promote another node first`;
  }
  if (change.role !== undefined && change.role !== node.role) {
    const managers = nodes.filter((n) => n.role === "manager").length + (change.role === "manager" ? 1 : -1);
    const voting = reachable.length + (change.role === "manager" ? (node.status === "ready" ? 1 : 0) : isReachableManager(node) ? -1 : 0);
    if (voting < swarmQuorum(managers)) {
      const what = change.role === "manager" ? "promoting" : "demoting";
      return `${what} node ${node.hostname} would lose quorum: ${voting} of ${managers} managers would be reachable, and the swarm needs ${swarmQuorum(managers)}`;
    }
  }
  return null;
}

// ---- swarm services (issue 20, second increment) ----

/** A published port: published (on every node, through the routing mesh) to the tasks' target. */
export const SwarmPort = z.object({ published: z.number().int().min(0).max(65535).nullable(), target: z.number().int().min(0).max(65535), protocol: z.string().max(10) });

export const SwarmService = z.object({
  id: SwarmObjectId,
  /** The service object's version index (updates name it, as for nodes). */
  version: z.number().int().min(0),
  name: z.string().max(255),
  image: z.string().max(1000),
  mode: z.enum(["replicated", "global"]),
  /** Replicated: the replicas asked for; global: the tasks the swarm wants running (one per eligible node). */
  desired: z.number().int().min(0),
  /** Tasks whose state is running. */
  running: z.number().int().min(0),
  ports: z.array(SwarmPort).max(1000),
  updated_at: z.string().max(100).nullable(),
});
export type SwarmService = z.infer<typeof SwarmService>;

export const SwarmTask = z.object({
  id: SwarmObjectId,
  /** Replicated services: the replica's slot; global: null. */
  slot: z.number().int().min(0).nullable(),
  node_id: SwarmObjectId.nullable(),
  /** new | pending | assigned | accepted | preparing | starting | running | complete | shutdown | failed | rejected | remove | orphaned */
  state: z.string().max(50),
  desired_state: z.string().max(50),
  message: z.string().max(2000).nullable(),
  error: z.string().max(2000).nullable(),
  updated_at: z.string().max(100).nullable(),
});
export type SwarmTask = z.infer<typeof SwarmTask>;

export const SwarmServicesResult = z.object({ services: z.array(SwarmService).max(10_000) });
export const SwarmTasksPayload = z.object({ service_id: SwarmObjectId });
/** found false: the swarm has no such service. */
export const SwarmTasksResult = z.object({ found: z.boolean(), tasks: z.array(SwarmTask).max(100_000) });

export const SwarmServiceScalePayload = z.object({ service_id: SwarmObjectId, replicas: z.number().int().min(0).max(10_000) });
/** As a node update: updated (service as read back), refused (global mode), conflict (out of sequence twice), missing (no such service). */
export const SwarmServiceScaleResult = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("updated"), service: SwarmService, attempts: z.number().int().min(1) }),
  z.object({ outcome: z.literal("refused"), reason: z.string().max(2000) }),
  z.object({ outcome: z.literal("conflict"), reason: z.string().max(2000) }),
  z.object({ outcome: z.literal("missing") }),
]);
export type SwarmServiceScaleResult = z.infer<typeof SwarmServiceScaleResult>;

// ---- swarm secrets and configs (issue 20, w7) ----

/** Secrets and configs: the two kinds of swarm-stored data services mount (GET /secrets, GET /configs). */
export const SWARM_STORE_KINDS = ["secret", "config"] as const;
export const SwarmStoreKind = z.enum(SWARM_STORE_KINDS);
export type SwarmStoreKind = z.infer<typeof SwarmStoreKind>;

/**
 * A secret's or config's name as the engine takes it (swarmkit's controlapi): at most 64
 * characters, alphanumerics with '-', '_' and '.' inside (never first or last).
 */
export const SWARM_STORE_NAME_RE = /^[a-zA-Z0-9]+(?:[a-zA-Z0-9-_.]*[a-zA-Z0-9])?$/;
export const SwarmStoreName = z
  .string()
  .min(1)
  .max(64, "at most 64 characters")
  .regex(SWARM_STORE_NAME_RE, "letters, digits, '-', '_' and '.' (a letter or digit first and last)");

/** The engine's data bounds (bytes, exclusive): secrets under 500 KiB, configs under 1000 KiB, neither empty. */
export const SWARM_STORE_MAX_BYTES: Record<SwarmStoreKind, number> = { secret: 500 * 1024, config: 1000 * 1024 };

/** Bytes of a string in UTF-8 (what the engine stores). */
export const utf8Bytes = (s: string) => new TextEncoder().encode(s).length;

/** A secret or config as the engine lists it; `data` is a config's (UTF-8) and always null for a secret. */
export const SwarmStoredObject = z.object({
  id: SwarmObjectId,
  version: z.number().int().min(0),
  name: z.string().max(255),
  labels: z.record(z.string(), z.string()),
  data: z.string().nullable(),
  created_at: z.string().max(100).nullable(),
  updated_at: z.string().max(100).nullable(),
});
export type SwarmStoredObject = z.infer<typeof SwarmStoredObject>;

export const SwarmObjectsPayload = z.object({ kind: SwarmStoreKind });
export const SwarmObjectsResult = z.object({ objects: z.array(SwarmStoredObject).max(100_000) });
/** The data travels only here (the job payload, sealed at rest by the control plane); never in a result or a log line. */
export const SwarmObjectCreatePayload = z
  .object({ kind: SwarmStoreKind, name: SwarmStoreName, data: z.string().min(1), labels: SwarmLabels })
  .refine((p) => utf8Bytes(p.data) < SWARM_STORE_MAX_BYTES[p.kind], { message: "data too large for the engine", path: ["data"] });
/** created: the object as listed back (a secret's data null); exists: the name is taken (the engine's reason). */
export const SwarmObjectCreateResult = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("created"), object: SwarmStoredObject }),
  z.object({ outcome: z.literal("exists"), reason: z.string().max(2000) }),
]);
export type SwarmObjectCreateResult = z.infer<typeof SwarmObjectCreateResult>;
export const SwarmObjectDeletePayload = z.object({ kind: SwarmStoreKind, id: SwarmObjectId });
/** deleted; in_use: services mount it (their names, the reason); missing: no such object. */
export const SwarmObjectDeleteResult = z.discriminatedUnion("outcome", [
  z.object({ outcome: z.literal("deleted"), name: z.string().max(255) }),
  z.object({ outcome: z.literal("in_use"), reason: z.string().max(4000), services: z.array(z.string().max(255)).max(10_000) }),
  z.object({ outcome: z.literal("missing") }),
]);
export type SwarmObjectDeleteResult = z.infer<typeof SwarmObjectDeleteResult>;

// ---- swarm events (issue 20, w7/events) ----

/** The engine's event types collected for a cluster (GET /events filters type=...). */
export const SWARM_EVENT_TYPES = ["node", "service", "secret", "config"] as const;
export const SwarmEventType = z.enum(SWARM_EVENT_TYPES);
/** A Unix time in nanoseconds as decimal digits (the engine's timeNano exceeds a double's exact integers). */
export const NanoTime = z.string().regex(/^\d{1,20}$/, "nanoseconds since the epoch, decimal");
export const SwarmEvent = z.object({
  type: SwarmEventType,
  action: z.string().min(1).max(100),
  actor_id: z.string().max(255),
  /** The actor's attributes as the engine gave them (name, and for updates e.g. replicas.old/new). */
  attributes: z.record(z.string().max(255), z.string().max(4096)),
  time_nano: NanoTime,
});
export type SwarmEvent = z.infer<typeof SwarmEvent>;
/** since_nano: events after it (the engine's since, inclusive: the control plane stores each once). */
export const SwarmEventsPayload = z.object({ since_nano: NanoTime });
/** until_nano: the end of the window the engine was asked for (the agent's clock). */
export const SwarmEventsResult = z.object({ events: z.array(SwarmEvent).max(10_000), until_nano: NanoTime });
export type SwarmEventsResult = z.infer<typeof SwarmEventsResult>;
