import {
  BulkServiceEnvBody,
  CreateServiceBody,
  CreatedService,
  DeleteServiceBody,
  DeleteServiceQuery,
  MessageBody,
  PaginationQuery,
  ServiceDetail,
  ServiceEnvBulkMutation,
  ServiceEnvMutation,
  ServiceEnvParams,
  ServiceEnvVarList,
  ServiceList,
  ServiceListQuery,
  ServiceMutation,
  ServiceParams,
  UpdateServiceBody,
  UpsertServiceEnvBody,
  CreateServiceStorageBody,
  ServiceStorageCreated,
  ServiceStorageList,
  ServiceStorageParams,
  // services lifecycle (issue 17)
  ServiceActionResponse,
  ServiceStartQuery,
} from "@capstan/shared";
import type { z } from "zod";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { deleteFlags } from "./applications.js";
import { serviceDetailDto, serviceEnvDto, serviceListDto, serviceStorageDto } from "../mappers/services.js";

const TAG = "Services";
const SERVICE_RESPONSES = { 401: ERR[401], 403: ERR[403], 404: ERR[404] } as const;
/** What every answer that changes a service's configuration says (spec 4.6: changes apply on the next start). */
const NEXT_START = "Changes take effect on the service's next start or restart.";

/** Services (spec 4.6, issue 17; docs/services.md). */
/**
 * start / stop / restart (services lifecycle, issue 17): jobs on the service's server; the
 * request waits up to 30 s for the agent's answer, as for applications.
 */
const START_RESPONSES: Record<number, { description: string }> = {
  409: { description: "The service cannot start as it is: a required variable without a value, or its compose file no longer fits its settings" },
  422: ERR[422],
};

function serviceActionRoute(action: "start" | "stop" | "restart", summary: string, what: string) {
  const pulls = action !== "stop";
  return route({
    method: "post",
    path: `/services/{uuid}/${action}`,
    tag: TAG,
    summary,
    description:
      `${what} Needs the deploy permission on the service's environment. Waits up to 30 s for the server's agent: 200 with the service's new status, ` +
      "or 202 when the agent is still at it (the status follows from the agent's reports)." +
      (pulls ? " pull=true (or Coolify's latest=true) pulls every image first." : ""),
    scope: "deploy",
    params: ServiceParams,
    ...(pulls ? { query: ServiceStartQuery } : {}),
    responses: {
      200: { description: "Done", schema: ServiceActionResponse },
      202: { description: "Still in progress after 30 s", schema: ServiceActionResponse },
      ...SERVICE_RESPONSES,
      ...(pulls ? START_RESPONSES : {}),
      502: { description: "The agent reported a failure, with its reason" },
      503: { description: "The server's agent is not connected" },
    },
    async handler({ scope, services, params, query }) {
      const q = (query ?? {}) as z.output<typeof ServiceStartQuery>;
      const r = await services.services.action(scope, params.uuid, action, { pull: (q.pull ?? false) || (q.latest ?? false) });
      return { status: r.status, body: { message: r.message, status: r.serviceStatus } };
    },
  });
}

export const serviceRoutes = [
  route({
    method: "get",
    path: "/services",
    tag: TAG,
    summary: "List services",
    description: "The services of the token's team in environments the caller may see, oldest first.",
    query: ServiceListQuery,
    responses: { 200: { description: "Services", schema: ServiceList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return { body: await paginate(query, () => services.services.count(scope), async (w) => (await services.services.list(scope, w)).map(serviceListDto)) };
    },
  }),
  route({
    method: "post",
    path: "/services",
    tag: TAG,
    summary: "Create a service from a template or a compose file",
    description:
      "type names a template as GET /services/templates lists it (the built-in catalog, or an enabled template source's template as its last sync stored it; `slug/name` when names collide; " +
      "a broken template of a source is a 422 with its lint reason), or docker_compose_raw " +
      "gives a custom compose file (beyond the spec, as Coolify has it; checked like an application's compose file). The template's generated values " +
      "(SERVICE_PASSWORD_* and the other generators) are created now, stored sealed, and never regenerated. Needs full access to the environment. " +
      "instant_deploy true queues the service's first start right after the create (as POST /services/{uuid}/start; it runs when the server's agent is there). " +
      "Each routable service application (one a SERVICE_FQDN_*/SERVICE_URL_* variable names) gets a generated domain, answered in domains and stored as its fqdn: " +
      "`<component>-<first 8 characters of the service uuid>.<base>`, the base being a managed DNS domain in wildcard or hybrid mode on the service's server (https), " +
      "else PLATFORM_SERVICE_WILDCARD_DOMAIN, else `<server ip>.sslip.io` (http; a server at localhost uses PLATFORM_PUBLIC_URL's IP or 127.0.0.1; a server added by another DNS name gets none). " +
      "A generated host another resource holds is not taken (message says so). Change or clear it with PATCH /service-applications/{uuid} (docs/services.md).",
    body: CreateServiceBody,
    responses: {
      201: { description: "Created", schema: CreatedService },
      401: ERR[401],
      403: { description: "Insufficient permissions, or a bind mount the caller may not add" },
      404: { description: "Project, environment, server or destination not found in the caller's team" },
      422: ERR[422],
    },
    async handler({ scope, services, body }) {
      return { status: 201, body: await services.services.create(scope, body) };
    },
  }),
  route({
    method: "get",
    path: "/services/{uuid}",
    tag: TAG,
    summary: "Get a service's full configuration",
    description:
      "Its service applications and databases (each with its own uuid, image, status and exclude_from_status; fqdn for applications), the compose content, " +
      "its variables and its aggregated status (docs/services.md). Variable values are shown to callers who may read the service's secrets " +
      "(full access on its environment, or a team owner, admin or automation token, with a token that has the read scope) and null for everyone else.",
    params: ServiceParams,
    responses: { 200: { description: "Service", schema: ServiceDetail }, ...SERVICE_RESPONSES },
    async handler({ scope, services, params }) {
      return { body: serviceDetailDto(await services.services.detail(scope, params.uuid), (v) => services.services.open(v)) };
    },
  }),
  route({
    method: "patch",
    path: "/services/{uuid}",
    tag: TAG,
    summary: "Change a service's name or compose file",
    description:
      `Only the fields given change. docker_compose_raw is checked like an application's compose file (docs/compose.md); variables it needs that the service lacks are generated, the ones it has keep their values; ` +
      `a routable service application it adds gets a generated domain as at creation (existing components keep theirs). ${NEXT_START}`,
    params: ServiceParams,
    body: UpdateServiceBody,
    responses: { 200: { description: "Updated", schema: ServiceMutation }, ...SERVICE_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const { notes } = await services.services.update(scope, params.uuid, body);
      return { body: { message: [`Service updated. ${NEXT_START}`, ...notes].join(" "), data: serviceDetailDto(await services.services.detail(scope, params.uuid), (v) => services.services.open(v)) } };
    },
  }),
  route({
    method: "delete",
    path: "/services/{uuid}",
    tag: TAG,
    summary: "Delete a service",
    description:
      "The service goes with its components and variables. delete_configurations (default true), delete_volumes (default false) and docker_cleanup (default true) " +
      "are taken as for applications, in the query string or the JSON body. Its containers, its own network and its proxy routes always go (a removal job on its server, which runs when " +
      "the agent is there); its volumes only with delete_volumes, the compose file the agent keeps unless delete_configurations is false, its images with docker_cleanup.",
    params: ServiceParams,
    query: DeleteServiceQuery,
    body: DeleteServiceBody,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...SERVICE_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, query, body }) {
      await services.services.remove(scope, params.uuid, deleteFlags(query, body));
      return { body: { message: "Service deleted." } };
    },
  }),
  route({
    method: "get",
    path: "/services/{uuid}/envs",
    tag: TAG,
    summary: "List a service's environment variables",
    description:
      "Its template's generated values (is_generated) and the variables users set. Values are shown to callers who may read the service's secrets and null (masked) for everyone else; " +
      "the same rule holds for the answers of PATCH and bulk.",
    params: ServiceParams,
    query: PaginationQuery,
    responses: { 200: { description: "Variables", schema: ServiceEnvVarList }, ...SERVICE_RESPONSES },
    async handler({ scope, services, params, query }) {
      return { body: await paginateArray(query, (await services.serviceEnvs.list(scope, params.uuid)).map(serviceEnvDto)) };
    },
  }),
  route({
    method: "patch",
    path: "/services/{uuid}/envs",
    tag: TAG,
    summary: "Create or change an environment variable by key",
    description: `Creates the key, or changes its value when it exists (a generated value the user sets is no longer marked generated). ${NEXT_START}`,
    params: ServiceParams,
    body: UpsertServiceEnvBody,
    responses: { 200: { description: "Saved; value as GET .../envs would show it to the caller", schema: ServiceEnvMutation }, ...SERVICE_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const [env] = await services.serviceEnvs.bulk(scope, params.uuid, [{ key: body.key, value: body.value }]);
      return { body: { message: `Environment variable saved. ${NEXT_START}`, data: serviceEnvDto(env!) } };
    },
  }),
  route({
    method: "patch",
    path: "/services/{uuid}/envs/bulk",
    tag: TAG,
    summary: "Create or change several environment variables at once",
    description: `All or nothing, in one transaction. The list is \`variables\`, or Coolify's name for it, \`data\`. ${NEXT_START}`,
    params: ServiceParams,
    body: BulkServiceEnvBody,
    responses: { 200: { description: "Saved; values as GET .../envs would show them to the caller", schema: ServiceEnvBulkMutation }, ...SERVICE_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const envs = await services.serviceEnvs.bulk(scope, params.uuid, body.variables);
      return { body: { message: `${envs.length} environment variable(s) saved. ${NEXT_START}`, data: envs.map(serviceEnvDto) } };
    },
  }),
  route({
    method: "delete",
    path: "/services/{uuid}/envs/{env_uuid}",
    tag: TAG,
    summary: "Delete an environment variable",
    description: `A generated value deleted is generated anew (a different value) when the compose file next needs it. ${NEXT_START}`,
    params: ServiceEnvParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...SERVICE_RESPONSES },
    async handler({ scope, services, params }) {
      await services.serviceEnvs.remove(scope, params.uuid, params.env_uuid);
      return { body: { message: `Environment variable deleted. ${NEXT_START}` } };
    },
  }),
  route({
    method: "get",
    path: "/services/{uuid}/storages",
    tag: TAG,
    summary: "List a service's storages (volumes and bind mounts users added)",
    description: "The volumes the compose file itself declares are part of its compose content; these are the ones added through the API, each mounted into one compose service.",
    params: ServiceParams,
    query: PaginationQuery,
    responses: { 200: { description: "Storages", schema: ServiceStorageList }, ...SERVICE_RESPONSES },
    async handler({ scope, services, params, query }) {
      const { service, rows } = await services.services.storages(scope, params.uuid);
      return { body: await paginateArray(query, rows.map((r) => serviceStorageDto(service.uuid, r))) };
    },
  }),
  route({
    method: "post",
    path: "/services/{uuid}/storages",
    tag: TAG,
    summary: "Add a storage to a service",
    description:
      "A named Docker volume (`<service uuid>-<name>` on the server) or, with host_path, a bind mount of a server directory (team owners and admins, or members where the team allows it), " +
      `mounted at mount_path into service_name (default: the service's first application). ${NEXT_START}`,
    params: ServiceParams,
    body: CreateServiceStorageBody,
    responses: {
      201: { description: "Created; uuid repeats data.uuid where Coolify's clients read it", schema: ServiceStorageCreated },
      ...SERVICE_RESPONSES,
      409: { description: "The name or the mount path is taken, or the compose file declares a volume of that name" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const { service, row } = await services.services.addStorage(scope, params.uuid, body);
      return { status: 201, body: { message: `Storage created. ${NEXT_START}`, uuid: row.uuid, data: serviceStorageDto(service.uuid, row) } };
    },
  }),
  route({
    method: "delete",
    path: "/services/{uuid}/storages/{storage_uuid}",
    tag: TAG,
    summary: "Delete a storage of a service",
    description: `The mount goes from the next start; a volume's data stays on the server until the service is deleted with delete_volumes=true. ${NEXT_START}`,
    params: ServiceStorageParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...SERVICE_RESPONSES },
    async handler({ scope, services, params }) {
      await services.services.removeStorage(scope, params.uuid, params.storage_uuid);
      return { body: { message: `Storage deleted. ${NEXT_START}` } };
    },
  }),
  // services lifecycle (issue 17)
  serviceActionRoute(
    "start",
    "Start a service",
    "Runs the service's compose file as it is now (its template rendered with its stored values: generated secrets byte-identical, changed variables and storages taking effect); containers already running unchanged stay.",
  ),
  serviceActionRoute("stop", "Stop a service", "Stops every container of the service; they stay, with their volumes, until the next start."),
  serviceActionRoute("restart", "Restart a service", "As start, with every container recreated."),
];
