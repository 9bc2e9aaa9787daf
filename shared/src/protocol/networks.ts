import { z } from "zod";
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
