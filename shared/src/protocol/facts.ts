import { z } from "zod";

export const SWARM_ROLES = ["inactive", "worker", "manager"] as const;
export const SwarmRole = z.enum(SWARM_ROLES);
export type SwarmRole = z.infer<typeof SwarmRole>;

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
  }),
});
export type HostFacts = z.infer<typeof HostFacts>;
