import { z } from "zod";

/**
 * Whether a server's agent is connected, as the control plane records it: pending until its
 * agent first connects, then reachable or unreachable. One enum for the REST server (Server)
 * and the fleet stream (ServerStatusEvent).
 */
export const SERVER_STATUSES = ["pending", "reachable", "unreachable"] as const;
export const ServerStatus = z.enum(SERVER_STATUSES);
export type ServerStatus = z.infer<typeof ServerStatus>;

/** The kinds of resource whose status an agent reports (the capstan.resource.type label). */
export const RESOURCE_TYPES = ["application", "database", "service"] as const;

/** One resource's composite status as the engine shows it now, e.g. running:healthy. */
export const ResourceStatus = z.object({
  uuid: z.string().min(1).max(64),
  type: z.string().min(1).max(64),
  status: z.string().min(1).max(64),
});
export type ResourceStatus = z.infer<typeof ResourceStatus>;

/**
 * Agent -> control plane. `full`: every resource with containers on the server is listed, so
 * a resource of this server that is missing has no containers left (the control plane shows
 * it as exited). Otherwise only the resources whose containers just changed.
 */
export const ResourceStatusReport = z.object({
  full: z.boolean(),
  resources: z.array(ResourceStatus).max(20_000),
});
export type ResourceStatusReport = z.infer<typeof ResourceStatusReport>;

/** Fleet stream (dashboards): one message per status change of a team's resource. */
export const ResourceStatusEvent = z.object({
  uuid: z.string(),
  type: z.string(),
  status: z.string(),
  server_uuid: z.string(),
  at: z.string(),
});
export type ResourceStatusEvent = z.infer<typeof ResourceStatusEvent>;
