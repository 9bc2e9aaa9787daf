import {
  CreateRegistryBody,
  CreatedRegistry,
  MessageBody,
  PaginationQuery,
  RegistryDetail,
  RegistryList,
  RegistryMutation,
  RegistryParams,
  RegistrySyncResult,
  RegistryTestResult,
  UpdateRegistryBody,
} from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { registryDetailDto, registryDto } from "../mappers/registries.js";

/** Registries (spec 4.9, issue 18): every route behind the paid feature REGISTRY_MANAGEMENT. */
const TAG = "Registries";
const FEATURE = "REGISTRY_MANAGEMENT" as const;

export const registryRoutes = [
  route({
    method: "get",
    path: "/registries",
    tag: TAG,
    summary: "List registries",
    feature: FEATURE,
    query: PaginationQuery,
    responses: { 200: { description: "Registries", schema: RegistryList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      const s = services.registries;
      return { body: await paginate(query, () => s.count(scope), async (w) => (await s.list(scope, w)).map((r) => registryDto(r, s))) };
    },
  }),
  route({
    method: "post",
    path: "/registries",
    tag: TAG,
    summary: "Add a registry",
    adminOnly: "manage registries",
    description: `The credentials object depends on the type (username and password; cloud_a: cloud_access_key_id, cloud_secret_access_key, cloud_region); it is stored encrypted and never returned. URLs naming loopback, link-local or metadata addresses are refused unless the instance allows private endpoints. is_default true makes it the team's only default. The registry is not contacted: test it with POST /registries/{id}/test.`,
    feature: FEATURE,
    body: CreateRegistryBody,
    responses: { 201: { description: "Created", schema: CreatedRegistry }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const r = await services.registries.create(scope, body);
      return { status: 201, body: { message: "Registry created.", data: { id: r.id, name: r.name, type: body.type } } };
    },
  }),
  route({
    method: "get",
    path: "/registries/{id}",
    tag: TAG,
    summary: "Get a registry",
    feature: FEATURE,
    params: RegistryParams,
    description: "With the assigned servers and the state of the registry's login on each (sync_status, synced_at, error, fingerprint).",
    responses: { 200: { description: "Registry", schema: RegistryDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: registryDetailDto(await services.registries.get(scope, params.id), services.registries) };
    },
  }),
  route({
    method: "patch",
    path: "/registries/{id}",
    tag: TAG,
    summary: "Change a registry",
    adminOnly: "manage registries",
    description: `Only the fields given change; credentials replace the stored ones whole and must fit the registry's type. server_ids replaces the assigned servers (integer ids or uuids of the team's servers; one of another team: 404, nothing changed); servers that leave are logged out (a job each); call sync to log the others in.`,
    feature: FEATURE,
    params: RegistryParams,
    body: UpdateRegistryBody,
    responses: { 200: { description: "Updated", schema: RegistryMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const r = await services.registries.update(scope, params.id, body);
      return { body: { message: "Registry updated.", data: registryDetailDto(r, services.registries) } };
    },
  }),
  route({
    method: "delete",
    path: "/registries/{id}",
    tag: TAG,
    summary: "Delete a registry",
    adminOnly: "manage registries",
    description: `Logs out on every assigned server (a job each), then forgets the registry and its credentials.`,
    feature: FEATURE,
    params: RegistryParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const servers = await services.registries.remove(scope, params.id);
      return { body: { message: `Registry deleted; a logout was dispatched for ${servers} server(s).` } };
    },
  }),
  route({
    method: "post",
    path: "/registries/{id}/test",
    tag: TAG,
    summary: "Test a registry's login",
    adminOnly: "test registries",
    description: `The Docker Registry HTTP API V2 login handshake from the control plane (GET /v2/, then basic or bearer-token authentication against the realm the registry names). A failed login is not an HTTP error: 200 with authenticated false and the registry's reason.`,
    feature: FEATURE,
    params: RegistryParams,
    responses: { 200: { description: "Test result", schema: RegistryTestResult }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const r = await services.registries.test(scope, params.id);
      return {
        body: r.authenticated
          ? { message: r.note ? `Login succeeded. ${r.note}` : "Login succeeded.", authenticated: true }
          : { message: "Login failed.", authenticated: false, error: r.error ?? "unknown error" },
      };
    },
  }),
  route({
    method: "post",
    path: "/registries/{id}/sync",
    tag: TAG,
    summary: "Write the registry's login on its servers",
    adminOnly: "sync registries",
    description: `Dispatches a login job to every assigned server (the agent checks the login with its engine and keeps it for its pulls; the password never reaches a command line). Asynchronous: watch sync_status in the detail.`,
    feature: FEATURE,
    params: RegistryParams,
    responses: { 200: { description: "Dispatched", schema: RegistrySyncResult }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const count = await services.registries.sync(scope, params.id);
      return { body: { message: `Sync dispatched for ${count} server(s).`, count } };
    },
  }),
];
