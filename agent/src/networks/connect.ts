import { type Engine, EngineError, isNotFound } from "../docker/engine.js";
import { findNetwork } from "./ensure.js";
import type { NetworkCtx } from "./types.js";

/**
 * A network by id (API calls: a name may be ambiguous when the engine holds duplicates) and
 * name (a container's inspection lists its networks by name).
 */
export interface NetworkRef {
  id: string;
  name: string;
}

/** Is the container (by exact name, not id) attached to the network (by name), as the engine sees it now? null: the container is gone. */
async function attached(engine: Engine, container: string, network: string, signal: AbortSignal): Promise<boolean | null> {
  const c = await engine.inspectContainer(container, signal);
  if (!c) return null;
  return (c.networks ?? []).includes(network);
}

/**
 * Attaches one container (by name) to one network unless it is attached already. A failure that leaves
 * the container attached anyway (a concurrent connect) is success. Returns whether it changed.
 */
export async function connectOne(engine: Engine, network: NetworkRef, container: string, signal: AbortSignal): Promise<boolean> {
  if (await attached(engine, container, network.name, signal)) return false;
  try {
    await engine.connectNetwork(network.id, container, signal);
    return true;
  } catch (err) {
    if (await attached(engine, container, network.name, signal).catch(() => false)) return false;
    throw err;
  }
}

/** Detaches one container (by name) from one network (force, so a stopped one too); not attached or gone is fine. */
export async function disconnectOne(engine: Engine, network: NetworkRef, container: string, signal: AbortSignal): Promise<boolean> {
  if ((await attached(engine, container, network.name, signal)) !== true) return false;
  try {
    await engine.disconnectNetwork(network.id, container, true, signal);
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    if ((await attached(engine, container, network.name, signal).catch(() => true)) !== true) return false;
    throw err;
  }
}

/**
 * network.connect: attaches (or with `disconnect`, detaches) each named container. Idempotent:
 * a container already in the wanted state is left alone; one that does not exist is skipped
 * with a progress line (a redeploy may have replaced it since the control plane looked).
 * Returns the names of the containers that changed.
 */
export async function connectContainers(
  engine: Engine,
  input: { network: string; containers: readonly string[]; disconnect?: boolean },
  ctx: NetworkCtx,
): Promise<{ changed: string[] }> {
  const { signal, progress } = ctx;
  const net = await findNetwork(engine, input.network, signal);
  if (!net) {
    if (input.disconnect) {
      progress(`network ${input.network} does not exist; nothing to disconnect`);
      return { changed: [] };
    }
    throw new EngineError(`network ${input.network} does not exist on this server`, 404);
  }
  const changed: string[] = [];
  for (const name of [...new Set(input.containers)]) {
    signal.throwIfAborted();
    if (!(await engine.inspectContainer(name, signal))) {
      progress(`container ${name} does not exist; skipped`);
      continue;
    }
    const did = input.disconnect ? await disconnectOne(engine, net, name, signal) : await connectOne(engine, net, name, signal);
    if (did) {
      changed.push(name);
      progress(`container ${name} ${input.disconnect ? "disconnected from" : "connected to"} network ${net.name}`);
    }
  }
  return { changed };
}
