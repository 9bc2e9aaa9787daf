import { type EngineNetwork, NetworkSpec, networkOwnership, type SwarmRole } from "@capstan/shared";
import { type Engine, EngineError, isConflict, type NetworkDetails } from "../docker/engine.js";
import { KeyedMutex } from "../mutex.js";
import { createSpecFor, ENCRYPTED_OPTION, scopeOf, toEngineNetwork } from "./engine-network.js";
import { wasRemoved } from "./removed.js";
import type { NetworkCtx } from "./types.js";

/**
 * Creations are serialised per engine and name inside this agent (deployments, jobs and the
 * proxy may ensure one network at once); across processes the engine's duplicate check (a 409)
 * is the arbiter.
 */
const locks = new KeyedMutex();
export const networkLockKey = (engine: Engine, name: string) => `${engine.socketPath}\0network:${name}`;
export const withNetworkLock = <T>(engine: Engine, name: string, fn: () => Promise<T>): Promise<T> => locks.run(networkLockKey(engine, name), fn);

/**
 * Creates each network that does not exist yet and returns all of them as the engine sees
 * them, in the order asked. Idempotent by name: an existing network is returned as it is (the
 * engine cannot change a network's driver or options in place; a difference is reported as a
 * progress line). Only a network the platform made is taken as it is: one of that name without
 * capstan.managed=true (made by hand), or with another capstan.network.scope than asked, fails
 * the job with that reason, so a record never becomes active for a network that is not the one
 * asked for. An environment network this agent removed (its environment was deleted) is not
 * created again. Overlays need a swarm manager: on any other engine the job fails with that
 * reason instead of creating something else.
 */
export async function ensureNetworks(engine: Engine, specs: readonly NetworkSpec[], ctx: NetworkCtx): Promise<EngineNetwork[]> {
  const parsed = specs.map((s) => {
    const r = NetworkSpec.safeParse(s);
    if (!r.success) throw new EngineError(`invalid network spec ${JSON.stringify((s as { name?: unknown })?.name ?? null)}: ${r.error.issues.map((i) => i.message).join("; ")}`);
    return r.data;
  });
  let role: Promise<SwarmRole | null> | null = null;
  const swarmRole = () => (role ??= engine.info(ctx.signal).then((i) => i.swarmRole ?? null));
  const out: EngineNetwork[] = [];
  const seen = new Map<string, EngineNetwork>();
  for (const spec of parsed) {
    ctx.signal.throwIfAborted();
    const done = seen.get(spec.name) ?? (await withNetworkLock(engine, spec.name, () => ensureOne(engine, spec, ctx, swarmRole)));
    seen.set(spec.name, done);
    out.push(done);
  }
  return out;
}

async function ensureOne(engine: Engine, spec: NetworkSpec, ctx: NetworkCtx, swarmRole: () => Promise<SwarmRole | null>): Promise<EngineNetwork> {
  const { signal, progress } = ctx;
  // Checked under the name's lock: a job cancelled while it waited (its environment is being
  // deleted and network.remove holds the lock) creates nothing.
  signal.throwIfAborted();
  if (wasRemoved(engine, spec.name)) {
    throw new EngineError(`network ${spec.name} was removed by the control plane (its environment was deleted); not creating it again`, 409);
  }
  const existing = await findNetwork(engine, spec.name, signal);
  if (existing) {
    const owned = networkOwnership(existing.labels, scopeOf(spec));
    if (!owned.ok && !owned.madeByPlatform) {
      throw new EngineError(
        `network ${spec.name} already exists on this server but was not created by the platform (no capstan.managed=true label); not taking it over: remove or rename it, or use another name`,
        409,
      );
    }
    if (!owned.ok) {
      throw new EngineError(
        `network ${spec.name} already exists on this server as a platform network of scope ${owned.scope ?? "(none)"}, not ${scopeOf(spec)}; not taking it over`,
        409,
      );
    }
    const drift = differences(existing, spec);
    progress(`network ${spec.name} exists${drift ? ` (${drift}; left as it is)` : ""}`);
    return toEngineNetwork(existing);
  }
  if (spec.driver === "overlay") {
    const role = await swarmRole();
    if (role !== "manager") {
      throw new EngineError(
        `network ${spec.name}: overlay networks can only be created on a swarm manager, and this engine is ${role === "worker" ? "a swarm worker" : "not in a swarm"}; use the bridge driver on this server`,
      );
    }
  }
  try {
    await engine.createNetwork(createSpecFor(spec, ctx.extraLabels), signal);
    progress(`network ${spec.name} created (${spec.driver}${spec.driver === "overlay" ? `, attachable: ${spec.attachable}, encrypted: ${spec.encrypted}` : ""})`);
  } catch (err) {
    // Another process created it meanwhile: that one is the network asked for.
    if (!isConflict(err)) throw err;
  }
  const created = await findNetwork(engine, spec.name, signal);
  if (!created) throw new EngineError(`network ${spec.name} vanished right after it was created`);
  return toEngineNetwork(created);
}

/**
 * The network named exactly `name` (the oldest when the engine holds duplicates, which engines
 * before API 1.44 allow when two creators race), fully inspected; null when there is none.
 */
export async function findNetwork(engine: Engine, name: string, signal: AbortSignal): Promise<NetworkDetails | null> {
  for (const n of await engine.listNetworks(name, signal)) {
    const d = await engine.inspectNetworkDetails(n.id, signal);
    if (d) return d;
  }
  return null;
}

function differences(n: NetworkDetails, spec: NetworkSpec): string | null {
  if (n.driver !== spec.driver) return `driver ${n.driver}, asked ${spec.driver}`;
  if (spec.driver === "overlay") {
    const encrypted = Object.hasOwn(n.options, ENCRYPTED_OPTION);
    if (encrypted !== spec.encrypted) return encrypted ? "encrypted, asked unencrypted" : "not encrypted, asked encrypted";
    if (n.attachable !== spec.attachable) return n.attachable ? "attachable, asked not attachable" : "not attachable, asked attachable";
  }
  return null;
}
