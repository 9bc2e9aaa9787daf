import { z } from "zod";
import { multiline } from "../validation/text.js";
import { Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";
import { ServerStatus } from "../protocol/status.js";
import { ProxyIsolationState } from "./networks.js";

/** Hostnames or IPv4/IPv6 addresses; nothing that could smuggle options or spaces. */
export const HostAddress = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .refine(
    (v) => z.ipv4().safeParse(v).success || z.ipv6().safeParse(v).success || /^(?=.{1,253}$)([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/.test(v),
    "Use an IPv4 or IPv6 address or a hostname.",
  );
export const SshUser = z.string().regex(/^[a-z_][a-z0-9_-]{0,31}$/, "Use a valid Unix user name.");
const ServerName = z.string().trim().min(1).max(255);
const ServerDescription = multiline(z.string().max(2000));

/**
 * Coolify's proxy kind of a server (docs/compatibility.md). Every server here runs the platform's
 * reverse proxy (Caddy, docs/proxy.md): caddy and traefik, a reverse proxy either way, are
 * accepted; none (no proxy on the server) is not available and refused.
 */
const ProxyType = z
  .enum(["caddy", "traefik"], { error: "Every server runs the platform's reverse proxy (Caddy): proxy_type none is not available; send caddy or leave it out." })
  .optional()
  .meta({ description: "Coolify's proxy kind; caddy or traefik (the platform's proxy, Caddy, runs either way)" });

export const CreateServerBody = requestBody({
  name: ServerName,
  description: z.string().max(2000).optional(),
  ip: HostAddress,
  port: z.number().int().min(1).max(65535).default(22),
  user: SshUser.default("root"),
  private_key_uuid: Uuid,
  is_build_server: z.boolean().default(false),
  proxy_type: ProxyType,
});
export const UpdateServerBody = requestBody({
  name: ServerName.optional(),
  description: ServerDescription.optional(),
  ip: HostAddress.optional(),
  port: z.number().int().min(1).max(65535).optional(),
  user: SshUser.optional(),
  private_key_uuid: Uuid.optional(),
  is_build_server: z.boolean().optional(),
  proxy_type: ProxyType,
})
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field.", path: ["name"] });

export const ServerSettings = z.object({
  is_reachable: z.boolean(),
  is_usable: z.boolean(),
  unusable_reason: z
    .string()
    .nullable()
    .meta({ description: "Why the server is not usable (agent not connected, no Docker Engine and how to get one, no compose); null when it is" }),
});

export const Server = z
  .object({
    uuid: z.string(),
    name: z.string(),
    description: z.string(),
    ip: z.string(),
    port: z.number().int(),
    user: z.string(),
    is_build_server: z.boolean(),
    status: ServerStatus,
    settings: ServerSettings,
    created_at: Timestamp,
  })
  .meta({ id: "Server" });
export type Server = z.infer<typeof Server>;

export const Destination = z
  .object({ uuid: z.string(), name: z.string(), network: z.string() })
  .meta({ id: "Destination" });

export const ServerDetail = Server.extend({
  private_key_uuid: z.string(),
  engine: z.object({
    version: z.string().nullable(),
    api_version: z.string().nullable(),
    compose_version: z.string().nullable(),
    swarm: z.string().nullable(),
  }),
  host: z
    .object({
      hostname: z.string(),
      os: z.string(),
      arch: z.string(),
      kernel: z.string(),
      cpu_cores: z.number().int(),
      memory_total_bytes: z.number(),
      disk_total_bytes: z.number(),
      disk_free_bytes: z.number(),
    })
    .nullable(),
  agent: z.object({ connected: z.boolean(), version: z.string().nullable(), last_seen_at: Timestamp.nullable() }),
  proxy: z
    .object({
      kind: z.literal("caddy"),
      /** The proxy container's name on the server. */
      name: z.string(),
      image: z.string().nullable(),
      version: z.string().nullable().meta({ description: "Caddy's version as the proxy container reports it; null when not known (not running, not reported yet)" }),
      status: z.string().meta({
        description: "The proxy container's state as the agent last reported it: running, exited, restarting, paused, created, dead; missing when there is none (nothing routed yet); unknown when the agent has not reported it",
      }),
      routes: z.number().int().nullable().meta({ description: "Routes in the configuration the agent last loaded into the proxy; null before its first sync since the agent started" }),
      warnings: z
        .array(z.string())
        .optional()
        .meta({
          description:
            "Why the agent's last proxy sync left a container, route or proxy.* label out (docs/proxy-labels.md); empty when nothing was; absent until an agent that reports it has synced its proxy",
        }),
      isolation: ProxyIsolationState,
      reported_at: Timestamp.nullable().meta({ description: "When the agent last reported it (its last contact); null without a report" }),
    })
    .meta({ id: "ServerProxy" }),
  destinations: z.array(Destination),
  updated_at: Timestamp,
}).meta({ id: "ServerDetail" });

export const CreatedServer = z
  .object({
    uuid: z.string(),
    name: z.string(),
    ip: z.string(),
    agent_token: z.string().meta({ description: "Shown once: the agent authenticates with it" }),
    join_command: z.string(),
  })
  .meta({ id: "CreatedServer" });

export const AgentCredentials = z.object({ agent_token: z.string(), join_command: z.string() });

/** When a status was last known to hold, and whether it is the engine's now (docs/decisions.md). */
const Freshness = {
  stale: z.boolean().meta({ description: "true: the last status the agent reported (the agent is away or did not answer); false: the engine answered now" }),
  last_seen_at: Timestamp.nullable().meta({ description: "When it was last known to hold: now when not stale; else the agent's last contact (null: not reported since the resource was created)" }),
};

export const ServerResource = z
  .object({
    uuid: z.string(),
    name: z.string(),
    type: z.string(),
    status: z.string(),
    ...Freshness,
    project_uuid: z.string(),
    environment_name: z.string(),
  })
  .meta({ id: "ServerResource" });
export const ServerDomain = z
  .object({
    domain: z.string(),
    resource_uuid: z.string(),
    resource_name: z.string(),
    resource_type: z.string(),
    routed: z.boolean().nullable().meta({ description: "Whether a container of the resource serves the domain now; null when the agent is away" }),
    ...Freshness,
  })
  .meta({ id: "ServerDomain" });

export const ValidateResponse = z.object({ message: z.string(), docker_version: z.string() });
export const ServerParams = z.object({ uuid: resourceId("server", Uuid) });
/**
 * An item of GET /servers: the spec's Server plus, beyond the spec (docs/decisions.md), what an
 * overview of the fleet shows for each server, so one read serves it (the dashboard's Fleet page).
 */
export const ServerListItem = Server.extend({
  agent: z.object({ connected: z.boolean(), version: z.string().nullable(), last_seen_at: Timestamp.nullable() }),
  engine_version: z.string().nullable().meta({ description: "The Docker Engine's version as the agent last reported it; null before the first report" }),
  resource_count: z
    .number()
    .int()
    .meta({ description: "How many resources on the server the caller may see: the items of GET /servers/{uuid}/resources (applications and databases)" }),
}).meta({ id: "ServerListItem" });
export type ServerListItem = z.infer<typeof ServerListItem>;

export const ServerList = listOf(ServerListItem);
export const ServerResourceList = listOf(ServerResource);
export const ServerDomainList = listOf(ServerDomain);

// ---- connectivity history (dashboard, issue 22) ----
/** The agent connectivity states a server's history records (its status after each transition). */
export const ConnectivityState = z.enum(["reachable", "unreachable"]).meta({ id: "ConnectivityState" });
export type ConnectivityState = z.infer<typeof ConnectivityState>;

/** GET /servers/{uuid}/connectivity?limit= (beyond the spec, docs/decisions.md): the newest transitions first. */
export const ConnectivityQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).optional().meta({ description: "How many periods, newest first (1 to 200; default 50)" }),
});
export type ConnectivityQuery = z.infer<typeof ConnectivityQuery>;

export const ConnectivityPeriod = z
  .object({
    state: ConnectivityState,
    since: Timestamp.meta({ description: "When the server entered this state (its agent's hello; for a drop, the last time the agent was seen)" }),
    until: Timestamp.nullable().meta({ description: "When the next state began; null for the current one" }),
    duration_seconds: z.number().int().min(0).meta({ description: "until - since, or now - since for the current state, in whole seconds" }),
  })
  .meta({ id: "ConnectivityPeriod" });
export type ConnectivityPeriod = z.infer<typeof ConnectivityPeriod>;

export const ConnectivityHistory = z.object({ data: z.array(ConnectivityPeriod) }).meta({ id: "ConnectivityHistory" });
export type ConnectivityHistory = z.infer<typeof ConnectivityHistory>;
