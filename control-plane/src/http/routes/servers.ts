import {
  AgentCredentials,
  ConnectivityHistory,
  ConnectivityQuery,
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
} from "@capstan/shared";
import { z } from "zod";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { serverListItemDto, serverDetailDto, resourceDto, domainDto, connectivityPeriodDto } from "../mappers/servers.js";

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
        body: await paginate(query, () => services.servers.count(scope), async (w) => (await services.servers.list(scope, w)).map(serverListItemDto)),
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
    summary: "Server details: engine, host facts, agent, proxy, destinations",
    description:
      "`proxy` is the server's reverse proxy as its agent last reported it (reported with the host facts, every minute): kind (caddy), container name, image, " +
      "Caddy's version, the container's state (missing: none yet; unknown: not reported), the routes last loaded, and proxy isolation " +
      "(`enabled` on this instance, the server's `phase`).",
    params: ServerParams,
    responses: { 200: { description: "Server", schema: ServerDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: serverDetailDto(await services.servers.detail(scope, params.uuid)) };
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
      return { body: { message: "Server updated.", data: serverDetailDto(s) } };
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
    description:
      "200 when the server is usable. 503 `{message}` when it is not, the reason in the message: its agent is not connected, " +
      "the engine does not answer, compose is missing. Changes nothing: is_usable and settings.unusable_reason follow the facts the agent " +
      "reports (on connect, every minute, and at once when its engine comes or goes).",
    params: ServerParams,
    responses: {
      200: { description: "Usable", schema: ValidateResponse },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      503: { description: "Not usable now: the agent is not connected, or it found the engine or compose missing (the reason is in the message)" },
    },
    async handler({ scope, services, params }) {
      const r = await services.servers.validate(scope, params.uuid);
      return { body: { message: "Server is reachable and usable.", docker_version: r.dockerVersion } };
    },
  }),
  route({
    method: "get",
    path: "/servers/{uuid}/resources",
    tag: "Servers",
    summary: "Every resource on the server, with its last known status (confirmed by the engine when the agent answers)",
    description:
      "From the stored records, so it answers with the agent away: every application and database on the server that the caller may see " +
      "(a member: those of the environments its grants reach). `status` is the last one the agent reported; `stale` is false when the agent " +
      "answered now (a resource it runs no container of is then `exited`), true otherwise, with `last_seen_at` the time the status was last known to hold.",
    params: ServerParams,
    query: PaginationQuery,
    responses: {
      200: { description: "Resources", schema: ServerResourceList },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
    },
    async handler({ scope, services, params, query }) {
      return { body: await paginateArray(query, (await services.servers.resources(scope, params.uuid)).map(resourceDto)) };
    },
  }),
  route({
    method: "get",
    path: "/servers/{uuid}/domains",
    tag: "Servers",
    summary: "Domains of the resources on the server, and whether each is routed now",
    description:
      "From the stored records (the configured domains of the applications the caller may see), one item per resource and host. `routed` is whether " +
      "a container of the resource serves the host now (the agent answered; `stale` false), or null when the agent is away (`stale` true).",
    params: ServerParams,
    query: PaginationQuery,
    responses: {
      200: { description: "Domains", schema: ServerDomainList },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
    },
    async handler({ scope, services, params, query }) {
      return { body: await paginateArray(query, (await services.servers.domains(scope, params.uuid)).map(domainDto)) };
    },
  }),
  // ---- connectivity history (dashboard, issue 22) ----
  route({
    method: "get",
    path: "/servers/{uuid}/connectivity",
    tag: "Servers",
    summary: "The server's agent connectivity history: when it connected and dropped, and for how long (beyond the spec)",
    description:
      "Newest first, at most `limit` periods (default 50, at most 200). Each period is a state the server's agent was in (`reachable`, or " +
      "`unreachable` after it dropped), from `since` until the next began (`until`, null for the current state), and its length in whole " +
      "seconds (to now for the current one). A drop's `since` is the last time the agent was seen. The newest 200 transitions of each server are kept.",
    params: ServerParams,
    query: ConnectivityQuery,
    responses: { 200: { description: "Connectivity periods", schema: ConnectivityHistory }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, query }) {
      const periods = await services.servers.connectivity(scope, params.uuid, query.limit ?? 50);
      const now = new Date();
      return { body: { data: periods.map((p) => connectivityPeriodDto(p, now)) } };
    },
  }),
  route({
    method: "post",
    path: "/servers/{uuid}/install-agent",
    tag: "Servers",
    summary: "Install or replace the agent on the host over SSH with the server's private key",
    description:
      "Issues a new agent token (the old one stops working), checks the server's address again (a name on every address it resolves to now; loopback, link-local and metadata addresses are refused unless the instance allows them) and connects to the checked address with the server's user, port and key, pins the SSH host key on first use, and runs the installer. Waits at most 5 minutes.",
    params: ServerParams,
    responses: {
      200: { description: "Installer ran", schema: z.object({ message: z.string(), exit_code: z.number().int(), output: z.string() }) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      422: { description: "The server's address (or an address its name resolves to now) is loopback, link-local, unspecified, multicast, reserved or cloud metadata" },
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
