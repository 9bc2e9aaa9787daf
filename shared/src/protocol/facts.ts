import { z } from "zod";

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
  }),
});
export type HostFacts = z.infer<typeof HostFacts>;
