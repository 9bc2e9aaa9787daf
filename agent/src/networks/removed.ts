import type { Engine } from "../docker/engine.js";

/**
 * Environment networks this agent removed (network.remove), per engine. The control plane asks
 * for that only when the environment is deleted, and an environment's uuid is never used again,
 * so nothing may create such a network afterwards: a deployment of the deleted environment that
 * was already running here (its job is cancelled, but may be past its last check) would
 * otherwise bring it back and leave it on the host with no record. Names of other networks are
 * not kept: a shared network may be created again under its old name.
 *
 * In memory: after a restart the agent no longer runs those jobs (the control plane cancelled
 * them in the transaction that deleted the environment, and does not deliver cancelled jobs).
 */
const ENV_PREFIX = "capstan-env-";
const MAX_KEPT = 10_000;
const removed = new Set<string>();

const key = (engine: Engine, name: string) => `${engine.socketPath}\0${name}`;

/** Only platform environment networks (capstan-env-<uuid>; shared networks cannot start with capstan). */
export const isEnvironmentNetworkName = (name: string): boolean => name.startsWith(ENV_PREFIX);

export function markRemoved(engine: Engine, name: string): void {
  if (!isEnvironmentNetworkName(name)) return;
  removed.add(key(engine, name));
  // Oldest first out: a Set keeps insertion order.
  while (removed.size > MAX_KEPT) removed.delete(removed.values().next().value!);
}

export const wasRemoved = (engine: Engine, name: string): boolean => removed.has(key(engine, name));
