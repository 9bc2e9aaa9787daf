import { type Engine, EngineError, isNotFound } from "../docker/engine.js";
import { isPlatformNetwork } from "./engine-network.js";
import { withNetworkLock } from "./ensure.js";
import { markRemoved } from "./removed.js";
import type { NetworkCtx } from "./types.js";

/** Containers may be attached between our disconnects and the removal (a deployment): retry this often. */
const REMOVE_ATTEMPTS = 3;

/**
 * network.remove: detaches every container (force: stopped ones too), then removes the
 * network, every network of that name when the engine holds duplicates. Only networks the
 * platform created (label capstan.managed=true) are removed: the engine's own (bridge, host,
 * none) and anything made behind the platform's back are refused with a reason. A network
 * that does not exist is not an error (`removed: false`). An environment network is remembered
 * as removed (removed.ts), whether it existed or not: this agent never creates it again.
 */
export function removeNetwork(engine: Engine, name: string, ctx: NetworkCtx): Promise<{ removed: boolean; disconnected: string[] }> {
  return withNetworkLock(engine, name, async () => {
    const { signal, progress } = ctx;
    // First, under the name's lock: whatever happens below, a deployment that ensures it later does not bring it back.
    markRemoved(engine, name);
    const found = await engine.listNetworks(name, signal);
    if (found.length === 0) {
      progress(`network ${name} does not exist`);
      return { removed: false, disconnected: [] };
    }
    const foreign = found.find((n) => !isPlatformNetwork(n));
    if (foreign) throw new EngineError(`network ${name} was not created by the platform (no capstan.managed=true label); not removing it`, 409);

    const disconnected = new Set<string>();
    let removed = false;
    for (const n of found) {
      for (let attempt = 1; ; attempt++) {
        signal.throwIfAborted();
        const details = await engine.inspectNetworkDetails(n.id, signal);
        if (!details) break;
        for (const c of details.containers) {
          try {
            await engine.disconnectNetwork(n.id, c.id, true, signal);
            disconnected.add(c.name);
            progress(`container ${c.name} disconnected from network ${name}`);
          } catch (err) {
            // Gone or detached meanwhile: what was wanted.
            if (!isNotFound(err) && (await stillAttached(engine, n.id, c.id, signal))) throw err;
          }
        }
        try {
          await engine.removeNetwork(n.id, signal);
          removed = true;
          progress(`network ${name} removed`);
          break;
        } catch (err) {
          if (isNotFound(err)) break;
          if (attempt >= REMOVE_ATTEMPTS) throw err;
          progress(`network ${name}: ${err instanceof Error ? err.message : String(err)}; retrying`);
        }
      }
    }
    return { removed, disconnected: [...disconnected].sort() };
  });
}

async function stillAttached(engine: Engine, network: string, containerId: string, signal: AbortSignal): Promise<boolean> {
  const d = await engine.inspectNetworkDetails(network, signal).catch(() => null);
  return d !== null && d.containers.some((c) => c.id === containerId);
}
