/**
 * Network management on the agent (spec section 1 "Network management behavior"): create
 * (bridge, or overlay on a swarm manager), remove, list, attach and detach containers.
 * Deployments (applications, compose, databases) call prepareResourceNetworks before they
 * create a container and joinResourceNetworks after.
 */
export { connectContainers, connectOne, disconnectOne, type NetworkRef } from "./connect.js";
export { createSpecFor, ENCRYPTED_OPTION, isPlatformNetwork, toEngineNetwork } from "./engine-network.js";
export { ensureNetworks, findNetwork, withNetworkLock } from "./ensure.js";
export { listNetworks } from "./list.js";
export { removeNetwork } from "./remove.js";
export { joinResourceNetworks, prepareResourceNetworks } from "./resource.js";
export type { NetworkCtx, ResourceNetworks } from "./types.js";
