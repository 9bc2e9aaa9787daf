import {
  AttachNetworkBody,
  CreatedNetwork,
  CreateNetworkBody,
  MessageBody,
  NetworkDetail,
  NetworkList,
  NetworkParams,
  NetworkResourceItemParams,
  NetworkResourceParams,
  NetworkServerParams,
  NetworkSyncResult,
  PaginationQuery,
  ProxyCleanupResult,
  ProxyMigrateResult,
  ResourceNetworkList,
  NetworkDriver,
  NetworkScope,
  NetworkStatus,
} from "@capstan/shared";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { networkDto, resourceNetworkDto } from "../mappers/networks.js";

const ADMIN_403 = { description: "Token scope missing, or not a team owner/admin" };
const AGENT_503 = { description: "The server's agent is not connected, or did not answer" };
const DISABLED_409 = { description: "Network management (or proxy isolation) is disabled on this instance" };

/**
 * Networks (spec 4.8). Reads need the read scope and the server in the caller's team; changes
 * to a server's networks need the write scope and a team owner or admin (as servers do);
 * attach and detach need manage (full access) on the resource's environment.
 * Resource routes come first: /networks/resource/... must not be read as a server uuid.
 */
export const networkRoutes = [
  route({
    method: "get",
    path: "/networks/resource/{type}/{uuid}",
    tag: "Networks",
    summary: "Networks a resource joins: its primary network, the proxy network, attached shared networks",
    params: NetworkResourceParams,
    query: PaginationQuery,
    responses: { 200: { description: "Networks of the resource", schema: ResourceNetworkList }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, query }) {
      const all = await services.networks.resourceNetworks(scope, params.type, params.uuid);
      return { body: await paginateArray(query, all.map(resourceNetworkDto)) };
    },
  }),
  route({
    method: "post",
    path: "/networks/resource/{type}/{uuid}/attach",
    tag: "Networks",
    summary: "Attach a shared network of the resource's server (effective on the next deployment)",
    params: NetworkResourceParams,
    body: AttachNetworkBody,
    responses: {
      200: { description: "Attached", schema: MessageBody },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: { description: "Already attached, or network management disabled" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const { resource, network } = await services.networks.attach(scope, params.type, params.uuid, body.network_uuid);
      return {
        body: { message: `Network ${network.name} attached to ${resource.type} ${resource.name}; it takes effect on the ${resource.type}'s next deployment.` },
      };
    },
  }),
  route({
    method: "delete",
    path: "/networks/resource/{type}/{uuid}/{networkUuid}",
    tag: "Networks",
    summary: "Detach a network from a resource (effective on the next deployment)",
    params: NetworkResourceItemParams,
    responses: { 200: { description: "Detached", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params }) {
      const { resource, network } = await services.networks.detach(scope, params.type, params.uuid, params.networkUuid);
      return {
        body: { message: `Network ${network.name} detached from ${resource.type} ${resource.name}; it takes effect on the ${resource.type}'s next deployment.` },
      };
    },
  }),
  route({
    method: "get",
    path: "/networks/{serverUuid}",
    tag: "Networks",
    summary: "List the server's networks",
    params: NetworkServerParams,
    query: PaginationQuery,
    description:
      "Beside `data`, `proxy_isolation` says whether proxy isolation is in effect on the server: `enabled` (the instance's setting) and " +
      "the server's `phase` (none, migrated after proxy/migrate, cleaned after proxy/cleanup or when the server ran no application before).",
    responses: { 200: { description: "Networks", schema: NetworkList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params, query }) {
      const proxyIsolation = await services.networks.proxyIsolation(scope, params.serverUuid);
      const page = await paginate(
        query,
        () => services.networks.count(scope, params.serverUuid),
        async (w) => (await services.networks.list(scope, params.serverUuid, w)).map(networkDto),
      );
      return { body: { ...page, proxy_isolation: proxyIsolation } };
    },
  }),
  route({
    method: "post",
    path: "/networks/{serverUuid}",
    tag: "Networks",
    summary: "Create a shared network (bridge, or overlay on a swarm manager; detected when driver is omitted)",
    params: NetworkServerParams,
    body: CreateNetworkBody,
    responses: {
      201: { description: "Requested; status pending until the agent created it", schema: CreatedNetwork },
      401: ERR[401],
      403: ADMIN_403,
      404: ERR[404],
      409: { description: "The server already has a network of that name, or network management is disabled" },
      422: { description: "Invalid name or driver, or the server is at PLATFORM_MAX_NETWORKS" },
    },
    async handler({ scope, services, params, body }) {
      const n = await services.networks.createShared(scope, params.serverUuid, body);
      return {
        status: 201,
        body: {
          message: `Network ${n.name} requested; the server's agent creates it (status ${n.status}).`,
          data: { uuid: n.uuid, container_network_name: n.name, scope: NetworkScope.parse(n.scope), driver: NetworkDriver.parse(n.driver), status: NetworkStatus.parse(n.status) },
        },
      };
    },
  }),
  route({
    method: "post",
    path: "/networks/{serverUuid}/sync",
    tag: "Networks",
    summary: "Discover networks on the server and verify the recorded ones against it",
    params: NetworkServerParams,
    responses: { 200: { description: "Synced", schema: NetworkSyncResult }, 401: ERR[401], 403: ADMIN_403, 404: ERR[404], 503: AGENT_503 },
    async handler({ scope, services, params }) {
      const c = await services.networks.sync(scope, params.serverUuid);
      return {
        body: {
          message: `Networks synced: ${c.discovered} discovered, ${c.verified} verified, ${c.deleted} marked deleted, ${c.failed} marked failed.`,
          data: c,
        },
      };
    },
  }),
  route({
    method: "post",
    path: "/networks/{serverUuid}/proxy/migrate",
    tag: "Networks",
    summary: "Create the dedicated proxy network and connect the proxy and every resource with a domain to it",
    params: NetworkServerParams,
    responses: { 200: { description: "Migrated", schema: ProxyMigrateResult }, 401: ERR[401], 403: ADMIN_403, 404: ERR[404], 409: DISABLED_409, 503: AGENT_503 },
    async handler({ scope, services, params }) {
      const r = await services.networks.migrateProxy(scope, params.serverUuid);
      return {
        body: {
          message: `Proxy network ${r.network.name} is ready (${r.connected.length} container(s) connected now). Redeploy every resource, then run proxy cleanup.`,
          data: { network_uuid: r.network.uuid, container_network_name: r.network.name, connected: r.connected },
        },
      };
    },
  }),
  route({
    method: "post",
    path: "/networks/{serverUuid}/proxy/cleanup",
    tag: "Networks",
    summary: "Disconnect the proxy from every network but the proxy network (after migrate and redeploys)",
    params: NetworkServerParams,
    responses: {
      200: { description: "Cleaned up", schema: ProxyCleanupResult },
      401: ERR[401],
      403: ADMIN_403,
      404: ERR[404],
      409: { description: "Not migrated yet, routed containers not redeployed yet, or proxy isolation disabled" },
      503: AGENT_503,
    },
    async handler({ scope, services, params }) {
      const r = await services.networks.cleanupProxy(scope, params.serverUuid);
      return {
        body: {
          message: `The proxy now joins only the proxy network${r.disconnectedFrom.length ? ` (left ${r.disconnectedFrom.join(", ")})` : ""}.`,
          data: { disconnected_from: r.disconnectedFrom },
        },
      };
    },
  }),
  route({
    method: "get",
    path: "/networks/{serverUuid}/{networkUuid}",
    tag: "Networks",
    summary: "A network with what the engine reports now: subnet, gateway, connected containers",
    description:
      "The stored record always; `inspection` when the server's agent answers. Without it (agent not connected, inspection failed, network not on the server) " +
      "`inspection` is null and `inspection_reason` says why.",
    params: NetworkParams,
    responses: { 200: { description: "Network", schema: NetworkDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const { network, inspection, inspectionReason } = await services.networks.detail(scope, params.serverUuid, params.networkUuid);
      return { body: { ...networkDto(network), inspection, inspection_reason: inspectionReason } };
    },
  }),
  route({
    method: "delete",
    path: "/networks/{serverUuid}/{networkUuid}",
    tag: "Networks",
    summary: "Delete a shared network: attached resources are detached and its containers disconnected",
    params: NetworkParams,
    responses: {
      200: { description: "Deleted", schema: MessageBody },
      401: ERR[401],
      403: ADMIN_403,
      404: ERR[404],
      409: { description: "Not a shared network, or already deleted or being deleted" },
    },
    description:
      "The network shows `status: pending` with `deleting: true` until the server's agent confirms it removed it (then `deleted`; `failed` with the reason " +
      "if it could not). An agent that is away removes it when it is back.",
    async handler({ scope, services, params }) {
      const n = await services.networks.remove(scope, params.serverUuid, params.networkUuid);
      return {
        body: {
          message: `Network ${n.name} is being deleted: ${n._count.attachments} resource(s) detached; the server's agent disconnects its containers and removes it (until then it shows pending, deleting: true).`,
        },
      };
    },
  }),
];
