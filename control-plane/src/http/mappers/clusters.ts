import type { Cluster, ClusterConfig, ClusterEvent, ClusterNode, ClusterSecret, ClusterSwarmService, ClusterTask, DetectedCluster, SwarmNode, SwarmService, SwarmStoredObject, SwarmTask } from "@capstan/shared";
import { clusterStatus, storedNodes, type ClusterRecord } from "../../services/clusters/index.js";
import { iso } from "../dto.js";
import { nanoToRfc3339 } from "../../services/clusters/events.js";
import type { Out } from "./types.js";

/** A cluster as responses show it: counts and status from the last node list and the servers' agents. */
export const clusterDto = (r: ClusterRecord): Out<typeof Cluster> => {
  const nodes = storedNodes(r);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const { status, reason } = clusterStatus(r, nodes);
  return {
    uuid: r.uuid,
    name: r.name,
    orchestrator_id: r.swarmId,
    status,
    status_reason: reason,
    manager_count: nodes.filter((n) => n.role === "manager").length,
    worker_count: nodes.filter((n) => n.role === "worker").length,
    node_count: nodes.length,
    servers: r.servers.map((s) => ({ uuid: s.server.uuid, name: s.server.name, node_id: s.nodeId, role: byId.get(s.nodeId)?.role ?? null, reachable: s.server.status === "reachable" })),
    nodes_updated_at: r.nodesAt ? iso(r.nodesAt) : null,
    created_at: iso(r.createdAt),
    updated_at: iso(r.updatedAt),
  };
};

export const detectedClusterDto = (d: { row: ClusterRecord; managers: number; workers: number }): Out<typeof DetectedCluster> => ({
  uuid: d.row.uuid,
  name: d.row.name,
  orchestrator_id: d.row.swarmId,
  manager_count: d.managers,
  worker_count: d.workers,
});

/** A node of the swarm, with the team server that is it (when detect linked one). */
export const clusterNodeDto = (r: ClusterRecord, n: SwarmNode): Out<typeof ClusterNode> => ({
  id: n.id,
  hostname: n.hostname,
  role: n.role,
  status: n.status,
  availability: n.availability,
  engine_version: n.engine_version,
  ip: n.addr,
  labels: n.labels,
  leader: n.leader,
  reachability: n.reachability,
  version: n.version,
  server_uuid: r.servers.find((s) => s.nodeId === n.id)?.server.uuid ?? null,
});

// ---- swarm services (issue 20) ----
const portText = (p: SwarmService["ports"][number]) => `${p.published ?? ""}:${p.target}${p.protocol && p.protocol !== "tcp" ? `/${p.protocol}` : ""}`;

export const clusterServiceDto = (s: SwarmService): Out<typeof ClusterSwarmService> => ({
  id: s.id,
  name: s.name,
  image: s.image,
  mode: s.mode,
  replicas: `${s.running}/${s.desired}`,
  ports: s.ports.map(portText),
  version: s.version,
  updated_at: s.updated_at,
});

/** A task with its node's hostname (from the cluster's last node list) and the team server that node is. */
export const clusterTaskDto = (r: ClusterRecord, t: SwarmTask): Out<typeof ClusterTask> => ({
  id: t.id,
  slot: t.slot,
  node_id: t.node_id,
  node_hostname: storedNodes(r).find((n) => n.id === t.node_id)?.hostname ?? null,
  server_uuid: r.servers.find((s) => s.nodeId === t.node_id)?.server.uuid ?? null,
  state: t.state,
  desired_state: t.desired_state,
  message: t.message,
  error: t.error,
  updated_at: t.updated_at,
});

// ---- swarm secrets and configs (issue 20, w7) ----
/** A secret without its data (the agent never reads it; this never shows it). */
export const clusterSecretDto = (o: SwarmStoredObject): Out<typeof ClusterSecret> => ({
  id: o.id,
  name: o.name,
  labels: o.labels,
  version: o.version,
  created_at: o.created_at,
  updated_at: o.updated_at,
});
export const clusterConfigDto = (o: SwarmStoredObject): Out<typeof ClusterConfig> => ({ ...clusterSecretDto(o), data: o.data ?? "" });

// ---- cluster events (issue 20, w7/events) ----
const EVENT_TYPES = ["node", "service", "secret", "config"] as const;
export const clusterEventDto = (e: { timeNano: string; type: string; action: string; actorId: string; attributes: string }): Out<typeof ClusterEvent> => {
  let attributes: Record<string, string> = {};
  try {
    attributes = JSON.parse(e.attributes) as Record<string, string>;
  } catch {
    // a row written by an older shape reads as no attributes
  }
  return {
    time: nanoToRfc3339(e.timeNano),
    time_nano: BigInt(e.timeNano).toString(),
    type: EVENT_TYPES.find((t) => t === e.type) ?? "node",
    action: e.action,
    actor_id: e.actorId,
    attributes,
  };
};
