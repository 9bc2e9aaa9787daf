import type { Cluster, ClusterNode, DetectedCluster, SwarmNode } from "@capstan/shared";
import { clusterStatus, storedNodes, type ClusterRecord } from "../../services/clusters/index.js";
import { iso } from "../dto.js";
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
