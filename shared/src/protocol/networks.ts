import { z } from "zod";
import { LABEL_MANAGED, LABEL_NETWORK_SCOPE } from "./labels.js";
import { DockerName } from "./names.js";

export const NETWORK_DRIVERS = ["bridge", "overlay"] as const;
export const NetworkDriver = z.enum(NETWORK_DRIVERS);
export type NetworkDriver = z.infer<typeof NetworkDriver>;

/** A network the agent creates when missing (idempotent by name). */
export const NetworkSpec = z.object({
  name: DockerName,
  driver: NetworkDriver,
  /** overlay only: encrypted data plane (PLATFORM_OVERLAY_ENCRYPTION) */
  encrypted: z.boolean().default(false),
  /** overlay only: standalone containers may join */
  attachable: z.boolean().default(true),
  labels: z.record(z.string(), z.string().max(4096)).default({}),
});
export type NetworkSpec = z.infer<typeof NetworkSpec>;

/** A network as the engine sees it (sync and detail). */
export const EngineNetwork = z.object({
  id: z.string(),
  name: z.string(),
  driver: z.string(),
  /** local | swarm | global */
  scope: z.string(),
  internal: z.boolean(),
  encrypted: z.boolean(),
  labels: z.record(z.string(), z.string()),
  subnet: z.string().nullable(),
  gateway: z.string().nullable(),
  containers: z.array(z.object({ id: z.string(), name: z.string(), ipv4: z.string().nullable() })),
});
export type EngineNetwork = z.infer<typeof EngineNetwork>;

/**
 * Whether a network found on an engine under a name the platform asked for is the platform's
 * network of that scope: made by the platform (capstan.managed=true) and, when a scope is asked,
 * labelled with it. The agent's ensure (taking an existing network over) and the control plane's
 * sync (verifying a record) hold networks to this one rule, each saying why in its own words.
 */
export type NetworkOwnership = { ok: true } | { ok: false; madeByPlatform: false } | { ok: false; madeByPlatform: true; scope: string | null };

export function networkOwnership(labels: Record<string, string>, askedScope: string | null): NetworkOwnership {
  if (labels[LABEL_MANAGED] !== "true") return { ok: false, madeByPlatform: false };
  const scope = labels[LABEL_NETWORK_SCOPE] ?? null;
  if (askedScope !== null && scope !== askedScope) return { ok: false, madeByPlatform: true, scope };
  return { ok: true };
}
