import { HostFacts, SwarmEventsResult, SwarmNode, CLUSTER_EVENTS_LIMIT, type SwarmInfoResult, type SwarmNodeChange, type SwarmService, type SwarmStoredObject, type SwarmStoreKind, type SwarmTask } from "@capstan/shared";
import { z } from "zod";
import type { Db, Prisma } from "../../db/client.js";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, NotFound, Unavailable, UpstreamFailed } from "../../domain/errors.js";
import type { JobQueue } from "../../jobs/queue.js";
import { newUuid } from "../../lib/ids.js";
import { ServerService } from "../servers.js";
import type { EndedJob } from "../../jobs/outcomes.js";
import { COLLECT_EVERY_MS, FIRST_WINDOW_MS, FRESH_MS, FRESH_WAIT_MS, msToNano, pruneEvents, storeEvents } from "./events.js";

type Window = { skip?: number; take?: number };
const withServers = {
  servers: { include: { server: { select: { id: true, uuid: true, name: true, status: true, facts: true } } }, orderBy: { serverId: "asc" } },
} satisfies Prisma.ClusterInclude;
export type ClusterRecord = Prisma.ClusterGetPayload<{ include: typeof withServers }>;

/** How long detect and the node list wait for each agent; a node update for its manager. */
const INFO_WAIT_MS = 15_000;
const UPDATE_WAIT_MS = 60_000;
/** Servers asked at once by detect (each a job round trip). */
const DETECT_CONCURRENCY = 8;

const StoredNodes = z.array(SwarmNode);
/** What a create job's stored payload holds instead of the data once the job ended. */
const SCRUBBED = "(removed)";

export type ClusterStatus = "healthy" | "degraded" | "unreachable";

/** The nodes a manager last listed (stored JSON; a row written by an older shape reads as none). */
export function storedNodes(row: { nodes: string }): SwarmNode[] {
  try {
    const parsed = StoredNodes.safeParse(JSON.parse(row.nodes));
    return parsed.success ? parsed.data : [];
  } catch {
    return [];
  }
}

/**
 * A cluster's status from its managers' reachability and its nodes' states (docs/clusters.md):
 * unreachable when no manager server's agent is connected (nothing can be asked or changed);
 * degraded when a node's server agent is not connected or reports its engine not answering, a
 * node is not ready, or a manager is not reachable in the swarm; healthy otherwise. Computed when read, from the servers' live
 * agent state (the gateway sets it on connect and disconnect) and the last node list, so it
 * follows every connect, disconnect and report without a stored copy to keep in step.
 */
export function clusterStatus(row: ClusterRecord, nodes = storedNodes(row)): { status: ClusterStatus; reason: string | null } {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const managers = row.servers.filter((s) => byId.get(s.nodeId)?.role === "manager");
  if (!managers.some((s) => ServerService.agentConnected(s.server))) {
    return { status: "unreachable", reason: managers.length ? "No manager server's agent is connected." : "No server of the team is a manager of this swarm (run POST /clusters/detect)." };
  }
  const reasons: string[] = [];
  for (const s of row.servers) {
    if (!ServerService.agentConnected(s.server)) reasons.push(`server ${s.server.name}: its agent is not connected`);
    // The agent reports its engine stopping at once (agent/src/docker/engine-watch.ts); the swarm notices a node down only after its heartbeats expire.
    else if (engineRunning(s.server.facts) === false) reasons.push(`server ${s.server.name}: its Docker Engine does not answer`);
  }
  for (const n of nodes) {
    if (n.status !== "ready") reasons.push(`node ${n.hostname}: ${n.status}`);
    else if (n.role === "manager" && n.reachability !== "reachable") reasons.push(`manager ${n.hostname}: ${n.reachability ?? "unknown"} in the swarm`);
  }
  return reasons.length ? { status: "degraded", reason: reasons.join("; ") } : { status: "healthy", reason: null };
}

const roleCounts = (nodes: SwarmNode[]) => ({
  managers: nodes.filter((n) => n.role === "manager").length,
  workers: nodes.filter((n) => n.role === "worker").length,
});

/** The node operations of the API, as node changes. */
export const NODE_ACTIONS = {
  drain: { availability: "drain" },
  activate: { availability: "active" },
  promote: { role: "manager" },
  demote: { role: "worker" },
} as const satisfies Record<string, SwarmNodeChange>;
export type NodeAction = keyof typeof NODE_ACTIONS;

/**
 * Clusters of a team (/clusters, spec 4.12, issue 20): team-level like registries (every member
 * reads; owners and admins detect and change nodes). The work happens on the swarm's managers
 * through their agents (jobs swarm.info, swarm.nodes, swarm.node.update); the control plane
 * keeps one record per swarm with the last node list and which team servers are its nodes.
 */
export class ClusterService {
  constructor(
    private readonly db: Db,
    private readonly jobs: JobQueue,
  ) {}

  count(scope: TeamScope) {
    return this.db.cluster.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, w: Window = {}): Promise<ClusterRecord[]> {
    return this.db.cluster.findMany({ where: scope.inTeam, include: withServers, orderBy: { id: "asc" }, ...w });
  }

  async get(scope: TeamScope, uuid: string): Promise<ClusterRecord> {
    const row = await this.db.cluster.findFirst({ where: { uuid, ...scope.inTeam }, include: withServers });
    if (!row) throw new NotFound("Cluster");
    return row;
  }

  /**
   * Asks the agent of every connected team server that may be in a swarm (its facts do not say
   * inactive) for its swarm membership; managers also name the swarm and list its nodes. One
   * record per swarm id is created or updated with the managers' node list, and the team's
   * servers that are its nodes (by the node id each server's own engine reports) are linked to
   * it (a server that left a swarm is unlinked). Servers that do not answer are left as they are.
   */
  async detect(scope: TeamScope): Promise<{ row: ClusterRecord; managers: number; workers: number }[]> {
    const servers = (await this.db.server.findMany({ where: { ...scope.inTeam, status: "reachable" }, select: { id: true, name: true, facts: true }, orderBy: { id: "asc" } })).filter(
      (s) => swarmStateOf(s.facts) !== "inactive",
    );
    const answers: { serverId: number; info: SwarmInfoResult }[] = [];
    for (let i = 0; i < servers.length; i += DETECT_CONCURRENCY) {
      await Promise.all(
        servers.slice(i, i + DETECT_CONCURRENCY).map(async (s) => {
          const job = await this.jobs.run(s.id, "swarm.info", {}, INFO_WAIT_MS);
          if (job.status === "succeeded") answers.push({ serverId: s.id, info: job.result });
        }),
      );
    }
    const swarms = new Map<string, { name: string | null; nodes: SwarmNode[] }>();
    for (const { info } of answers) {
      if (!info.swarm_id) continue;
      const known = swarms.get(info.swarm_id);
      // The first manager's list stands for the swarm (the leader's, when it answered).
      if (!known || (!known.nodes.some((n) => n.leader) && info.nodes.some((n) => n.leader && n.id === info.node_id))) swarms.set(info.swarm_id, { name: info.swarm_name, nodes: info.nodes });
    }
    const answered = answers.map((a) => a.serverId);
    const out: { row: ClusterRecord; managers: number; workers: number }[] = [];
    const linked: number[] = [];
    await this.db.$transaction(async (tx) => {
      for (const [swarmId, { name, nodes }] of [...swarms].sort(([a], [b]) => a.localeCompare(b))) {
        const data = { nodes: JSON.stringify(nodes), nodesAt: new Date() };
        const cluster = await tx.cluster.upsert({
          where: { teamId_swarmId: { teamId: scope.teamId, swarmId } },
          create: { uuid: newUuid(), teamId: scope.teamId, swarmId, name: name && name !== "default" ? name : `swarm-${swarmId.slice(0, 12)}`, ...data },
          update: data,
        });
        const nodeIds = new Set(nodes.map((n) => n.id));
        for (const a of answers) {
          if (!a.info.node_id || !nodeIds.has(a.info.node_id)) continue;
          // upsert by server: a concurrent detect writes the same link, never a second one.
          const link = { clusterId: cluster.id, nodeId: a.info.node_id };
          await tx.clusterServer.upsert({ where: { serverId: a.serverId }, create: { serverId: a.serverId, ...link }, update: link });
          linked.push(a.serverId);
        }
        const row = await tx.cluster.findUniqueOrThrow({ where: { id: cluster.id }, include: withServers });
        const c = roleCounts(nodes);
        out.push({ row, managers: c.managers, workers: c.workers });
      }
      // A server that answered and is in none of the swarms found left its swarm: unlinked.
      const gone = answered.filter((id) => !linked.includes(id));
      if (gone.length) await tx.clusterServer.deleteMany({ where: { serverId: { in: gone } } });
    });
    return out;
  }

  /** The nodes as a connected manager lists them now (stored), or the last list when none answers. */
  async nodes(scope: TeamScope, uuid: string): Promise<{ row: ClusterRecord; nodes: SwarmNode[]; refreshed: boolean }> {
    const row = await this.get(scope, uuid);
    for (const manager of this.managers(row)) {
      const job = await this.jobs.run(manager.serverId, "swarm.nodes", {}, INFO_WAIT_MS);
      if (job.status !== "succeeded") continue;
      const fresh = await this.store(row.id, job.result.nodes);
      return { row: fresh, nodes: job.result.nodes, refreshed: true };
    }
    return { row, nodes: storedNodes(row), refreshed: false };
  }

  /**
   * Changes one node through a connected manager (swarm.node.update: the version index, one
   * retry with the fresh version after "out of sequence"). A change that would leave no
   * reachable manager or lose quorum is refused (Conflict with the agent's reason), as is a
   * second version conflict in a row. Then the node list is read again and stored.
   */
  async changeNode(scope: TeamScope, uuid: string, nodeId: string, change: SwarmNodeChange): Promise<{ row: ClusterRecord; node: SwarmNode }> {
    const row = await this.get(scope, uuid);
    if (!storedNodes(row).some((n) => n.id === nodeId)) throw new NotFound("Node");
    const manager = this.managers(row)[0];
    if (!manager) throw new Unavailable("No manager server of this cluster has a connected agent: the swarm cannot be changed now.");
    const job = await this.jobs.run(manager.serverId, "swarm.node.update", { node_id: nodeId, change }, UPDATE_WAIT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${manager.server.name} could not change the node: ${job.error}`);
    const r = job.result;
    if (r.outcome !== "updated") throw new Conflict(r.outcome === "refused" ? `Refused: ${r.reason}` : `The node changed concurrently: ${r.reason}`);
    const listed = await this.jobs.run(manager.serverId, "swarm.nodes", {}, INFO_WAIT_MS);
    const nodes = listed.status === "succeeded" ? listed.result.nodes : storedNodes(row).map((n) => (n.id === r.node.id ? r.node : n));
    return { row: await this.store(row.id, nodes), node: nodes.find((n) => n.id === r.node.id) ?? r.node };
  }

  // ---- swarm services (issue 20) ----

  /** The first connected manager (the leader's first), or Unavailable: services are read live, never stored. */
  private manager(row: ClusterRecord) {
    const m = this.managers(row)[0];
    if (!m) throw new Unavailable("No manager server of this cluster has a connected agent: its services cannot be read or changed now.");
    return m;
  }

  /** Every service of the swarm as a connected manager lists it now. */
  async services(scope: TeamScope, uuid: string): Promise<{ row: ClusterRecord; services: SwarmService[] }> {
    const row = await this.get(scope, uuid);
    const m = this.manager(row);
    const job = await this.jobs.run(m.serverId, "swarm.services", {}, INFO_WAIT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${m.server.name} could not list the services: ${job.error}`);
    return { row, services: job.result.services };
  }

  /** One service's tasks with their nodes (NotFound when the swarm has no such service). */
  async tasks(scope: TeamScope, uuid: string, serviceId: string): Promise<{ row: ClusterRecord; tasks: SwarmTask[] }> {
    const row = await this.get(scope, uuid);
    const m = this.manager(row);
    const job = await this.jobs.run(m.serverId, "swarm.tasks", { service_id: serviceId }, INFO_WAIT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${m.server.name} could not list the tasks: ${job.error}`);
    if (!job.result.found) throw new NotFound("Service");
    return { row, tasks: job.result.tasks };
  }

  /**
   * Sets a replicated service's replicas through a connected manager (swarm.service.scale: the
   * version index, one retry after "out of sequence"). Global mode and a second conflict in a row
   * are a Conflict with the reason; an unknown service NotFound.
   */
  async scale(scope: TeamScope, uuid: string, serviceId: string, replicas: number): Promise<SwarmService> {
    const row = await this.get(scope, uuid);
    const m = this.manager(row);
    const job = await this.jobs.run(m.serverId, "swarm.service.scale", { service_id: serviceId, replicas }, UPDATE_WAIT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${m.server.name} could not scale the service: ${job.error}`);
    const r = job.result;
    if (r.outcome === "missing") throw new NotFound("Service");
    if (r.outcome !== "updated") throw new Conflict(r.outcome === "refused" ? `Refused: ${r.reason}` : `The service changed concurrently: ${r.reason}`);
    return r.service;
  }

  // ---- swarm secrets and configs (issue 20, w7) ----

  /** Every secret or config of the swarm as a connected manager lists it now (never stored). */
  async storedObjects(scope: TeamScope, uuid: string, kind: SwarmStoreKind): Promise<SwarmStoredObject[]> {
    const row = await this.get(scope, uuid);
    const m = this.manager(row);
    const job = await this.jobs.run(m.serverId, "swarm.objects", { kind }, INFO_WAIT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${m.server.name} could not list the ${kind}s: ${job.error}`);
    return job.result.objects;
  }

  /**
   * Creates a secret or config through a connected manager. The data travels in the job's
   * payload only (sealed at rest like every payload) and, once the job ended, the stored payload
   * is replaced by one without it: no job row keeps a secret's value. A taken name is a Conflict.
   */
  async createStored(scope: TeamScope, uuid: string, kind: SwarmStoreKind, input: { name: string; data: string; labels?: Record<string, string> }): Promise<SwarmStoredObject> {
    const row = await this.get(scope, uuid);
    const m = this.manager(row);
    const payload = { kind, name: input.name, data: input.data, labels: input.labels ?? {} };
    const job = await this.jobs.run(m.serverId, "swarm.object.create", payload, UPDATE_WAIT_MS);
    await this.jobs.scrubPayload(job.id, "swarm.object.create", { ...payload, data: SCRUBBED });
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${m.server.name} could not create the ${kind}: ${job.error}`);
    if (job.result.outcome === "exists") throw new Conflict(`A ${kind} named ${input.name} already exists in this cluster.`);
    return job.result.object;
  }

  /** Removes a secret or config; one a service mounts is a Conflict naming the services, an unknown one NotFound. */
  async deleteStored(scope: TeamScope, uuid: string, kind: SwarmStoreKind, id: string): Promise<string> {
    const row = await this.get(scope, uuid);
    const m = this.manager(row);
    const job = await this.jobs.run(m.serverId, "swarm.object.delete", { kind, id }, UPDATE_WAIT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`The manager ${m.server.name} could not delete the ${kind}: ${job.error}`);
    const r = job.result;
    if (r.outcome === "missing") throw new NotFound(kind === "secret" ? "Secret" : "Config");
    if (r.outcome === "in_use") throw new Conflict(`Refused: ${r.reason}`);
    return r.name;
  }

  // ---- cluster events (issue 20, w7/events) ----

  /**
   * A cluster's stored events, chronological (docs/clusters.md "Events"): with `since` (20-digit
   * nanoseconds, exclusive) the first `limit` after it, else the latest `limit`. When the last
   * collection started more than a few seconds ago and a manager's agent is connected, one is
   * run first and waited for at most FRESH_WAIT_MS (then what is stored is answered; the job's
   * outcome stores its events whenever it ends).
   */
  async events(scope: TeamScope, uuid: string, q: { sinceNano?: string; limit?: number }) {
    let row = await this.get(scope, uuid);
    if (this.managers(row).length && (await this.claimCollection(row.id, FRESH_MS))) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([this.collect(row).catch(() => {}), new Promise<void>((r) => (timer = setTimeout(r, FRESH_WAIT_MS)))]);
      clearTimeout(timer);
      row = await this.get(scope, uuid);
    }
    const limit = q.limit ?? CLUSTER_EVENTS_LIMIT.default;
    const order = (dir: "asc" | "desc") => [{ timeNano: dir }, { id: dir }];
    const events = q.sinceNano
      ? await this.db.clusterEvent.findMany({ where: { clusterId: row.id, timeNano: { gt: q.sinceNano } }, orderBy: order("asc"), take: limit })
      : (await this.db.clusterEvent.findMany({ where: { clusterId: row.id }, orderBy: order("desc"), take: limit })).reverse();
    return { row, events };
  }

  /**
   * Starts a collection when the last one started longer ago than `olderThanMs`: one conditional
   * statement, so concurrent requests and replicas start one between them.
   */
  private async claimCollection(id: number, olderThanMs: number): Promise<boolean> {
    const now = new Date();
    const r = await this.db.cluster.updateMany({ where: { id, OR: [{ eventsAt: null }, { eventsAt: { lt: new Date(now.getTime() - olderThanMs) } }] }, data: { eventsAt: now } });
    return r.count === 1;
  }

  /** Asks a connected manager for the events since the last stored one (or the last hour); the job's outcome stores them (eventsEnded). */
  private async collect(row: ClusterRecord): Promise<void> {
    const m = this.managers(row)[0];
    if (!m) return;
    const last = await this.db.clusterEvent.findFirst({ where: { clusterId: row.id }, orderBy: { timeNano: "desc" }, select: { timeNano: true } });
    await this.jobs.run(m.serverId, "swarm.events", { since_nano: last?.timeNano ?? msToNano(Date.now() - FIRST_WINDOW_MS) });
  }

  /** swarm.events ended (outcome map): its events stored in the cluster its server is a node of, each once. */
  async eventsEnded(job: EndedJob<"swarm.events">): Promise<void> {
    if (job.status !== "succeeded" || !job.result) return;
    const parsed = SwarmEventsResult.safeParse(JSON.parse(job.result));
    if (!parsed.success) return;
    const link = await this.db.clusterServer.findUnique({ where: { serverId: job.serverId }, select: { clusterId: true } });
    if (link) await storeEvents(this.db, link.clusterId, parsed.data.events);
  }

  private lastPrune = 0;
  private lastCollectPass = 0;

  /**
   * The repair sweep's step: every cluster with a connected manager whose last collection
   * started COLLECT_EVERY_MS ago or more gets one (not waited for), and once a minute a bounded
   * retention pass (events.ts).
   */
  async eventsSweep(now = Date.now()): Promise<void> {
    if (now - this.lastCollectPass >= 5_000) {
      this.lastCollectPass = now;
      const due = await this.db.cluster.findMany({
        where: { OR: [{ eventsAt: null }, { eventsAt: { lt: new Date(now - COLLECT_EVERY_MS) } }], servers: { some: { server: { status: "reachable" } } } },
        include: withServers,
        orderBy: { id: "asc" },
        take: 100,
      });
      for (const row of due) {
        if (!this.managers(row).length || !(await this.claimCollection(row.id, COLLECT_EVERY_MS))) continue;
        this.collect(row).catch(() => {});
      }
    }
    if (now - this.lastPrune >= 60_000) {
      this.lastPrune = now;
      await pruneEvents(this.db, now);
    }
  }

  /** Linked servers that are managers (by the last list) with a connected agent: the leader's first. */
  private managers(row: ClusterRecord) {
    const byId = new Map(storedNodes(row).map((n) => [n.id, n]));
    return row.servers
      .filter((s) => byId.get(s.nodeId)?.role === "manager" && ServerService.agentConnected(s.server))
      .sort((a, b) => Number(byId.get(b.nodeId)?.leader ?? false) - Number(byId.get(a.nodeId)?.leader ?? false));
  }

  private async store(id: number, nodes: SwarmNode[]): Promise<ClusterRecord> {
    return this.db.cluster.update({ where: { id }, data: { nodes: JSON.stringify(nodes), nodesAt: new Date() }, include: withServers });
  }

  /** Node counts by role of the last list. */
  counts(row: ClusterRecord) {
    return roleCounts(storedNodes(row));
  }
}

/** Whether a server's last facts say its engine runs; null when unknown. */
function engineRunning(facts: string | null): boolean | null {
  if (!facts) return null;
  try {
    const f = HostFacts.safeParse(JSON.parse(facts));
    return f.success ? f.data.engine.running : null;
  } catch {
    return null;
  }
}

/** The swarm state of a server's last facts; null when unknown (no facts, or an older agent). */
function swarmStateOf(facts: string | null): string | null {
  if (!facts) return null;
  try {
    const f = HostFacts.safeParse(JSON.parse(facts));
    return f.success ? f.data.engine.swarm : null;
  } catch {
    return null;
  }
}
