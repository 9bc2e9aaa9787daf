import { type EngineNetwork, LABEL_MANAGED, LABEL_NETWORK_SCOPE, networkOwnership } from "@capstan/shared";

/** Scopes of records that stand for a network the platform creates itself; system records only describe what was found. */
const PLATFORM_MADE = new Set(["environment", "shared", "proxy"]);

/**
 * Why the engine's network of a record's name is not the network the record stands for, or
 * null when it is (or the record is a system one, which claims nothing). The agent's ensure
 * (agent/src/networks/ensure.ts) takes an existing network over only when it carries
 * capstan.managed=true and the scope asked for; sync holds a record to the same rule, so a
 * network made by hand under a platform record's name never passes for the platform's, and is
 * never attached or joined as one.
 */
export function foreignNetworkReason(record: { name: string; scope: string }, engine: Pick<EngineNetwork, "labels">): string | null {
  if (!PLATFORM_MADE.has(record.scope)) return null;
  const owned = networkOwnership(engine.labels, record.scope);
  if (owned.ok) return null;
  if (!owned.madeByPlatform) {
    return `a network named ${record.name} exists on the server that the platform did not create (no ${LABEL_MANAGED}=true label); remove or rename it`;
  }
  return `a network named ${record.name} exists on the server that the platform did not create as its ${record.scope} network (${LABEL_NETWORK_SCOPE} is ${owned.scope ?? "not set"}); remove or rename it`;
}
