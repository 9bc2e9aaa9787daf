import { z } from "zod";

// ---- configuration and full resource backups (issue 19, w8/rbconfig) ----

/** The file name of the configuration document inside a configuration or full backup's tar. */
export const CONFIGURATION_FILE = "configuration.json";
/** The documents' format tags; a reader refuses formats it does not know. */
export const APPLICATION_CONFIGURATION_FORMAT = "capstan-application-configuration/1";
export const DATABASE_CONFIGURATION_FORMAT = "capstan-database-configuration/1";
export const SERVICE_CONFIGURATION_FORMAT = "capstan-service-configuration/1";
/**
 * The largest configuration document (UTF-8 JSON bytes): it travels inside a job payload and a
 * job result (the agents' socket takes 4 MiB messages), so a larger one fails the backup with
 * the reason rather than a lost message.
 */
export const CONFIGURATION_MAX_BYTES = 3 * 1024 * 1024;

/** A sealed secret as the control plane stores it at rest (SecretBox: "v1:<iv>:<tag>:<ciphertext>"). */
const Sealed = z
  .string()
  .max(200_000)
  .regex(/^v1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]*$/, "a sealed value (v1:...)");
const Uuid = z.string().regex(/^[a-z0-9-]{1,64}$/);

/** A variable of a document: what every kind's has (a kind adds its flags). */
const Variable = z.object({
  uuid: Uuid,
  key: z.string().min(1).max(1024),
  /** the value sealed with the instance key, as stored at rest */
  value_sealed: Sealed,
  is_preview: z.boolean(),
});

/** A persistent storage of a document. */
const Storage = z.object({
  uuid: Uuid,
  name: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/),
  mount_path: z.string().min(1).max(1024),
  /** set: a bind mount of this server directory; null: a named Docker volume */
  host_path: z.string().max(4096).nullable(),
});

/**
 * Everything needed to recreate an application (backup_type configuration, and the
 * configuration half of full): its settings under the names the API shows them, its
 * environment variables with their values sealed with the instance key (never plain), and its
 * persistent storages. The control plane writes it (services/backups/configuration.ts), the agent
 * carries it into the archive as `configuration.json` (listed in the manifest with its sha256)
 * and back out on restore, checked against this schema before anything is stopped.
 */
export const ApplicationConfiguration = z.object({
  format: z.literal(APPLICATION_CONFIGURATION_FORMAT),
  kind: z.literal("application"),
  /** when the document was taken (ISO 8601 UTC) */
  taken_at: z.string().max(64),
  application: z.object({
    uuid: Uuid,
    name: z.string().min(1).max(255),
    description: z.string().max(2000),
    source: z.string().max(64),
    build_pack: z.string().max(64),
    git_repository: z.string().max(4096).nullable(),
    git_branch: z.string().max(255).nullable(),
    base_directory: z.string().max(1024),
    git_app_uuid: Uuid.nullable(),
    private_key_uuid: Uuid.nullable(),
    dockerfile: z.string().max(1_048_576).nullable(),
    docker_registry_image_name: z.string().max(1024).nullable(),
    docker_compose_raw: z.string().max(1_048_576).nullable(),
    ports_exposes: z.string().max(1024),
    fqdn: z.string().max(16_384).nullable(),
    health_check_enabled: z.boolean(),
    health_check_path: z.string().max(1024),
    health_check_port: z.number().int().min(1).max(65535).nullable(),
    health_check_interval: z.number().int().min(0).max(100_000),
    health_check_timeout: z.number().int().min(0).max(100_000),
    health_check_retries: z.number().int().min(0).max(100_000),
    health_check_start_period: z.number().int().min(0).max(100_000),
    limits_memory: z.string().max(64).nullable(),
    limits_cpus: z.string().max(64).nullable(),
  }),
  envs: z.array(Variable.extend({ is_build_time: z.boolean(), is_generated: z.boolean() })).max(500),
  storages: z.array(Storage).max(64),
});
export type ApplicationConfiguration = z.infer<typeof ApplicationConfiguration>;

/**
 * Everything needed to recreate a standalone database but its data (backup_type configuration;
 * with the data volume: full): its settings under the names the API shows them, its engine
 * credentials and its environment variables sealed with the instance key as stored at rest.
 */
export const DatabaseConfiguration = z.object({
  format: z.literal(DATABASE_CONFIGURATION_FORMAT),
  kind: z.literal("database"),
  /** when the document was taken (ISO 8601 UTC) */
  taken_at: z.string().max(64),
  database: z.object({
    uuid: Uuid,
    name: z.string().min(1).max(255),
    description: z.string().max(2000),
    engine: z.string().max(64),
    image: z.string().min(1).max(1024),
    is_public: z.boolean(),
    public_port: z.number().int().min(1).max(65535).nullable(),
    limits_memory: z.string().max(64).nullable(),
    limits_cpus: z.string().max(64).nullable(),
    /** the engine credentials (user, password, database, root password) sealed with the instance key */
    credentials_sealed: Sealed,
  }),
  envs: z.array(Variable).max(500),
});
export type DatabaseConfiguration = z.infer<typeof DatabaseConfiguration>;

/**
 * Everything needed to recreate a service (spec 4.6) but its volumes' data: its settings, its
 * compose file as users PATCH it (the template's text or their own), each compose service's
 * domains and label overrides, its variables (generated secrets included, every value sealed)
 * and its storages. What the template generates is never generated again on restore: the
 * stored values come back byte for byte.
 */
export const ServiceConfiguration = z.object({
  format: z.literal(SERVICE_CONFIGURATION_FORMAT),
  kind: z.literal("service"),
  /** when the document was taken (ISO 8601 UTC) */
  taken_at: z.string().max(64),
  service: z.object({
    uuid: Uuid,
    name: z.string().min(1).max(255),
    description: z.string().max(2000),
    /** the template it was made from (null: a docker_compose_raw service); never changes */
    type: z.string().max(255).nullable(),
    template_source: z.string().max(255).nullable(),
    docker_compose_raw: z.string().min(1).max(1_048_576),
  }),
  components: z
    .array(
      z.object({
        /** the compose service name */
        name: z.string().min(1).max(255),
        kind: z.enum(["application", "database"]),
        /** service applications: the domains the proxy routes to it */
        fqdn: z.string().max(16_384).nullable(),
        /** the label overrides as they were PUT ("" when none) */
        label_overrides: z.string().max(262_144),
      }),
    )
    .max(64),
  envs: z.array(Variable.extend({ is_generated: z.boolean() })).max(500),
  /** each mounted into one compose service (`component`) */
  storages: z.array(Storage.extend({ component: z.string().min(1).max(255) })).max(64),
});
export type ServiceConfiguration = z.infer<typeof ServiceConfiguration>;

/** A configuration document of any kind, told apart by `kind` (the resource it recreates). */
export const ResourceConfiguration = z.discriminatedUnion("kind", [ApplicationConfiguration, DatabaseConfiguration, ServiceConfiguration]);
export type ResourceConfiguration = z.infer<typeof ResourceConfiguration>;

/** The backup types a resource.backup or resource.restore job runs (platform_instance never reaches an agent). */
export const RESOURCE_JOB_BACKUP_TYPES = ["volume", "configuration", "full"] as const;
export const ResourceJobBackupType = z.enum(RESOURCE_JOB_BACKUP_TYPES);
export type ResourceJobBackupType = z.infer<typeof ResourceJobBackupType>;

/** Whether a backup type archives the resource's volumes, and whether it carries the configuration document. */
export const hasVolumes = (t: ResourceJobBackupType): boolean => t !== "configuration";
export const hasConfiguration = (t: ResourceJobBackupType): boolean => t !== "volume";
