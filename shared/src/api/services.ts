import { z } from "zod";
import { EnvKey, EnvValue, MountPath } from "../validation/inputs.js";
import { HostPath } from "../validation/host-path.js";
import { MessageBody, PaginationQuery, QueryBoolean, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";
import { ApplicationName, ComposeContent, DomainList, MAX_ENVS, StorageName, bulkVariables } from "./applications.js";
import { multiline } from "../validation/text.js";

/**
 * Services (spec 4.6, issue 17): one-click compose stacks from a template (type) or from the
 * user's own compose file (docker_compose_raw, beyond the spec as Coolify has it). Each compose
 * service is a service application or a service database (by image, docs/services.md).
 */

export const ServiceParams = z.object({ uuid: resourceId("service", Uuid) });
export const ServiceEnvParams = ServiceParams.extend({ env_uuid: resourceId("service_env_var", Uuid) });
export const ServiceStorageParams = ServiceParams.extend({ storage_uuid: resourceId("service_storage", Uuid) });

/** The compose file of a service: what an application's compose file may be (raw or base64). */
const ComposeRaw = ComposeContent;

export const CreateServiceBody = requestBody({
  project_uuid: Uuid,
  environment_name: z.string().trim().min(1).max(64),
  server_uuid: Uuid,
  destination_uuid: Uuid.meta({ description: "A destination (network) of that server" }),
  type: z
    .string()
    .min(1)
    .max(200)
    .optional()
    .meta({ description: "A template name as GET /services/templates lists it (`source-slug/name` when names clash); required unless docker_compose_raw" }),
  docker_compose_raw: ComposeRaw.optional().meta({ description: "Beyond the spec: a custom compose service instead of a template (validated like an application's compose file)" }),
  name: ApplicationName.optional().meta({ description: "Default: the template name (compose-service for docker_compose_raw)" }),
  description: multiline(z.string().max(2000)).optional(),
  instant_deploy: z.boolean().optional().meta({ description: "true: the service's first start is queued right after the create (as POST /services/{uuid}/start)" }),
}).superRefine((b, ctx) => {
  if (b.type === undefined && b.docker_compose_raw === undefined) ctx.addIssue({ code: "custom", path: ["type"], message: "Give type (a template name) or docker_compose_raw." });
  if (b.type !== undefined && b.docker_compose_raw !== undefined) ctx.addIssue({ code: "custom", path: ["docker_compose_raw"], message: "Give type or docker_compose_raw, not both." });
});
export type CreateServiceBody = z.output<typeof CreateServiceBody>;

export const CreatedService = z
  .object({
    uuid: z.string(),
    name: z.string(),
    type: z.string().nullable().meta({ description: "The template name; null for a docker_compose_raw service" }),
    domains: z.array(z.string()).meta({
      description:
        "The domains generated for the service's routable applications (docs/services.md \"Generated domains\"), as Coolify answers them: each is that application's fqdn, shown in GET /services/{uuid}",
    }),
    message: z
      .string()
      .optional()
      .meta({ description: "Why the first start could not be queued (instant_deploy; the service was created), and which routable applications got no generated domain and why" }),
  })
  .meta({ id: "CreatedService" });

export const UpdateServiceBody = requestBody({
  name: ApplicationName.optional(),
  description: multiline(z.string().max(2000)).optional(),
  docker_compose_raw: ComposeRaw.optional().meta({ description: "The service's compose file; validated like an application's (docs/compose.md)" }),
}).refine((b) => Object.keys(b).length > 0, { message: "Give at least one of name, description, docker_compose_raw." });
export type UpdateServiceBody = z.output<typeof UpdateServiceBody>;

export const Service = z
  .object({
    uuid: z.string(),
    name: z.string(),
    status: z.string().meta({ description: "Aggregated from its components (docs/services.md): running:healthy, running:unknown, degraded, starting, exited" }),
    type: z.string().nullable().meta({ description: "Template name; null for a docker_compose_raw service" }),
    created_at: Timestamp,
    project_uuid: z.string(),
    environment_name: z.string(),
    server_uuid: z.string(),
  })
  .meta({ id: "Service" });
export type Service = z.infer<typeof Service>;
export const ServiceList = listOf(Service);
export const ServiceListQuery = PaginationQuery;

export const ServiceComponent = z
  .object({
    uuid: z.string(),
    name: z.string().meta({ description: "The compose service name" }),
    image: z.string(),
    status: z.string(),
    exclude_from_status: z.boolean().meta({ description: "Not counted in the service's status (the template's exclude_from_hc)" }),
  })
  .meta({ id: "ServiceComponent" });
export const ServiceApplication = ServiceComponent.extend({
  fqdn: z.string().nullable().meta({ description: "The URL the proxy routes to it; null: not routed" }),
}).meta({ id: "ServiceApplication" });

export const ServiceEnvVar = z
  .object({
    uuid: z.string(),
    key: z.string(),
    value: z.string().nullable().meta({ description: "null when masked (docs/services.md: the one secret-display rule)" }),
    is_generated: z.boolean().meta({ description: "A generated secret of the template (SERVICE_PASSWORD_* ...): created once, never regenerated" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "ServiceEnvVar" });
export type ServiceEnvVar = z.infer<typeof ServiceEnvVar>;
export const ServiceEnvVarList = listOf(ServiceEnvVar);

export const ServiceDetail = Service.extend({
  // w8/rbsources: what resource backups name it by (spec 4.10's integer resource_id)
  id: z.number().int().meta({ description: "The integer id (resource_id of /resource-backups)" }),
  description: z.string(),
  template_source: z.string().nullable().meta({ description: "built-in, or the slug of the template source; null for docker_compose_raw" }),
  project_name: z.string(),
  environment_uuid: z.string(),
  destination_uuid: z.string(),
  docker_compose_raw: z.string().meta({ description: "The compose content: the template's text with its variables unresolved, or the user's file" }),
  applications: z.array(ServiceApplication),
  databases: z.array(ServiceComponent),
  envs: z.array(ServiceEnvVar).meta({ description: "Values shown or masked by the same rule as GET .../envs" }),
  updated_at: Timestamp,
}).meta({ id: "ServiceDetail" });
export type ServiceDetail = z.infer<typeof ServiceDetail>;
export const ServiceMutation = z.object({ message: z.string(), data: ServiceDetail });

export const DeleteServiceQuery = z.object({
  delete_configurations: QueryBoolean.optional().meta({ description: "Remove the files kept for it on the server (default true). May also be sent in the JSON body." }),
  delete_volumes: QueryBoolean.optional().meta({ description: "Also delete its volumes (default false). May also be sent in the JSON body." }),
  docker_cleanup: QueryBoolean.optional().meta({ description: "Also delete its unused images (default true). May also be sent in the JSON body." }),
});
export const DeleteServiceBody = requestBody({
  delete_configurations: z.boolean().optional(),
  delete_volumes: z.boolean().optional(),
  docker_cleanup: z.boolean().optional(),
});

/** PATCH .../envs: creates the key or changes its value (docs/services.md). */
export const UpsertServiceEnvBody = requestBody({ key: EnvKey, value: EnvValue });
const ServiceEnvItem = requestBody({ key: EnvKey, value: EnvValue });
/** The spec's `variables`, or Coolify's `data` (one of the two); a key listed twice is refused. */
export const BulkServiceEnvBody = requestBody({
  variables: z.array(ServiceEnvItem).min(1).max(MAX_ENVS).optional().meta({ description: "Required unless sent as data" }),
  data: z.array(ServiceEnvItem).min(1).max(MAX_ENVS).optional().meta({ description: "Coolify's name of variables" }),
}).transform((b, ctx) => ({ variables: bulkVariables(b, ctx).map((v) => ({ key: v.key, value: v.value })) }));
export const ServiceEnvMutation = z.object({ message: z.string(), data: ServiceEnvVar });
export const ServiceEnvBulkMutation = z.object({ message: z.string(), data: z.array(ServiceEnvVar) });
export const ServiceMessage = MessageBody;

// ---------------------------------------------------------------------------------------------
// Storages (the spec leaves the body of a volume add "not shown": docs/decisions.md)

export const MAX_SERVICE_STORAGES = 64;

export const CreateServiceStorageBody = requestBody({
  name: StorageName,
  mount_path: MountPath,
  host_path: HostPath.nullable().optional().meta({ description: "A host directory to bind-mount instead of a Docker volume" }),
  service_name: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .meta({ description: "The compose service it is mounted into; default: the service's first application (else its first component)" }),
});
export type CreateServiceStorageBody = z.output<typeof CreateServiceStorageBody>;

export const ServiceStorage = z
  .object({
    uuid: z.string(),
    name: z.string(),
    service_name: z.string().meta({ description: "The compose service it is mounted into" }),
    mount_path: z.string(),
    host_path: z.string().nullable().meta({ description: "Set for a bind mount of a host directory" }),
    type: z.enum(["volume", "bind"]),
    volume_name: z.string().nullable().meta({ description: "Name of the Docker volume on the server (volumes only)" }),
    created_at: Timestamp,
  })
  .meta({ id: "ServiceStorage" });
export const ServiceStorageList = listOf(ServiceStorage);
export const ServiceStorageCreated = z.object({ message: z.string(), uuid: z.string(), data: ServiceStorage });

// services lifecycle (issue 17)
/** start / restart: pull every image first (Coolify's clients send `latest`; both are accepted). */
export const ServiceStartQuery = z.object({
  pull: QueryBoolean.optional().meta({ description: "Pull every image of the service before it starts" }),
  latest: QueryBoolean.optional().meta({ description: "Coolify's name for pull" }),
});
export const ServiceActionResponse = z
  .object({
    message: z.string(),
    status: z.string().meta({ description: "The service's aggregated status after the action (or now, if it is still running)" }),
  })
  .meta({ id: "ServiceActionResponse" });

// ---- w7/svcroute: a service application's domains (issue 17) ----

/**
 * PATCH /service-applications/{uuid} (beyond the spec, docs/decisions.md): the domains the proxy
 * routes to one service application, as an application's fqdn (comma-separated URLs; a bare host
 * name means https; "" or null: not routed). Takes effect on the service's next start or restart.
 */
export const UpdateServiceApplicationBody = requestBody({
  fqdn: DomainList.nullable().meta({
    description: "Comma-separated URLs: https://app.example.com,http://plain.example.com/api. A bare host name means https. Empty or null: not routed.",
  }),
});
export type UpdateServiceApplicationBody = z.output<typeof UpdateServiceApplicationBody>;

export const ServiceApplicationMutation = z.object({ message: z.string(), data: ServiceApplication.extend({ service_uuid: z.string() }) });
