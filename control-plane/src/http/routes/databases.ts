import {
  ApplicationLogs,
  ApplicationLogsQuery,
  BulkDatabaseEnvBody,
  CREATE_DATABASE_BODIES,
  CreateDatabaseEnvBody,
  CreatedDatabase,
  DATABASE_ENGINES,
  DATABASE_ENGINE_PARAMS,
  DatabaseActionResponse,
  DatabaseDetail,
  DatabaseEnvBulkMutation,
  DatabaseEnvCreated,
  DatabaseEnvMutation,
  DatabaseEnvParams,
  DatabaseEnvVarList,
  DatabaseList,
  DatabaseListQuery,
  DatabaseMutation,
  DatabaseParams,
  DeleteDatabaseBody,
  DeleteDatabaseQuery,
  LOGS_DEFAULTS,
  MessageBody,
  PaginationQuery,
  UpdateDatabaseBody,
  UpdateDatabaseEnvBody,
  defaultDatabaseImage,
  splitCreateBody,
  DatabaseEngine,
} from "@capstan/shared";
import type { z } from "zod";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { ENV_COMPATIBLE_FIELDS, bulkCompatibleFields, deleteFlags, logsLines } from "./applications.js";
import { databaseListDto, databaseEnvDto, databaseDetailDto } from "../mappers/databases.js";

const TAG = "Databases";

const DB_RESPONSES = { 401: ERR[401], 403: ERR[403], 404: ERR[404] } as const;

/** Each engine has its own create path (its own parameters); a path that names no engine is a 404. */
function createRoute(engine: DatabaseEngine) {
  const p = DATABASE_ENGINE_PARAMS[engine];
  const own = [p.user?.param, p.password, p.database?.param, p.rootPassword].filter(Boolean).join(", ");
  return route({
    method: "post",
    path: `/databases/${engine}`,
    tag: TAG,
    summary: `Create a ${engine} database`,
    description:
      `Common parameters: project_uuid, environment_name, server_uuid, destination_uuid (required), name, description, image (default ${defaultDatabaseImage(engine)}), ` +
      `is_public, public_port (required when is_public), limits_memory, limits_cpus, instant_deploy (default true). Engine parameters: ${own}; ` +
      "passwords not given are generated. Unknown fields are refused (422). Needs full access to the environment.",
    body: CREATE_DATABASE_BODIES[engine] as z.ZodType<Record<string, unknown>>,
    responses: {
      201: { description: "Created", schema: CreatedDatabase },
      401: ERR[401],
      403: ERR[403],
      404: { description: "Project, environment, server or destination not found in the caller's team" },
      409: { description: "public_port is already published by another database of the server" },
      422: ERR[422],
    },
    async handler({ scope, services, body }) {
      const { common, credentials } = splitCreateBody(engine, body);
      return { status: 201, body: await services.databases.create(scope, engine, common, credentials) };
    },
  });
}

/** start/stop/restart; Coolify's clients send them as GET too: the same action, scope and permission (docs/compatibility.md). */
function actionRoute(action: "start" | "stop" | "restart", summary: string, description: string, method: "post" | "get" = "post") {
  return route({
    method,
    path: `/databases/{uuid}/${action}`,
    tag: TAG,
    summary: method === "get" ? `${summary} (GET form, for Coolify's clients)` : summary,
    description:
      (method === "get" ? `The GET form of POST /databases/{uuid}/${action}, which Coolify's clients send: it changes state, so it needs the deploy scope like the POST. A HEAD does not act (400). ` : "") +
      `${description} Needs the deploy permission on the database's environment. Waits up to 30 s for the server's agent: 200 with the new status, or 202 when the agent is still at it (the status follows).`,
    scope: "deploy",
    params: DatabaseParams,
    responses: {
      200: { description: "Done", schema: DatabaseActionResponse },
      202: { description: "Still in progress after 30 s", schema: DatabaseActionResponse },
      ...DB_RESPONSES,
      502: { description: "The agent reported a failure, with its reason" },
      503: { description: "The server's agent is not connected" },
    },
    async handler({ scope, services, params }) {
      const r = await services.databases.action(scope, params.uuid, action);
      return { status: r.status, body: { message: r.message, status: r.dbStatus } };
    },
  });
}

export const databaseRoutes = [
  route({
    method: "get",
    path: "/databases",
    tag: TAG,
    summary: "List databases",
    description: "The standalone databases of the token's team in environments the caller may see, oldest first.",
    query: DatabaseListQuery,
    responses: { 200: { description: "Databases", schema: DatabaseList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return {
        body: await paginate(query, () => services.databases.count(scope), async (w) => (await services.databases.list(scope, w)).map(databaseListDto)),
      };
    },
  }),
  ...DATABASE_ENGINES.map(createRoute),
  route({
    method: "get",
    path: "/databases/{uuid}",
    tag: TAG,
    summary: "Get a database's full configuration",
    description:
      "Connection details (internal_db_url; external_db_url while public), credentials, limits, variables (values masked) and backup schedules. " +
      "Passwords are shown to members who may manage the database (full access) and to team owners, admins and automation tokens; masked for everyone else.",
    params: DatabaseParams,
    responses: { 200: { description: "Database", schema: DatabaseDetail }, ...DB_RESPONSES },
    async handler({ scope, services, params }) {
      return { body: await databaseDetailDto(await services.databases.detail(scope, params.uuid), services) };
    },
  }),
  route({
    method: "patch",
    path: "/databases/{uuid}",
    tag: TAG,
    summary: "Change a database's settings",
    description:
      "Only the fields given change. A change of image, published port (is_public, public_port) or limits recreates a running database's container right away " +
      "(its data stays on its volume); a stopped database gets it on its next start. Credentials cannot change.",
    params: DatabaseParams,
    body: UpdateDatabaseBody,
    responses: {
      200: { description: "Updated", schema: DatabaseMutation },
      ...DB_RESPONSES,
      409: { description: "public_port is already published by another database of the server" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const { redeploying } = await services.databases.update(scope, params.uuid, body);
      return {
        body: {
          message: redeploying ? "Database updated; its container is being recreated with the new settings." : "Database updated.",
          data: await databaseDetailDto(await services.databases.detail(scope, params.uuid), services),
        },
      };
    },
  }),
  route({
    method: "delete",
    path: "/databases/{uuid}",
    tag: TAG,
    summary: "Delete a database",
    description:
      "The database's container is always stopped and removed from the server (also its published port). delete_volumes (default false) also removes its data volume; " +
      "docker_cleanup (default true) also its image when no other container uses it; delete_configurations (default true) changes nothing for a database, which keeps " +
      "no configuration files on the server. Backup schedules go with the database; backup files stay. The flags may be sent in the query string or the JSON body.",
    params: DatabaseParams,
    query: DeleteDatabaseQuery,
    body: DeleteDatabaseBody,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...DB_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, query, body }) {
      const flags = deleteFlags(query, body);
      await services.databases.remove(scope, params.uuid, flags);
      return {
        body: {
          message: `Database deleted; its container is being removed from the server${flags.delete_volumes ? " with its data volume" : " (its data volume is kept)"}.`,
        },
      };
    },
  }),
  ...(["post", "get"] as const).flatMap((method) => [
    actionRoute(
      "start",
      "Start a database",
      "A running database stays as it is; any other is (re)created from its current settings on its data volume and waited for until its health check passes.",
      method,
    ),
    actionRoute("stop", "Stop a database", "Stops the database's container gracefully; its data stays on its volume.", method),
    actionRoute(
      "restart",
      "Restart a database",
      "Recreates the database's container from its current settings and variables on its data volume, and waits until its health check passes.",
      method,
    ),
  ]),
  route({
    method: "get",
    path: "/databases/{uuid}/logs",
    tag: TAG,
    summary: "Recent log lines of the database's container",
    description: "lines is Coolify's name of tail.",
    params: DatabaseParams,
    query: ApplicationLogsQuery,
    responses: {
      200: { description: "Logs", schema: ApplicationLogs },
      ...DB_RESPONSES,
      502: { description: "The agent could not read the logs, with its reason" },
      503: { description: "The server's agent is not connected" },
    },
    async handler({ scope, services, params, query }) {
      const r = await services.databases.logs(scope, params.uuid, query.since ?? LOGS_DEFAULTS.since, logsLines(query));
      return { body: { container: r.container, logs: r.lines.map((l) => l + "\n").join(""), truncated: r.truncated } };
    },
  }),
  route({
    method: "get",
    path: "/databases/{uuid}/envs",
    tag: TAG,
    summary: "List a database's environment variables",
    description: "Values are shown to callers who may read the database's secrets (full access on its environment, or a team owner, admin or automation token) with a token that has the read scope; they are null (masked) for everyone else. The same rule holds for the answers of POST, PATCH and bulk.",
    params: DatabaseParams,
    query: PaginationQuery,
    responses: { 200: { description: "Variables", schema: DatabaseEnvVarList }, ...DB_RESPONSES },
    async handler({ scope, services, params, query }) {
      return { body: await paginateArray(query, (await services.databaseEnvs.list(scope, params.uuid)).map(databaseEnvDto)) };
    },
  }),
  route({
    method: "post",
    path: "/databases/{uuid}/envs",
    tag: TAG,
    summary: "Add an environment variable",
    description: "Passed to the database's container after the engine's own variables (which win on a clash); takes effect on the next restart (docs/databases.md).",
    params: DatabaseParams,
    body: CreateDatabaseEnvBody,
    compatibleFields: ENV_COMPATIBLE_FIELDS,
    responses: {
      201: { description: "Created; value as GET .../envs would show it to the caller; uuid repeats data.uuid where Coolify's clients read it", schema: DatabaseEnvCreated },
      ...DB_RESPONSES,
      409: { description: "The key already exists" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const env = await services.databaseEnvs.create(scope, params.uuid, body);
      return { status: 201, body: { message: "Environment variable created.", uuid: env.uuid, data: databaseEnvDto(env) } };
    },
  }),
  route({
    method: "patch",
    path: "/databases/{uuid}/envs",
    tag: TAG,
    summary: "Change an environment variable by key",
    description: "Coolify's update by key (docs/compatibility.md); the same as a one-item PATCH .../envs/bulk of an existing key. Takes effect on the next restart.",
    params: DatabaseParams,
    body: UpdateDatabaseEnvBody,
    compatibleFields: ENV_COMPATIBLE_FIELDS,
    responses: { 200: { description: "Updated; value as GET .../envs would show it to the caller", schema: DatabaseEnvMutation }, ...DB_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const env = await services.databaseEnvs.update(scope, params.uuid, { key: body.key, value: body.value, is_preview: false });
      return { body: { message: "Environment variable updated.", data: databaseEnvDto(env) } };
    },
  }),
  route({
    method: "patch",
    path: "/databases/{uuid}/envs/bulk",
    tag: TAG,
    summary: "Create or update several environment variables at once",
    description: "All or nothing: the variables are validated together and written in one transaction. Takes effect on the next restart. The list is `variables`, or Coolify's name for it, `data`.",
    params: DatabaseParams,
    body: BulkDatabaseEnvBody,
    compatibleFields: bulkCompatibleFields(ENV_COMPATIBLE_FIELDS),
    responses: { 200: { description: "Saved; values as GET .../envs would show them to the caller", schema: DatabaseEnvBulkMutation }, ...DB_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const envs = await services.databaseEnvs.bulk(scope, params.uuid, body.variables);
      return { body: { message: `${envs.length} environment variable(s) saved.`, data: envs.map(databaseEnvDto) } };
    },
  }),
  route({
    method: "delete",
    path: "/databases/{uuid}/envs/{env_uuid}",
    tag: TAG,
    summary: "Delete an environment variable",
    params: DatabaseEnvParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...DB_RESPONSES },
    async handler({ scope, services, params }) {
      await services.databaseEnvs.remove(scope, params.uuid, params.env_uuid);
      return { body: { message: "Environment variable deleted." } };
    },
  }),
];
