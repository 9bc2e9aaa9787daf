import type { SwarmNode } from "@capstan/shared";

/** A swarm node as the engine describes it (a ready, active worker unless `over` says otherwise). */
export const swarmNode = (id: string, hostname: string, over: Partial<SwarmNode> = {}): SwarmNode => ({
  id,
  version: 10,
  hostname,
  role: "worker",
  availability: "active",
  status: "ready",
  addr: "10.0.0.9",
  engine_version: "20.10.24",
  labels: {},
  reachability: null,
  leader: false,
  ...over,
});
