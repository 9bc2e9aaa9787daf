import { z } from "zod";
import { RegistryAddress } from "./registries.js";

export const SWARM_ROLES = ["inactive", "worker", "manager"] as const;
export const SwarmRole = z.enum(SWARM_ROLES);
export type SwarmRole = z.infer<typeof SwarmRole>;

/**
 * The server's reverse proxy as the agent sees it (GET /servers/{uuid} shows it). status is the
 * engine's state of the proxy container (running, exited, restarting, paused, created, dead) or
 * missing when there is none (nothing was routed on the server yet).
 */
export const ProxyFacts = z.object({
  kind: z.literal("caddy"),
  /** The proxy container's name. */
  name: z.string().max(255),
  image: z.string().max(1000).nullable(),
  /** Caddy's version as the proxy container reports it (e.g. v2.6.2); null when it is not running or does not say. */
  version: z.string().max(100).nullable(),
  status: z.string().max(50),
  /** Routes in the configuration this agent last loaded into it; null before its first sync since the agent started. */
  routes: z.number().int().min(0).nullable(),
  /**
   * Why the last sync left a container, route or `proxy.*` label out (docs/proxy-labels.md);
   * optional: agents before issue 17 do not send it.
   */
  warnings: z.array(z.string().max(500)).max(100).optional(),
});
export type ProxyFacts = z.infer<typeof ProxyFacts>;

/** What an agent reports about its host on connect and periodically after. */
export const HostFacts = z.object({
  hostname: z.string(),
  os: z.object({ platform: z.string(), distro: z.string(), release: z.string(), arch: z.string(), kernel: z.string() }),
  cpu: z.object({ cores: z.number().int(), model: z.string() }),
  memory: z.object({ total_bytes: z.number(), available_bytes: z.number() }),
  disk: z.object({ total_bytes: z.number(), free_bytes: z.number() }),
  engine: z.object({
    running: z.boolean(),
    version: z.string().nullable(),
    api_version: z.string().nullable(),
    compose_version: z.string().nullable(),
    swarm: z.enum(["inactive", "pending", "active", "error", "locked"]).nullable(),
    /**
     * The engine's swarm role (manager: can create overlay networks); the control plane picks a
     * network driver from it. Optional: agents before session 3 do not send it (read as unknown).
     */
    swarm_role: z.enum(SWARM_ROLES).nullable().optional(),
    /**
     * Why the engine does not answer (with what to do about it), null while it runs. Optional:
     * older agents do not send it.
     */
    error: z.string().max(2000).nullable().optional(),
  }),
  /** The reverse proxy; optional: agents before issue 15 do not send it (shown as unknown), null when the engine does not answer. */
  proxy: ProxyFacts.nullable().optional(),
  /**
   * The registry logins the control plane wrote (issue 18): each registry's fingerprint while the
   * stored login is still the one written, null once it was changed or removed by hand (drift).
   * Optional: older agents do not send it (drift unknown).
   */
  registries: z.array(z.object({ registry: RegistryAddress, fingerprint: z.string().max(128).nullable() })).max(1000).optional(),
});
export type HostFacts = z.infer<typeof HostFacts>;

/**
 * Whether a server can run what the platform sends it, from its agent's last facts: the engine
 * answers and compose is there. The reason says what is missing (the agent's own words for an
 * engine that does not answer, with what to do). The control plane stores `usable` as the
 * server's is_usable whenever facts arrive and shows the reason (GET /servers/{uuid}).
 */
export function engineUsability(facts: HostFacts | null): { usable: boolean; reason: string | null } {
  if (!facts) return { usable: false, reason: "The agent has not reported its host yet." };
  if (!facts.engine.running) return { usable: false, reason: facts.engine.error ?? "The Docker Engine on the server does not answer." };
  if (!facts.engine.compose_version) {
    return { usable: false, reason: "Docker Compose is not available on the server: install it (the docker-compose package, or Docker's compose plugin)." };
  }
  return { usable: true, reason: null };
}
