import {
  AgentCredentials,
  CreatedServer,
  CreateServerBody,
  MessageBody,
  PaginationQuery,
  ServerDetail,
  ServerDomainList,
  ServerList,
  ServerParams,
  ServerResourceList,
  UpdateServerBody,
  ValidateResponse,
  ServerStatus,
  type ManagedContainer,
  DatabaseEngine,
  LABEL_DATABASE_ENGINE,
  LABEL_DOMAINS,
  LABEL_RESOURCE_NAME,
  LABEL_RESOURCE_TYPE,
  LABEL_RESOURCE_UUID,
  RESOURCE_TYPE_APPLICATION,
  databaseType,
} from "@capstan/shared";
import { z } from "zod";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR, iso } from "../dto.js";
import { ServerService, type ServerWithDetail } from "../../services/servers.js";

type ServerRecord = {
  uuid: string;
  name: string;
  description: string;
  ip: string;
  port: number;
  user: string;
  isBuildServer: boolean;
  status: string;
  isUsable: boolean;
  createdAt: Date;
};

const serverDto = (s: ServerRecord) => ({
  uuid: s.uuid,
  name: s.name,
  description: s.description,
  ip: s.ip,
  port: s.port,
  user: s.user,
  is_build_server: s.isBuildServer,
  status: ServerStatus.parse(s.status),
  settings: { is_reachable: s.status === "reachable", is_usable: s.status === "reachable" && s.isUsable },
  created_at: iso(s.createdAt),
});

const detailDto = (s: ServerWithDetail) => {
  const facts = ServerService.facts(s);
  return {
    ...serverDto(s),
    private_key_uuid: s.privateKey.uuid,
    engine: {
      version: facts?.engine.version ?? null,
      api_version: facts?.engine.api_version ?? null,
      compose_version: facts?.engine.compose_version ?? null,
      swarm: facts?.engine.swarm ?? null,
    },
    host: facts
      ? {
          hostname: facts.hostname,
          os: `${facts.os.distro} ${facts.os.release}`.trim(),
          arch: facts.os.arch,
          kernel: facts.os.kernel,
          cpu_cores: facts.cpu.cores,
          memory_total_bytes: facts.memory.total_bytes,
          disk_total_bytes: facts.disk.total_bytes,
          disk_free_bytes: facts.disk.free_bytes,
        }
      : null,
    agent: { connected: ServerService.agentConnected(s), version: s.agentVersion, last_seen_at: s.lastSeenAt ? iso(s.lastSeenAt) : null },
    destinations: s.destinations.map((d) => ({ uuid: d.uuid, name: d.name, network: d.networkName })),
    updated_at: iso(s.updatedAt),
  };
};

/** Labels the platform puts on what it runs; resources and domains are read from them. */
const LABEL = { uuid: LABEL_RESOURCE_UUID, name: LABEL_RESOURCE_NAME, type: LABEL_RESOURCE_TYPE, domains: LABEL_DOMAINS, engine: LABEL_DATABASE_ENGINE };

/**
 * The spec's type of a container's resource: application, or standalone-<engine> for a database
 * (the agent labels database containers with their engine). A database container without a known
 * engine label was not made by the platform's agent: it keeps the plain label value.
 */
export function resourceTypeOf(labels: Record<string, string>): string {
  const type = labels[LABEL.type] ?? RESOURCE_TYPE_APPLICATION;
  if (type !== "database") return type;
  const engine = DatabaseEngine.safeParse(labels[LABEL.engine]);
  return engine.success ? databaseType(engine.data) : type;
}

const resourcesOf = (containers: ManagedContainer[]) => {
  const seen = new Map<string, { uuid: string; name: string; type: string; status: string }>();
  for (const c of containers) {
    const uuid = c.labels[LABEL.uuid];
    if (!uuid || seen.has(uuid)) continue;
    seen.set(uuid, { uuid, name: c.labels[LABEL.name] ?? c.name, type: resourceTypeOf(c.labels), status: c.status });
  }
  return [...seen.values()];
};

const domainsOf = (containers: ManagedContainer[]) =>
  containers.flatMap((c) => {
    const uuid = c.labels[LABEL.uuid];
    if (!uuid) return [];
    return (c.labels[LABEL.domains] ?? "")
      .split(",")
      .map((d) => d.trim())
      .filter(Boolean)
      .map((domain) => ({
        domain,
        resource_uuid: uuid,
        resource_name: c.labels[LABEL.name] ?? c.name,
        resource_type: resourceTypeOf(c.labels),
      }));
  });

/** Coolify's server fields this API accepts and ignores, with the reason (docs/compatibility.md). */
const SERVER_COMPATIBLE_FIELDS = {
  instant_validate: "a server is checked as soon as its agent connects; GET /servers/{uuid}/validate reports the result",
} as const;

export const serverRoutes = [
  route({
    method: "get",
    path: "/servers",
    tag: "Servers",
    summary: "List servers",
    query: PaginationQuery,
    responses: { 200: { description: "Servers", schema: ServerList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return {
        body: await paginate(query, () => services.servers.count(scope), async (w) => (await services.servers.list(scope, w)).map(serverDto)),
      };
    },
  }),
  route({
    method: "post",
    path: "/servers",
    tag: "Servers",
    summary: "Register a server; returns the agent token and join command once",
    body: CreateServerBody,
    compatibleFields: SERVER_COMPATIBLE_FIELDS,
    responses: { 201: { description: "Created", schema: CreatedServer }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const { server, agentToken, joinCommand } = await services.servers.create(scope, body);
      return { status: 201, body: { uuid: server.uuid, name: server.name, ip: server.ip, agent_token: agentToken, join_command: joinCommand } };
    },
  }),
  route({
    method: "get",
    path: "/servers/{uuid}",
    tag: "Servers",
    summary: "Server details: engine, host facts, agent, destinations",
    params: ServerParams,
    responses: { 200: { description: "Server", schema: ServerDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const s = await services.servers.get(scope, params.uuid);
      return { body: detailDto(s) };
    },
  }),
  route({
    method: "patch",
    path: "/servers/{uuid}",
    tag: "Servers",
    summary: "Update a server",
    params: ServerParams,
    body: UpdateServerBody,
    compatibleFields: SERVER_COMPATIBLE_FIELDS,
    responses: {
      200: { description: "Updated", schema: z.object({ message: z.string(), data: ServerDetail }) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const s = await services.servers.update(scope, params.uuid, body);
      return { body: { message: "Server updated.", data: detailDto(s) } };
    },
  }),
  route({
    method: "delete",
    path: "/servers/{uuid}",
    tag: "Servers",
    summary: "Remove a server from management (the host is untouched; its agent stands down)",
    params: ServerParams,
    responses: {
      200: { description: "Removed", schema: MessageBody },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: { description: "Applications still use the server" },
    },
    async handler({ scope, services, params }) {
      await services.servers.remove(scope, params.uuid);
      return { body: { message: "Server removed from management." } };
    },
  }),
  route({
    method: "post",
    path: "/servers/{uuid}/agent-token",
    tag: "Servers",
    summary: "Rotate the agent token (the old one stops working) and get a new join command",
    params: ServerParams,
    responses: {
      200: { description: "New credentials", schema: z.object({ message: z.string(), data: AgentCredentials }) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
    },
    async handler({ scope, services, params }) {
      const r = await services.servers.rotateAgentToken(scope, params.uuid);
      return { body: { message: "Agent token rotated.", data: { agent_token: r.agentToken, join_command: r.joinCommand } } };
    },
  }),
  route({
    method: "get",
    path: "/servers/{uuid}/validate",
    tag: "Servers",
    summary: "Check the agent, the container engine and compose now",
    params: ServerParams,
    responses: { 200: { description: "Usable", schema: ValidateResponse }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: { description: "Not usable, with the reason" } },
    async handler({ scope, services, params }) {
      const r = await services.servers.validate(scope, params.uuid);
      return { body: { message: "Server is reachable and usable.", docker_version: r.dockerVersion } };
    },
  }),
  route({
    method: "get",
    path: "/servers/{uuid}/resources",
    tag: "Servers",
    summary: "Resources running on the server, with status from the engine",
    params: ServerParams,
    query: PaginationQuery,
    responses: {
      200: { description: "Resources", schema: ServerResourceList },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      503: { description: "Agent not connected" },
    },
    async handler({ scope, services, params, query }) {
      const all = resourcesOf(await services.servers.managedContainers(scope, params.uuid));
      return { body: await paginateArray(query, all) };
    },
  }),
  route({
    method: "get",
    path: "/servers/{uuid}/domains",
    tag: "Servers",
    summary: "Domains served by resources on the server",
    params: ServerParams,
    query: PaginationQuery,
    responses: {
      200: { description: "Domains", schema: ServerDomainList },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      503: { description: "Agent not connected" },
    },
    async handler({ scope, services, params, query }) {
      const all = domainsOf(await services.servers.managedContainers(scope, params.uuid));
      return { body: await paginateArray(query, all) };
    },
  }),
  route({
    method: "post",
    path: "/servers/{uuid}/install-agent",
    tag: "Servers",
    summary: "Install or replace the agent on the host over SSH with the server's private key",
    description: "Issues a new agent token (the old one stops working), connects with the server's user, port and key, pins the SSH host key on first use, and runs the installer. Waits at most 5 minutes.",
    params: ServerParams,
    responses: {
      200: { description: "Installer ran", schema: z.object({ message: z.string(), exit_code: z.number().int(), output: z.string() }) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      502: { description: "SSH connection or host key check failed" },
    },
    async handler({ scope, services, params }) {
      const r = await services.servers.installAgent(scope, params.uuid);
      return {
        status: r.exitCode === 0 ? 200 : 502,
        body: r.exitCode === 0
          ? { message: "Agent installed.", exit_code: r.exitCode, output: r.output }
          : { message: `Agent installer exited with ${r.exitCode}.`, exit_code: r.exitCode, output: r.output },
      };
    },
  }),
];
