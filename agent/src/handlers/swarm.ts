import { SWARM_EVENT_TYPES, SWARM_RESERVED_LABEL_PREFIX, type SwarmEvent, swarmNodeChangeRefusal, type SwarmNodeChange, type SwarmService, type SwarmStoredObject, type SwarmStoreKind, type SwarmTask } from "@capstan/shared";
import { type Engine, type RegistryCredentials, type SwarmNodeSpec, EngineError, isOutOfSequence } from "../docker/engine.js";
import { hostOf, storedLogin } from "../registries/config.js";
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

// ---- swarm services (issue 20) ----

type RawService = {
  ID?: string;
  Version?: { Index?: number };
  UpdatedAt?: string;
  Spec?: { Name?: string; Mode?: { Replicated?: { Replicas?: number }; Global?: object }; TaskTemplate?: { ContainerSpec?: { Image?: string } } };
  Endpoint?: { Ports?: { PublishedPort?: number; TargetPort?: number; Protocol?: string }[] };
};
type RawTask = {
  ID?: string;
  ServiceID?: string;
  Slot?: number;
  NodeID?: string;
  UpdatedAt?: string;
  DesiredState?: string;
  Status?: { State?: string; Message?: string; Err?: string };
};

/** The image without the digest the swarm pins it to (image:tag@sha256:...). */
const imageOf = (s: RawService) => (s.Spec?.TaskTemplate?.ContainerSpec?.Image ?? "").replace(/@sha256:[a-f0-9]+$/, "");

/** A service as the engine answers it, with the tasks it has (for running / desired). */
export function swarmServiceOf(raw: unknown, tasks: unknown[]): SwarmService {
  const s = raw as RawService;
  const mine = (tasks as RawTask[]).filter((t) => t.ServiceID === s.ID);
  const global = s.Spec?.Mode?.Global !== undefined;
  return {
    id: String(s.ID ?? ""),
    version: typeof s.Version?.Index === "number" ? s.Version.Index : 0,
    name: s.Spec?.Name ?? "",
    image: imageOf(s),
    mode: global ? "global" : "replicated",
    desired: global ? mine.filter((t) => t.DesiredState === "running").length : (s.Spec?.Mode?.Replicated?.Replicas ?? 0),
    running: mine.filter((t) => t.Status?.State === "running").length,
    ports: (s.Endpoint?.Ports ?? []).map((p) => ({ published: typeof p.PublishedPort === "number" ? p.PublishedPort : null, target: p.TargetPort ?? 0, protocol: p.Protocol ?? "tcp" })),
    updated_at: s.UpdatedAt ?? null,
  };
}

export function swarmTaskOf(raw: unknown): SwarmTask {
  const t = raw as RawTask;
  return {
    id: String(t.ID ?? ""),
    slot: typeof t.Slot === "number" && t.Slot > 0 ? t.Slot : null,
    node_id: t.NodeID || null,
    state: t.Status?.State ?? "unknown",
    desired_state: t.DesiredState ?? "unknown",
    message: t.Status?.Message || null,
    error: t.Status?.Err || null,
    updated_at: t.UpdatedAt ?? null,
  };
}

const isNotFound = (err: unknown) => err instanceof EngineError && err.statusCode === 404;

/** swarm.services: every service, by name, with its running tasks counted. */
export function swarmServices(engine: Engine): Handler<"swarm.services"> {
  return async (_payload, { signal }) => {
    const [services, tasks] = await Promise.all([engine.listServices(signal), engine.listTasks({}, signal)]);
    return { services: services.map((s) => swarmServiceOf(s, tasks)).sort((a, b) => a.name.localeCompare(b.name)) };
  };
}

/** swarm.tasks: one service's tasks (found false when the swarm has no such service), by slot then update time. */
export function swarmTasks(engine: Engine): Handler<"swarm.tasks"> {
  return async ({ service_id }, { signal }) => {
    try {
      await engine.inspectService(service_id, signal);
    } catch (err) {
      if (isNotFound(err)) return { found: false, tasks: [] };
      throw err;
    }
    const tasks = (await engine.listTasks({ service: [service_id] }, signal)).map(swarmTaskOf);
    tasks.sort((a, b) => (a.slot ?? 0) - (b.slot ?? 0) || (b.updated_at ?? "").localeCompare(a.updated_at ?? ""));
    return { found: true, tasks };
  };
}

/**
 * The login of the registry a service's image names (the hub's for an image naming no host), as
 * the registries feature stored it on this manager (registry.login of the registries assigned to
 * its server): sent with the service update so the swarm gives it to every node that pulls the
 * image, workers without a login of their own too. Null when this manager has none (public image,
 * or the auth the service was created with stays: the engine keeps it when no header is sent).
 */
export async function serviceRegistryAuth(stateDir: string, image: string): Promise<RegistryCredentials | null> {
  if (!image) return null;
  const registry = hostOf(image) ?? "docker.io";
  const login = await storedLogin(stateDir, registry);
  return login ? { ...login, serveraddress: registry } : null;
}

/**
 * swarm.service.scale: sets a replicated service's replicas at its version index (the whole spec
 * written back, as `docker service scale` does); a global-mode service is refused with the reason;
 * "update out of sequence" is retried once with the fresh version, a second one reported.
 */
export function swarmServiceScale(engine: Engine, opts: { stateDir?: string } = {}): Handler<"swarm.service.scale"> {
  return async ({ service_id, replicas }, { signal, progress }) => {
    for (let attempt = 1; ; attempt++) {
      let raw: RawService & { Spec?: Record<string, unknown> };
      try {
        raw = (await engine.inspectService(service_id, signal)) as typeof raw;
      } catch (err) {
        if (isNotFound(err)) return { outcome: "missing" };
        throw err;
      }
      const name = raw.Spec?.Name ?? service_id;
      if (raw.Spec?.Mode?.Global !== undefined) {
        return { outcome: "refused", reason: `service ${name} runs in global mode (one task on every eligible node): it has no replica count to scale` };
      }
      const version = raw.Version?.Index ?? 0;
      const spec = { ...raw.Spec, Mode: { Replicated: { Replicas: replicas } } };
      const auth = opts.stateDir ? await serviceRegistryAuth(opts.stateDir, imageOf(raw)) : null;
      if (auth && attempt === 1) progress(`service ${name}: passing the login of registry ${auth.serveraddress} (as ${auth.username}) so every node can pull ${imageOf(raw)}`);
      try {
        await engine.updateService(service_id, version, spec, signal, auth);
      } catch (err) {
        if (!isOutOfSequence(err)) throw err;
        if (attempt >= 2) return { outcome: "conflict", reason: `service ${name} changed while it was being scaled (twice in a row); read it again and retry` };
        progress(`service ${name}: version ${version} is out of sequence; retrying with the fresh version`);
        continue;
      }
      progress(`service ${name}: ${replicas} replica(s) at version ${version}`);
      const [after, tasks] = await Promise.all([engine.inspectService(service_id, signal), engine.listTasks({ service: [service_id] }, signal)]);
      return { outcome: "updated", service: swarmServiceOf(after, tasks), attempts: attempt };
    }
  };
}

// ---- swarm secrets and configs (issue 20, w7) ----

type RawStored = { ID?: string; Version?: { Index?: number }; CreatedAt?: string; UpdatedAt?: string; Spec?: { Name?: string; Labels?: Record<string, string> | null; Data?: string } };

/** A secret or config as the engine lists it; a config's data decoded (UTF-8), a secret's always null (never read). */
export function swarmStoredOf(kind: SwarmStoreKind, raw: unknown): SwarmStoredObject {
  const o = raw as RawStored;
  return {
    id: String(o.ID ?? ""),
    version: typeof o.Version?.Index === "number" ? o.Version.Index : 0,
    name: o.Spec?.Name ?? "",
    labels: o.Spec?.Labels ?? {},
    data: kind === "config" && typeof o.Spec?.Data === "string" ? Buffer.from(o.Spec.Data, "base64").toString("utf8") : null,
    created_at: o.CreatedAt ?? null,
    updated_at: o.UpdatedAt ?? null,
  };
}

/** swarm.objects: every secret or config, by name. */
export function swarmObjects(engine: Engine): Handler<"swarm.objects"> {
  return async ({ kind }, { signal }) => ({
    objects: (await engine.listSwarmObjects(kind, signal)).map((o) => swarmStoredOf(kind, o)).sort((a, b) => a.name.localeCompare(b.name)),
  });
}

/**
 * swarm.object.create: the data goes to the engine base64-encoded and nowhere else (no progress
 * line or result carries it; the result is the object as listed back, a secret's data null).
 * A taken name is answered exists with the engine's reason. Run again after a lost answer, it
 * finds the name taken: the caller sees a conflict, never a second object.
 */
export function swarmObjectCreate(engine: Engine): Handler<"swarm.object.create"> {
  return async ({ kind, name, data, labels }, { signal, progress }) => {
    let id: string;
    try {
      id = await engine.createSwarmObject(kind, { Name: name, Labels: labels, Data: Buffer.from(data, "utf8").toString("base64") }, signal);
    } catch (err) {
      if (err instanceof EngineError && (err.statusCode === 409 || /already exists/i.test(err.message))) return { outcome: "exists", reason: `a ${kind} named ${name} already exists in the swarm` };
      throw err;
    }
    progress(`${kind} ${name}: created`);
    const listed = (await engine.listSwarmObjects(kind, signal)).map((o) => swarmStoredOf(kind, o));
    const object = listed.find((o) => o.id === id) ?? listed.find((o) => o.name === name);
    if (!object) throw new Error(`${kind} ${name} was created but is not listed`);
    return { outcome: "created", object };
  };
}

type RawRefs = { Spec?: { Name?: string; TaskTemplate?: { ContainerSpec?: { Secrets?: { SecretID?: string }[] | null; Configs?: { ConfigID?: string }[] | null } } } };

/** The names of the services whose tasks mount the secret or config `id`. */
export function servicesMounting(kind: SwarmStoreKind, id: string, services: unknown[]): string[] {
  return (services as RawRefs[])
    .filter((s) => {
      const c = s.Spec?.TaskTemplate?.ContainerSpec;
      return kind === "secret" ? (c?.Secrets ?? []).some((r) => r.SecretID === id) : (c?.Configs ?? []).some((r) => r.ConfigID === id);
    })
    .map((s) => s.Spec?.Name ?? "")
    .sort();
}

/**
 * swarm.object.delete: refuses (in_use, naming the services) a secret or config a service
 * mounts, as the engine would (its own "in use" refusal, when a service started using it in
 * between, is answered the same); missing when there is no such object.
 */
export function swarmObjectDelete(engine: Engine): Handler<"swarm.object.delete"> {
  return async ({ kind, id }, { signal, progress }) => {
    const [objects, services] = await Promise.all([engine.listSwarmObjects(kind, signal), engine.listServices(signal)]);
    const found = objects.map((o) => swarmStoredOf(kind, o)).find((o) => o.id === id);
    if (!found) return { outcome: "missing" };
    const users = servicesMounting(kind, id, services);
    if (users.length) return { outcome: "in_use", reason: `${kind} ${found.name} is in use by service(s) ${users.join(", ")}: remove it from them first`, services: users };
    try {
      await engine.removeSwarmObject(kind, id, signal);
    } catch (err) {
      if (isNotFound(err)) return { outcome: "missing" };
      if (err instanceof EngineError && /in use/i.test(err.message)) return { outcome: "in_use", reason: err.message, services: [] };
      throw err;
    }
    progress(`${kind} ${found.name}: removed`);
    return { outcome: "deleted", name: found.name };
  };
}

// ---- swarm events (issue 20, w7/events) ----

/** Nanoseconds (decimal text) as the engine's since/until timestamps take them: seconds.nanoseconds. */
export function engineTimestamp(nano: string): string {
  const n = BigInt(nano);
  return `${n / 1_000_000_000n}.${(n % 1_000_000_000n).toString().padStart(9, "0")}`;
}

const MAX_EVENTS = 10_000;
const isEventType = (t: unknown): t is SwarmEvent["type"] => typeof t === "string" && (SWARM_EVENT_TYPES as readonly string[]).includes(t);

/** One engine event as the job answers it, or null when it is not a node/service/secret/config event the engine wrote whole. */
export function swarmEventOf(raw: Record<string, unknown>): SwarmEvent | null {
  const actor = (raw.Actor ?? {}) as { ID?: unknown; Attributes?: unknown };
  const action = typeof raw.Action === "string" ? raw.Action.slice(0, 100) : "";
  const nano = typeof raw.timeNano === "string" && /^\d{1,20}$/.test(raw.timeNano) ? raw.timeNano : null;
  if (!isEventType(raw.Type) || !action || !nano) return null;
  const attributes: Record<string, string> = {};
  if (actor.Attributes && typeof actor.Attributes === "object") {
    for (const [k, v] of Object.entries(actor.Attributes as Record<string, unknown>)) {
      if (k.length <= 255 && typeof v === "string") attributes[k] = v.slice(0, 4096);
    }
  }
  return { type: raw.Type, action, actor_id: typeof actor.ID === "string" ? actor.ID.slice(0, 255) : "", attributes, time_nano: nano };
}

/**
 * swarm.events: what the engine keeps of its node, service, secret and config events from
 * since_nano until now (GET /events with until: the answer ends, no stream stays open), oldest
 * first, at most 10,000 (the next collection goes on from the last one the control plane stored).
 */
export function swarmEvents(engine: Engine, now: () => number = Date.now): Handler<"swarm.events"> {
  return async (payload, { signal }) => {
    const untilNano = (BigInt(now()) * 1_000_000n).toString();
    const raw = await engine.swarmEvents({ since: engineTimestamp(payload.since_nano), until: engineTimestamp(untilNano), types: SWARM_EVENT_TYPES }, signal);
    const events = raw.map(swarmEventOf).filter((e): e is SwarmEvent => e !== null);
    events.sort((a, b) => (BigInt(a.time_nano) < BigInt(b.time_nano) ? -1 : BigInt(a.time_nano) > BigInt(b.time_nano) ? 1 : 0));
    return { events: events.slice(0, MAX_EVENTS), until_nano: untilNano };
  };
}
