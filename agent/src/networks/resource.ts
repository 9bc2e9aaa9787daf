import { type Engine, EngineError } from "../docker/engine.js";
import { connectOne, disconnectOne } from "./connect.js";
import { isPlatformNetwork } from "./engine-network.js";
import { ensureNetworks, findNetwork } from "./ensure.js";
import type { NetworkCtx, ResourceNetworks } from "./types.js";

/**
 * The seam every resource deployment (application rollout, compose, database) calls BEFORE it
 * creates its container(s): creates `ensure_networks` when missing, then checks that the primary
 * network and every extra network exist, failing with a reason that names the missing one.
 */
export async function prepareResourceNetworks(engine: Engine, plan: ResourceNetworks, ctx: NetworkCtx): Promise<void> {
  if (plan.ensure_networks?.length) await ensureNetworks(engine, plan.ensure_networks, ctx);
  for (const name of new Set([plan.network, ...(plan.networks ?? [])])) {
    if ((await engine.listNetworks(name, ctx.signal)).length === 0) {
      throw new EngineError(`network ${name} does not exist on this server${name === plan.network ? " (prepare the server first)" : ""}`);
    }
  }
}

/**
 * The seam every resource deployment calls AFTER it created its container (before or after it
 * started it; the engine takes both): the container ends up on exactly the plan's networks among
 * the platform's: it joins the extra networks it is not on, and leaves the platform networks
 * (capstan.managed) the plan no longer lists (a detach takes effect on the next deployment,
 * spec section 1 rule 8). Networks the platform did not make are never touched. For a freshly
 * created container this only joins. Returns the names of the networks joined.
 */
export async function joinResourceNetworks(engine: Engine, container: string, plan: ResourceNetworks, ctx: NetworkCtx): Promise<string[]> {
  const { signal, progress } = ctx;
  const wanted = new Set([plan.network, ...(plan.networks ?? [])]);
  const joined: string[] = [];
  for (const name of wanted) {
    if (name === plan.network) continue; // created on it
    const net = await findNetwork(engine, name, signal);
    if (!net) throw new EngineError(`network ${name} does not exist on this server`);
    if (await connectOne(engine, net, container, signal)) {
      joined.push(name);
      progress(`container ${container} joined network ${name}`);
    }
  }
  const c = await engine.inspectContainer(container, signal);
  if (!c) throw new EngineError(`container ${container} vanished while joining its networks`);
  for (const name of c.networks ?? []) {
    if (wanted.has(name)) continue;
    const net = await findNetwork(engine, name, signal);
    if (!net || !isPlatformNetwork(net)) continue;
    if (await disconnectOne(engine, net, container, signal)) progress(`container ${container} left network ${name} (no longer attached)`);
  }
  return joined;
}
