import type { DbDeployPayload } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { joinResourceNetworks, type NetworkCtx, prepareResourceNetworks } from "../networks/index.js";

/**
 * The network steps of a database deployment, in one place (agent/src/networks does the work,
 * as for applications): DbDeployPayload carries network / networks / ensure_networks exactly
 * like an application's run.
 */

/**
 * Before anything is stopped: creates payload.ensure_networks that are missing and checks that
 * the primary and every further network exist, so the old container is never removed for a
 * successor that could not be attached.
 */
export function prepareDbNetworks(engine: Engine, payload: DbDeployPayload, ctx: NetworkCtx): Promise<void> {
  return prepareResourceNetworks(engine, payload, ctx);
}

/** After create, before start: the container (created on the primary network) joins payload.networks. */
export async function joinDbNetworks(engine: Engine, container: string, payload: DbDeployPayload, ctx: NetworkCtx): Promise<void> {
  await joinResourceNetworks(engine, container, payload, ctx);
}
