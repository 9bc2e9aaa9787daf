import { type EngineNetwork, LABEL_NETWORK_SCOPE, type NetworkSpec, networkOwnership, MANAGED } from "@capstan/shared";
import type { CreateNetworkSpec, NetworkDetails } from "../docker/engine.js";

/** The engine's overlay driver option that turns on IPsec for traffic between nodes. */
export const ENCRYPTED_OPTION = "encrypted";

/** The engine's view of a network as the protocol reports it. */
export function toEngineNetwork(n: NetworkDetails): EngineNetwork {
  return {
    id: n.id,
    name: n.name,
    driver: n.driver,
    scope: n.scope,
    internal: n.internal,
    // The overlay driver turns encryption on when the option is present at all, whatever its value.
    encrypted: Object.hasOwn(n.options, ENCRYPTED_OPTION),
    labels: n.labels,
    subnet: n.subnet,
    gateway: n.gateway,
    containers: n.containers,
  };
}

/**
 * How the engine is asked to create a network: labels are the agent's extra ones, then the
 * spec's, then capstan.managed (the platform's own always wins). A bridge takes no options;
 * an overlay is swarm-scoped, attachable so standalone containers (not only swarm services)
 * can join it, and encrypted when asked.
 */
export function createSpecFor(spec: NetworkSpec, extraLabels: Record<string, string> = {}): CreateNetworkSpec {
  const labels = { ...extraLabels, ...spec.labels, ...MANAGED };
  if (spec.driver === "bridge") return { name: spec.name, driver: "bridge", labels };
  return {
    name: spec.name,
    driver: "overlay",
    labels,
    attachable: spec.attachable,
    ...(spec.encrypted ? { options: { [ENCRYPTED_OPTION]: "" } } : {}),
  };
}

/** Is this network one the platform made (so the platform may detach from or remove it)? */
export const isPlatformNetwork = (n: { labels: Record<string, string> }): boolean => networkOwnership(n.labels, null).ok;

/** The platform scope a network carries (capstan.network.scope), or null. */
export const scopeOf = (n: { labels: Record<string, string> }): string | null => n.labels[LABEL_NETWORK_SCOPE] ?? null;
