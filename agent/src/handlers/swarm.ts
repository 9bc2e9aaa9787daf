import { SWARM_RESERVED_LABEL_PREFIX, swarmNodeChangeRefusal, type SwarmNodeChange } from "@capstan/shared";
import { type Engine, type SwarmNodeSpec, isOutOfSequence } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";

/**
 * Swarm jobs (issue 20, docs/clusters.md): facts of the engine's swarm and node changes through
 * the Docker Engine API. Reads only, except swarm.node.update, which is safe to run again (it
 * sets the node's spec to a value; a second delivery finds it already so and sets it again).
 */

/** swarm.info: the engine's membership; on a manager the swarm's id and every node too. */
export function swarmInfo(engine: Engine): Handler<"swarm.info"> {
  return async (_payload, { signal }) => {
    const info = await engine.info(signal);
    const state = info.swarm ?? "inactive";
    const role = info.swarmRole === "manager" || info.swarmRole === "worker" ? info.swarmRole : null;
    const nodeId = state === "active" ? (info.swarmNodeId ?? null) : null;
    if (role !== "manager") return { state, node_id: nodeId, role, swarm_id: null, swarm_name: null, nodes: [] };
    const swarm = await engine.inspectSwarm(signal);
    const nodes = swarm ? await engine.listNodes(signal) : [];
    return { state, node_id: nodeId, role, swarm_id: swarm?.id ?? null, swarm_name: swarm?.name ?? null, nodes };
  };
}

/** swarm.nodes: every node, as the manager sees them now. */
export function swarmNodes(engine: Engine): Handler<"swarm.nodes"> {
  return async (_payload, { signal }) => ({ nodes: await engine.listNodes(signal) });
}

/** The node's spec after the change: labels replace the user's, the reserved ones stay. */
export function changedSpec(spec: SwarmNodeSpec, change: SwarmNodeChange): SwarmNodeSpec {
  const kept = Object.fromEntries(Object.entries(spec.Labels).filter(([k]) => k.startsWith(SWARM_RESERVED_LABEL_PREFIX)));
  const userLabels = change.labels ? Object.fromEntries(Object.entries(change.labels).filter(([k]) => !k.startsWith(SWARM_RESERVED_LABEL_PREFIX))) : null;
  return {
    ...spec,
    Labels: userLabels ? { ...userLabels, ...kept } : spec.Labels,
    Role: change.role ?? spec.Role,
    Availability: change.availability ?? spec.Availability,
  };
}

/** How long a promotion waits for the new manager to join Raft, and how often it looks. */
export const PROMOTION_WAIT_MS = 15_000;
const PROMOTION_POLL_MS = 250;

/**
 * A promoted node is "unknown" to the swarm until it has joined Raft (about a second on a real
 * swarm, seen in test/e2e/clusters.test.ts); answering before that stored a node list that kept
 * the cluster degraded until the next list. Waits (bounded) until it is a reachable manager and
 * answers it as it then is; after the bound, as it is (the cluster then says why it is degraded).
 */
async function joinedRaft(engine: Engine, id: string, signal: AbortSignal | undefined, progress: (m: string) => void, waitMs = PROMOTION_WAIT_MS) {
  const end = Date.now() + waitMs;
  for (;;) {
    const read = await engine.inspectNode(id, signal);
    if (read.node.reachability === "reachable" || Date.now() >= end || signal?.aborted) return read;
    progress(`node ${read.node.hostname}: waiting for it to join the managers (${read.node.reachability ?? "unknown"})`);
    await new Promise((r) => setTimeout(r, PROMOTION_POLL_MS));
  }
}

/**
 * swarm.node.update: reads the node (its version index) and the swarm's nodes, refuses a change
 * that would leave no reachable manager or lose quorum, then updates the node at that version.
 * When the engine answers "update out of sequence" (the node changed in between: a heartbeat,
 * another client) it reads the fresh version and decides again once; a second conflict is
 * reported as such (the control plane answers 409), never retried in a loop.
 */
export function swarmNodeUpdate(engine: Engine): Handler<"swarm.node.update"> {
  return async ({ node_id, change }, { signal, progress }) => {
    for (let attempt = 1; ; attempt++) {
      const [{ node, spec }, nodes] = await Promise.all([engine.inspectNode(node_id, signal), engine.listNodes(signal)]);
      const refusal = swarmNodeChangeRefusal(nodes.map((n) => (n.id === node.id ? node : n)), node.id, change);
      if (refusal) return { outcome: "refused", reason: refusal };
      try {
        await engine.updateNode(node.id, node.version, changedSpec(spec, change), signal);
      } catch (err) {
        if (!isOutOfSequence(err)) throw err;
        if (attempt >= 2) {
          return { outcome: "conflict", reason: `node ${node.hostname} changed while it was being updated (twice in a row); read it again and retry` };
        }
        progress(`node ${node.hostname}: version ${node.version} is out of sequence; retrying with the fresh version`);
        continue;
      }
      progress(`node ${node.hostname}: updated at version ${node.version}`);
      const after = change.role === "manager" ? await joinedRaft(engine, node.id, signal, progress) : await engine.inspectNode(node.id, signal);
      return { outcome: "updated", node: after.node, attempts: attempt };
    }
  };
}
