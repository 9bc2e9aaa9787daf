import type { Engine } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";
import { connectContainers, ensureNetworks, listNetworks, removeNetwork } from "../networks/index.js";
import type { HandlerOptions } from "./server.js";

/** network.ensure: creates the missing networks (idempotent by name) and reports all of them. */
export function networkEnsure(engine: Engine, opts: HandlerOptions = {}): Handler<"network.ensure"> {
  return async ({ networks }, { signal, progress }) => ({
    networks: await ensureNetworks(engine, networks, { signal, progress, extraLabels: opts.extraLabels }),
  });
}

/** network.remove: detaches every container, then removes the network (platform networks only). */
export function networkRemove(engine: Engine): Handler<"network.remove"> {
  return async ({ name }, { signal, progress }) => removeNetwork(engine, name, { signal, progress });
}

/** networks.list: the engine's networks (all, or the named ones) with subnet, gateway and containers. */
export function networksList(engine: Engine): Handler<"networks.list"> {
  return async ({ names }, { signal }) => ({ networks: await listNetworks(engine, { names }, signal) });
}

/** network.connect: attaches or detaches containers by name; already in that state is fine. */
export function networkConnect(engine: Engine): Handler<"network.connect"> {
  return async ({ network, containers, disconnect }, { signal, progress }) =>
    connectContainers(engine, { network, containers, disconnect }, { signal, progress });
}
