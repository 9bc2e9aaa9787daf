import {
  ApplicationActionResponse,
  ApplicationDetail,
  ApplicationEnvParams,
  ApplicationList,
  ApplicationListQuery,
  ApplicationLogs,
  ApplicationLogsQuery,
  ApplicationParams,
  ApplicationStartQuery,
  ApplicationStorageParams,
  BulkEnvBody,
  CreateDeployKeyApplicationBody,
  CreateDockerComposeApplicationBody,
  CreateDockerfileApplicationBody,
  CreateDockerImageApplicationBody,
  CreatedApplication,
  CreateEnvBody,
  CreatePrivateGitAppApplicationBody,
  CreatePrivateGithubAppApplicationBody,
  CreatePublicApplicationBody,
  CreateStorageBody,
  DELETE_DEFAULTS,
  DeleteApplicationBody,
  DeleteApplicationQuery,
  EnvBulkMutation,
  EnvCreated,
  EnvMutation,
  EnvVarList,
  LOGS_DEFAULTS,
  MessageBody,
  PaginationQuery,
  StorageCreated,
  StorageList,
  UpdateApplicationBody,
  UpdateEnvBody,
  logsTail,
  type CreateApplicationCommon,
} from "@capstan/shared";
import { z } from "zod";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { Invalid } from "../../domain/errors.js";
import { requireTokenScope } from "../auth.js";
import type { CreateSource, DeleteFlags } from "../../services/applications.js";
import { applicationListDto, envDto, storageDto, applicationDetailDto } from "../mappers/applications.js";

const TAG = "Applications";

const CREATE_RESPONSES = {
  201: { description: "Created", schema: CreatedApplication },
  401: ERR[401],
  403: ERR[403],
  404: { description: "Project, environment, server, destination, git app or private key not found in the caller's team" },
  409: { description: "A domain is already served by another application of the server" },
  422: ERR[422],
};
const APP_RESPONSES = { 401: ERR[401], 403: ERR[403], 404: ERR[404] } as const;

/** Coolify's flags of a variable this API accepts and ignores (docs/compatibility.md). */
export const ENV_COMPATIBLE_FIELDS = {
  is_literal: "values are always literal here: a $NAME in a value is never expanded",
  is_multiline: "any value may span several lines here",
} as const;

/** The same fields in every item of a bulk list, under both of its names (variables, Coolify's data). */
export function bulkCompatibleFields(fields: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(["variables", "data"].flatMap((list) => Object.entries(fields).map(([k, why]) => [`${list}[].${k}`, why])));
}

/** The line count of a logs request (tail, or Coolify's lines), or the 422 naming lines. */
export function logsLines(query: { tail?: number | undefined; lines?: number | undefined }): number {
  const r = logsTail(query);
  if ("error" in r) throw new Invalid({ lines: [r.error] });
  return r.tail ?? LOGS_DEFAULTS.tail;
}

/** Coolify's create and change fields this API accepts and ignores, with the reason (docs/compatibility.md). */
export const APPLICATION_COMPATIBLE_FIELDS = {
  use_build_server: "the team's build servers are used automatically when it has any (docs/deployments.md#build-servers)",
} as const;

/** The create paths share everything but their body and what the body adds. */
function createRoute<B extends z.ZodObject<z.ZodRawShape>>(
  path: string,
  summary: string,
  description: string,
  body: B,
  source: (b: z.output<B>) => CreateSource,
) {
  return route<undefined, undefined, B>({
    method: "post",
    path,
    tag: TAG,
    summary,
    description:
      description +
      " Every create path also takes the common parameters of POST /applications/public: project_uuid, environment_name, server_uuid, destination_uuid, name, description, ports_exposes, fqdn (or domains), health check and limit settings (docs/applications.md)." +
      " instant_deploy (Coolify's, default false) queues the first deployment right away; it needs the token's deploy scope too (403 otherwise, nothing created); the answer then carries deployment_uuid (null, with the reason in message, when the deployment was refused).",
    body,
    compatibleFields: APPLICATION_COMPATIBLE_FIELDS,
    responses: CREATE_RESPONSES,
    async handler({ caller, scope, services, body }) {
      const { instant_deploy: instant, ...b } = body as z.output<B> & { instant_deploy?: boolean };
      if (instant) requireTokenScope(caller, "deploy");
      const app = await services.launch.create(scope, { ...(b as unknown as CreateApplicationCommon), ...source(body as z.output<B>) }, instant === true);
      const deployed = app.instant ? { deployment_uuid: app.instant.deploymentUuid, message: app.instant.message } : {};
      return { status: 201, body: { uuid: app.uuid, name: app.name, fqdn: app.fqdn, ...deployed } };
    },
  });
}

/** A flag given in the query string and in the body must agree; the spec's defaults apply otherwise. */
export function deleteFlags(query: z.output<typeof DeleteApplicationQuery>, body: z.output<typeof DeleteApplicationBody> | undefined): DeleteFlags {
  const out = { ...DELETE_DEFAULTS } as DeleteFlags;
  const errors: Record<string, string[]> = {};
  for (const k of Object.keys(DELETE_DEFAULTS) as (keyof DeleteFlags)[]) {
    const q = query[k];
    const b = body?.[k];
    if (q !== undefined && b !== undefined && q !== b) errors[k] = ["Given in the query string and the body with different values."];
    out[k] = b ?? q ?? DELETE_DEFAULTS[k];
  }
  if (Object.keys(errors).length) throw new Invalid(errors);
  return out;
}

/** Start may deploy: then a full deploy queue answers as the deploy does. */
const START_RESPONSES: Record<number, { description: string }> = {
  429: { description: "Start deploys and the server's deploy queue is full (or the rate limit was exceeded); see Retry-After" },
};

/**
 * start/stop/restart. Coolify's clients send them as GET as well as POST (its API accepts both):
 * the GET form is the same action, with the same deploy scope and permission — a GET that
 * changes state is that client's convention, not this API's (docs/compatibility.md).
 */
function actionRoute(action: "start" | "stop" | "restart", summary: string, method: "post" | "get" = "post") {
  const start = action === "start";
  return route({
    method,
    path: `/applications/{uuid}/${action}`,
    tag: TAG,
    summary: method === "get" ? `${summary} (GET form, for Coolify's clients)` : summary,
    description:
      (method === "get" ? `The GET form of POST /applications/{uuid}/${action}, which Coolify's clients send: it changes state, so it needs the deploy scope like the POST. A HEAD does not act (400). ` : "") +
      "Needs the deploy permission on the application's environment. Waits up to 30 s for the server's agent: 200 with the new status, or 202 when the agent is still at it (the status follows)." +
      (start
        ? " An application that has never been deployed is deployed instead (there is nothing to start yet): 200 with the queued deployment's deployment_uuid. force=true (Coolify's) deploys too, without the build cache; instant_deploy is accepted and ignored."
        : ""),
    scope: "deploy",
    params: ApplicationParams,
    ...(start ? { query: ApplicationStartQuery } : {}),
    responses: {
      ...(start ? START_RESPONSES : {}),
      200: { description: start ? "Done, or (never deployed, force) deployment queued" : "Done", schema: ApplicationActionResponse },
      202: { description: "Still in progress after 30 s", schema: ApplicationActionResponse },
      ...APP_RESPONSES,
      409: { description: action === "restart" ? "A deployment is queued or running, or the application was never deployed" : "A deployment is queued or running" },

      502: { description: "The agent reported a failure, with its reason" },
      503: { description: "The server's agent is not connected" },
    },
    async handler({ scope, services, params, query }) {
      const r = start
        ? await services.launch.start(scope, params.uuid, { force: (query as z.output<typeof ApplicationStartQuery>).force ?? false })
        : await services.applications.action(scope, params.uuid, action);
      return { status: r.status, body: { message: r.message, status: r.appStatus, ...("deploymentUuid" in r && r.deploymentUuid ? { deployment_uuid: r.deploymentUuid } : {}) } };
    },
  });
}

export const applicationRoutes = [
  route({
    method: "get",
    path: "/applications",
    tag: TAG,
    summary: "List applications",
    description: "The applications of the token's team in environments the caller may see, oldest first.",
    query: ApplicationListQuery,
    responses: { 200: { description: "Applications", schema: ApplicationList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return {
        body: await paginate(query, () => services.applications.count(scope), async (w) => (await services.applications.list(scope, w)).map(applicationListDto)),
      };
    },
  }),
  createRoute(
    "/applications/public",
    "Create an application from a public git repository",
    "git_repository is an https://, http:// or git:// URL; build_pack one of builder_a..builder_d or containerfile (a Dockerfile in the repository).",
    CreatePublicApplicationBody,
    (b) => ({ source: "public", git_repository: b.git_repository, git_branch: b.git_branch, build_pack: b.build_pack, base_directory: b.base_directory }),
  ),
  createRoute(
    "/applications/private-git-app",
    "Create an application from a repository of an installed git app",
    "git_app_uuid names a git app of the team (/github-apps); git_repository is owner/name on its host. Clones authenticate with an installation token.",
    CreatePrivateGitAppApplicationBody,
    (b) => ({
      source: "private_git_app",
      git_app_uuid: b.git_app_uuid,
      git_repository: b.git_repository,
      git_branch: b.git_branch,
      build_pack: b.build_pack,
      base_directory: b.base_directory,
    }),
  ),
  createRoute(
    "/applications/private-github-app",
    "Create an application from a repository of an installed git app (Coolify's path)",
    "Coolify's path and field name of POST /applications/private-git-app (docs/compatibility.md): github_app_uuid names a git app of the team (/github-apps); git_repository is owner/name on its host.",
    CreatePrivateGithubAppApplicationBody,
    (b) => ({
      source: "private_git_app",
      git_app_uuid: b.github_app_uuid,
      git_repository: b.git_repository,
      git_branch: b.git_branch,
      build_pack: b.build_pack,
      base_directory: b.base_directory,
    }),
  ),
  createRoute(
    "/applications/private-deploy-key",
    "Create an application from a repository reached over SSH with a deploy key",
    "private_key_uuid names a private key of the team (/security/keys); git_repository is an SSH URL (ssh://git@host/owner/repo.git or git@host:owner/repo.git).",
    CreateDeployKeyApplicationBody,
    (b) => ({
      source: "private_deploy_key",
      private_key_uuid: b.private_key_uuid,
      git_repository: b.git_repository,
      git_branch: b.git_branch,
      build_pack: b.build_pack,
      base_directory: b.base_directory,
    }),
  ),
  createRoute(
    "/applications/dockerfile",
    "Create an application from a Dockerfile",
    "dockerfile holds the Dockerfile's contents, raw or base64-encoded; it needs a FROM instruction. Build pack: containerfile.",
    CreateDockerfileApplicationBody,
    (b) => ({ source: "dockerfile", dockerfile: b.dockerfile }),
  ),
  createRoute(
    "/applications/dockerimage",
    "Create an application from a container image",
    "docker_registry_image_name is an image reference with its tag (or digest); docker_registry_image_tag may give the tag separately; without either, latest. Build pack: containerimage.",
    CreateDockerImageApplicationBody,
    (b) => ({ source: "dockerimage", docker_registry_image_name: b.docker_registry_image_name, docker_registry_image_tag: b.docker_registry_image_tag }),
  ),
  createRoute(
    "/applications/dockercompose",
    "Create an application from a compose file",
    "docker_compose_raw holds the compose YAML, raw or base64-encoded, checked against what the platform allows (docs/compose.md). Build pack: containercompose.",
    CreateDockerComposeApplicationBody,
    (b) => ({ source: "dockercompose", docker_compose_raw: b.docker_compose_raw }),
  ),
  route({
    method: "get",
    path: "/applications/{uuid}",
    tag: TAG,
    summary: "Get an application's full configuration",
    description: "Build settings, domains, health check, limits, environment variables (values masked), storages, the 10 most recent deployments and the webhook URLs.",
    params: ApplicationParams,
    responses: { 200: { description: "Application", schema: ApplicationDetail }, ...APP_RESPONSES },
    async handler({ scope, services, params }) {
      return { body: applicationDetailDto(await services.applications.detail(scope, params.uuid), services) };
    },
  }),
  route({
    method: "patch",
    path: "/applications/{uuid}",
    tag: TAG,
    summary: "Change an application's settings",
    description:
      "Only the fields given change; the rest keep their values. Settings that belong to another kind of source are refused (422). Changes take effect on the next deployment; " +
      "instant_deploy (Coolify's) queues one right away and needs the token's deploy scope too.",
    params: ApplicationParams,
    body: UpdateApplicationBody,
    compatibleFields: APPLICATION_COMPATIBLE_FIELDS,
    responses: {
      200: {
        description: "Updated (with instant_deploy: deployment_uuid, null with the reason in message when refused)",
        schema: z.object({ message: z.string(), data: ApplicationDetail, deployment_uuid: z.string().nullable().optional() }),
      },
      ...APP_RESPONSES,
      409: { description: "A domain is already served by another application of the server" },
      422: ERR[422],
    },
    async handler({ caller, scope, services, params, body }) {
      const { instant_deploy: instant, ...change } = body;
      if (instant) requireTokenScope(caller, "deploy");
      const deployed = await services.launch.update(scope, params.uuid, change, instant === true);
      const data = applicationDetailDto(await services.applications.detail(scope, params.uuid), services);
      return { body: deployed ? { message: `Application updated. ${deployed.message}`, data, deployment_uuid: deployed.deploymentUuid } : { message: "Application updated.", data } };
    },
  }),
  route({
    method: "delete",
    path: "/applications/{uuid}",
    tag: TAG,
    summary: "Delete an application",
    description:
      "The application's containers are always stopped and removed from the server, and its proxy routes with them. delete_configurations (default true) also removes " +
      "the configuration files kept for it on the server (a compose application's file), false keeps them; delete_volumes (default false) also its volumes; " +
      "docker_cleanup (default true) also its images and build cache. The flags may be sent in the query string or the JSON body.",
    params: ApplicationParams,
    query: DeleteApplicationQuery,
    body: DeleteApplicationBody,
    responses: {
      200: { description: "Deleted", schema: MessageBody },
      ...APP_RESPONSES,
      409: { description: "A deployment of the application is queued or running" },
      422: ERR[422],
    },
    async handler({ scope, services, params, query, body }) {
      const flags = deleteFlags(query, body);
      await services.applications.remove(scope, params.uuid, flags);
      return {
        body: {
          message: flags.delete_configurations
            ? "Application deleted; its containers are being removed from the server."
            : "Application deleted; its containers are being removed from the server (its configuration files there are kept).",
        },
      };
    },
  }),
  actionRoute("start", "Start an application's containers"),
  actionRoute("stop", "Stop an application's containers"),
  actionRoute("restart", "Restart an application's containers"),
  actionRoute("start", "Start an application's containers", "get"),
  actionRoute("stop", "Stop an application's containers", "get"),
  actionRoute("restart", "Restart an application's containers", "get"),
  route({
    method: "get",
    path: "/applications/{uuid}/logs",
    tag: TAG,
    summary: "Recent log lines of the application's container",
    description: "lines is Coolify's name of tail.",
    params: ApplicationParams,
    query: ApplicationLogsQuery,
    responses: {
      200: { description: "Logs", schema: ApplicationLogs },
      ...APP_RESPONSES,
      502: { description: "The agent could not read the logs, with its reason" },
      503: { description: "The server's agent is not connected" },
    },
    async handler({ scope, services, params, query }) {
      const r = await services.applications.logs(scope, params.uuid, query.since ?? LOGS_DEFAULTS.since, logsLines(query));
      return { body: { container: r.container, logs: r.lines.map((l) => l + "\n").join(""), truncated: r.truncated } };
    },
  }),
  route({
    method: "get",
    path: "/applications/{uuid}/envs",
    tag: TAG,
    summary: "List an application's environment variables",
    description: "Values are shown to callers who may read the application's secrets (full access on its environment, or a team owner, admin or automation token) with a token that has the read scope; they are null (masked) for everyone else. The same rule holds for the answers of POST, PATCH and bulk.",
    params: ApplicationParams,
    query: PaginationQuery,
    responses: { 200: { description: "Variables", schema: EnvVarList }, ...APP_RESPONSES },
    async handler({ scope, services, params, query }) {
      return { body: await paginateArray(query, (await services.envVars.list(scope, params.uuid)).map(envDto)) };
    },
  }),
  route({
    method: "post",
    path: "/applications/{uuid}/envs",
    tag: TAG,
    summary: "Add an environment variable",
    params: ApplicationParams,
    body: CreateEnvBody,
    compatibleFields: ENV_COMPATIBLE_FIELDS,
    responses: {
      201: { description: "Created; value as GET .../envs would show it to the caller; uuid repeats data.uuid where Coolify's clients read it", schema: EnvCreated },
      ...APP_RESPONSES,
      409: { description: "The key already exists (for that is_preview)" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const env = await services.envVars.create(scope, params.uuid, body);
      return { status: 201, body: { message: "Environment variable created.", uuid: env.uuid, data: envDto(env) } };
    },
  }),
  route({
    method: "patch",
    path: "/applications/{uuid}/envs",
    tag: TAG,
    summary: "Change an environment variable by key",
    params: ApplicationParams,
    body: UpdateEnvBody,
    compatibleFields: ENV_COMPATIBLE_FIELDS,
    responses: { 200: { description: "Updated; value as GET .../envs would show it to the caller", schema: EnvMutation }, ...APP_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const env = await services.envVars.update(scope, params.uuid, body);
      return { body: { message: "Environment variable updated.", data: envDto(env) } };
    },
  }),
  route({
    method: "patch",
    path: "/applications/{uuid}/envs/bulk",
    tag: TAG,
    summary: "Create or update several environment variables at once",
    description: "All or nothing: the variables are validated together and written in one transaction. The list is `variables`, or Coolify's name for it, `data`.",
    params: ApplicationParams,
    body: BulkEnvBody,
    compatibleFields: bulkCompatibleFields(ENV_COMPATIBLE_FIELDS),
    responses: { 200: { description: "Saved; values as GET .../envs would show them to the caller", schema: EnvBulkMutation }, ...APP_RESPONSES, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const envs = await services.envVars.bulk(scope, params.uuid, body.variables);
      return { body: { message: `${envs.length} environment variable(s) saved.`, data: envs.map(envDto) } };
    },
  }),
  route({
    method: "delete",
    path: "/applications/{uuid}/envs/{env_uuid}",
    tag: TAG,
    summary: "Delete an environment variable",
    params: ApplicationEnvParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...APP_RESPONSES },
    async handler({ scope, services, params }) {
      await services.envVars.remove(scope, params.uuid, params.env_uuid);
      return { body: { message: "Environment variable deleted." } };
    },
  }),
  route({
    method: "get",
    path: "/applications/{uuid}/storages",
    tag: TAG,
    summary: "List an application's storages (volumes and bind mounts)",
    params: ApplicationParams,
    query: PaginationQuery,
    responses: { 200: { description: "Storages", schema: StorageList }, ...APP_RESPONSES },
    async handler({ scope, services, params, query }) {
      const { app, rows } = await services.volumes.list(scope, params.uuid);
      return { body: await paginateArray(query, rows.map((v) => storageDto(app.uuid, v))) };
    },
  }),
  route({
    method: "post",
    path: "/applications/{uuid}/storages",
    tag: TAG,
    summary: "Add a storage: a named volume, or a bind mount of a host directory",
    description:
      "Without host_path: a Docker volume named <application uuid>-<name>. With host_path: a bind mount of that host directory, stored in its normalised form; a path that is, lies inside or contains a system directory is refused (422), and only team owners and admins may add one, members when the team's allow_member_bind_mounts setting is on (else 403). Takes effect on the next deployment.",
    params: ApplicationParams,
    body: CreateStorageBody,
    responses: {
      201: { description: "Created; uuid repeats data.uuid where Coolify's clients read it", schema: StorageCreated },
      ...APP_RESPONSES,
      409: { description: "The name or mount path is already used by a storage of the application" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const { app, row } = await services.volumes.create(scope, params.uuid, body);
      return { status: 201, body: { message: "Storage created.", uuid: row.uuid, data: storageDto(app.uuid, row) } };
    },
  }),
  route({
    method: "delete",
    path: "/applications/{uuid}/storages/{storage_uuid}",
    tag: TAG,
    summary: "Delete a storage",
    description: "The mount goes on the next deployment. A volume's data stays on the server until the application is deleted with delete_volumes=true.",
    params: ApplicationStorageParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, ...APP_RESPONSES },
    async handler({ scope, services, params }) {
      await services.volumes.remove(scope, params.uuid, params.storage_uuid);
      return { body: { message: "Storage deleted." } };
    },
  }),
];
