import { z } from "zod";
import { DATABASE_ENGINES, DATABASE_ENGINE_FACTS, DatabaseEngine } from "../protocol/databases.js";
import { CpuLimit, EnvKey, EnvValue, ImageRef, MemoryLimit } from "../validation/inputs.js";
import { multiline } from "../validation/text.js";
import { EnvVarAliases, MAX_ENVS, bulkVariables } from "./applications.js";
import { BackupSchedule } from "./backups.js";
import { PaginationQuery, QueryBoolean, Timestamp, Uuid, listOf, resourceId, requestBody } from "./common.js";

/**
 * Standalone databases (spec 4.5). Every request body is a strict object: a field the path does
 * not take is refused (422) rather than silently ignored — a misspelt `postgres_pasword` must not
 * end up as a generated password the caller did not expect. docs/databases.md.
 */

// ---------------------------------------------------------------------------------------------
// Engines and their parameters

/** `type` of a database in responses (spec section 2): standalone-<engine>. */
export const databaseType = (engine: DatabaseEngine) => `standalone-${engine}` as const;
export type DatabaseType = ReturnType<typeof databaseType>;
export const DATABASE_TYPES = DATABASE_ENGINES.map(databaseType) as [DatabaseType, ...DatabaseType[]];

/**
 * Which create parameter of an engine holds which credential, and the defaults of the names.
 * null: the engine has no such credential (redis-like engines have a password only).
 * Passwords not given are generated; they cannot be changed afterwards (the engines read them
 * only when they initialise an empty data directory).
 */
export interface EngineParams {
  user: { param: string; default: string; max: number } | null;
  password: string;
  database: { param: string; default: string; max: number } | null;
  rootPassword: string | null;
}

export const DATABASE_ENGINE_PARAMS: Record<DatabaseEngine, EngineParams> = {
  postgresql: {
    user: { param: "postgres_user", default: "postgres", max: 63 },
    password: "postgres_password",
    database: { param: "postgres_db", default: "postgres", max: 63 },
    rootPassword: null,
  },
  mysql: {
    user: { param: "mysql_user", default: "mysql", max: 32 },
    password: "mysql_password",
    database: { param: "mysql_database", default: "default", max: 64 },
    rootPassword: "mysql_root_password",
  },
  mariadb: {
    user: { param: "mariadb_user", default: "mariadb", max: 32 },
    password: "mariadb_password",
    database: { param: "mariadb_database", default: "default", max: 64 },
    rootPassword: "mariadb_root_password",
  },
  mongodb: {
    user: { param: "mongo_initdb_root_username", default: "root", max: 64 },
    password: "mongo_initdb_root_password",
    database: { param: "mongo_initdb_database", default: "default", max: 63 },
    rootPassword: null,
  },
  redis: { user: null, password: "redis_password", database: null, rootPassword: null },
  keydb: { user: null, password: "keydb_password", database: null, rootPassword: null },
  dragonfly: { user: null, password: "dragonfly_password", database: null, rootPassword: null },
  clickhouse: {
    user: { param: "clickhouse_admin_user", default: "default", max: 64 },
    password: "clickhouse_admin_password",
    database: { param: "clickhouse_db", default: "default", max: 64 },
    rootPassword: null,
  },
};

/** Engines speaking the Redis protocol: their URL user is `default`, their database `0`. */
export const REDIS_LIKE: readonly DatabaseEngine[] = ["redis", "keydb", "dragonfly"];

/** Default of the image parameter per engine: the engine's official image (DATABASE_ENGINE_FACTS). */
export const defaultDatabaseImage = (engine: DatabaseEngine) => DATABASE_ENGINE_FACTS[engine].image;

/**
 * The connection URL of a database: `<scheme>://<user>:<password>@<host>:<port>/<database>`.
 * User and password are percent-encoded. Redis-like engines: user `default`, database 0;
 * MongoDB authenticates its root user against `admin`. A ClickHouse database stored before
 * clickhouse_db existed has no database name: the engine's `default`, which its backups use too.
 */
export function databaseUrl(
  engine: DatabaseEngine,
  c: { user: string | null; password: string; database: string | null },
  host: string,
  port: number,
): string {
  const scheme = DATABASE_ENGINE_FACTS[engine].scheme;
  const auth = `${encodeURIComponent(REDIS_LIKE.includes(engine) ? "default" : (c.user ?? "default"))}:${encodeURIComponent(c.password)}`;
  const hostPort = `${host.includes(":") ? `[${host}]` : host}:${port}`;
  if (REDIS_LIKE.includes(engine)) return `${scheme}://${auth}@${hostPort}/0`;
  if (engine === "mongodb") return `${scheme}://${auth}@${hostPort}/${encodeURIComponent(c.database ?? "admin")}?authSource=admin`;
  return `${scheme}://${auth}@${hostPort}/${encodeURIComponent(c.database ?? "default")}`;
}

// ---------------------------------------------------------------------------------------------
// Values

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export const DatabaseName = z
  .string()
  .trim()
  .min(1)
  .max(255)
  .refine((v) => !CONTROL.test(v), "Must not contain control characters.");
export const DatabaseDescription = multiline(z.string().max(2000));

/** User and database names: SQL-style identifiers, the same rule for every engine. */
export const DbIdentifier = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "Use letters, digits and underscores, not starting with a digit.");

/** Passwords a caller chooses: printable ASCII without spaces, 8 to 128 characters. */
export const DbPassword = z
  .string()
  .min(8, "Use at least 8 characters.")
  .max(128)
  .regex(/^[\x21-\x7e]+$/, "Use printable ASCII characters without spaces.");

/** Host ports a database may be published on: unprivileged ports only. */
export const PUBLIC_PORT_MIN = 1024;
export const PublicPort = z.number().int().min(PUBLIC_PORT_MIN).max(65_535);


// ---------------------------------------------------------------------------------------------
// Create

const CommonCreate = {
  project_uuid: Uuid,
  environment_name: z.string().trim().min(1).max(64),
  server_uuid: Uuid,
  destination_uuid: Uuid.meta({ description: "A destination (network) of that server" }),
  name: DatabaseName.optional().meta({ description: "Default: <engine>-<first 8 characters of the uuid>" }),
  description: DatabaseDescription.optional(),
  image: ImageRef.optional().meta({ description: "Image reference with tag; default: the engine's official image (docs/databases.md)" }),
  is_public: z.boolean().default(false).meta({ description: "Publish the engine's port on public_port of the server" }),
  public_port: PublicPort.nullable()
    .optional()
    .meta({ description: `Host port (${PUBLIC_PORT_MIN}-65535) the engine is published on; required when is_public is true` }),
  limits_memory: MemoryLimit.nullable().optional().meta({ description: "Memory limit such as 512m or 2g; null: none" }),
  limits_cpus: CpuLimit.nullable().optional().meta({ description: "CPU limit in cores such as 0.5 or 2; null: none" }),
  instant_deploy: z.boolean().default(true).meta({ description: "Start the database right away (default true); false: it starts on POST .../start" }),
};

type PortFields = { is_public?: boolean; public_port?: number | null | undefined };
const publicNeedsPort = (b: PortFields, ctx: z.RefinementCtx) => {
  if (b.is_public && (b.public_port === undefined || b.public_port === null)) {
    ctx.addIssue({ code: "custom", path: ["public_port"], message: "Required when is_public is true." });
  }
};

/** mysql / mariadb: root has its own password parameter; the regular user must be another one. */
const notRoot = (param: string) => (b: Record<string, unknown>, ctx: z.RefinementCtx) => {
  if (typeof b[param] === "string" && (b[param] as string).toLowerCase() === "root") {
    ctx.addIssue({ code: "custom", path: [param], message: "root is the administrator; choose another user name (root's password is the *_root_password parameter)." });
  }
};

const user = (engine: DatabaseEngine) => {
  const u = DATABASE_ENGINE_PARAMS[engine].user!;
  return DbIdentifier(u.max).optional().meta({ description: `Default ${u.default}` });
};
const database = (engine: DatabaseEngine) => {
  const d = DATABASE_ENGINE_PARAMS[engine].database!;
  return DbIdentifier(d.max).optional().meta({ description: `Default ${d.default}` });
};
const password = DbPassword.optional().meta({ description: "Generated (43 URL-safe characters) when not given" });

export const CreatePostgresqlDatabaseBody = requestBody({ ...CommonCreate, postgres_user: user("postgresql"), postgres_password: password, postgres_db: database("postgresql") })
  .superRefine(publicNeedsPort);
export const CreateMysqlDatabaseBody = requestBody(
    { ...CommonCreate, mysql_root_password: password, mysql_user: user("mysql"), mysql_password: password, mysql_database: database("mysql") },
  )
  .superRefine(publicNeedsPort)
  .superRefine(notRoot("mysql_user"));
export const CreateMariadbDatabaseBody = requestBody(
    { ...CommonCreate, mariadb_root_password: password, mariadb_user: user("mariadb"), mariadb_password: password, mariadb_database: database("mariadb") },
  )
  .superRefine(publicNeedsPort)
  .superRefine(notRoot("mariadb_user"));
export const CreateMongodbDatabaseBody = requestBody(
    {
      ...CommonCreate,
      mongo_initdb_root_username: user("mongodb"),
      mongo_initdb_root_password: password,
      mongo_initdb_database: database("mongodb"),
    },
  )
  .superRefine(publicNeedsPort);
export const CreateRedisDatabaseBody = requestBody({ ...CommonCreate, redis_password: password }).superRefine(publicNeedsPort);
export const CreateKeydbDatabaseBody = requestBody({ ...CommonCreate, keydb_password: password }).superRefine(publicNeedsPort);
export const CreateDragonflyDatabaseBody = requestBody({ ...CommonCreate, dragonfly_password: password }).superRefine(publicNeedsPort);
/**
 * ClickHouse's own databases: a backup lists the tables of clickhouse_db and its restore drops and
 * recreates them, which must never touch the server's system tables.
 */
const CLICKHOUSE_RESERVED_DATABASES = ["system", "information_schema", "_temporary_and_external_tables"];
const notClickhouseSystemDatabase = (b: { clickhouse_db?: string | undefined }, ctx: z.RefinementCtx) => {
  if (b.clickhouse_db !== undefined && CLICKHOUSE_RESERVED_DATABASES.includes(b.clickhouse_db.toLowerCase())) {
    ctx.addIssue({ code: "custom", path: ["clickhouse_db"], message: `${b.clickhouse_db} is a database of ClickHouse itself; choose another name.` });
  }
};
export const CreateClickhouseDatabaseBody = requestBody(
    {
      ...CommonCreate,
      clickhouse_admin_user: user("clickhouse"),
      clickhouse_admin_password: password,
      clickhouse_db: database("clickhouse").meta({ description: "Created at first start; internal_db_url names it and backups dump it. Default default (ClickHouse's own)" }),
    },
  )
  .superRefine(publicNeedsPort)
  .superRefine(notClickhouseSystemDatabase);

/** The create body of each engine's path (POST /databases/{engine}). */
export const CREATE_DATABASE_BODIES = {
  postgresql: CreatePostgresqlDatabaseBody,
  mysql: CreateMysqlDatabaseBody,
  mariadb: CreateMariadbDatabaseBody,
  mongodb: CreateMongodbDatabaseBody,
  redis: CreateRedisDatabaseBody,
  keydb: CreateKeydbDatabaseBody,
  dragonfly: CreateDragonflyDatabaseBody,
  clickhouse: CreateClickhouseDatabaseBody,
} as const satisfies Record<DatabaseEngine, z.ZodType>;

/** What every create path carries besides the engine's own credential parameters. */
export interface CreateDatabaseCommon {
  project_uuid: string;
  environment_name: string;
  server_uuid: string;
  destination_uuid: string;
  name?: string | undefined;
  description?: string | undefined;
  image?: string | undefined;
  is_public: boolean;
  public_port?: number | null | undefined;
  limits_memory?: string | null | undefined;
  limits_cpus?: string | null | undefined;
  instant_deploy: boolean;
}

/** The credential parameters of a create body, by role (absent: default or generated). */
export interface RequestedCredentials {
  user?: string | undefined;
  password?: string | undefined;
  database?: string | undefined;
  root_password?: string | undefined;
}

/** Splits a parsed create body of the engine into the common part and the credentials by role. */
export function splitCreateBody(engine: DatabaseEngine, body: Record<string, unknown>): { common: CreateDatabaseCommon; credentials: RequestedCredentials } {
  const p = DATABASE_ENGINE_PARAMS[engine];
  const str = (k: string | null | undefined) => (k && typeof body[k] === "string" ? (body[k] as string) : undefined);
  const own = new Set([p.user?.param, p.password, p.database?.param, p.rootPassword].filter(Boolean));
  const common = Object.fromEntries(Object.entries(body).filter(([k]) => !own.has(k))) as unknown as CreateDatabaseCommon;
  return {
    common,
    credentials: { user: str(p.user?.param), password: str(p.password), database: str(p.database?.param), root_password: str(p.rootPassword) },
  };
}

export const CreatedDatabase = z
  .object({
    uuid: z.string(),
    name: z.string(),
    type: z.enum(DATABASE_TYPES),
    internal_db_url: z.string().meta({ description: "Connection URL for containers on the database's network (host: the database's uuid)" }),
  })
  .meta({ id: "CreatedDatabase" });

// ---------------------------------------------------------------------------------------------
// Update

export const UpdateDatabaseBody = requestBody(
    {
      name: DatabaseName.optional(),
      description: DatabaseDescription.optional(),
      image: ImageRef.optional(),
      is_public: z.boolean().optional(),
      public_port: PublicPort.nullable().optional().meta({ description: "null forgets the port (only while is_public is false)" }),
      limits_memory: MemoryLimit.nullable().optional(),
      limits_cpus: CpuLimit.nullable().optional(),
    },
  )
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: "Provide at least one field to change.", path: ["body"] });
export type UpdateDatabaseBody = z.output<typeof UpdateDatabaseBody>;

// ---------------------------------------------------------------------------------------------
// Reads

export const DatabaseParams = z.object({ uuid: resourceId("database", Uuid) });
export const DatabaseEnvParams = DatabaseParams.extend({ env_uuid: resourceId("database_env_var", Uuid) });

export const Database = z
  .object({
    uuid: z.string(),
    name: z.string(),
    type: z.enum(DATABASE_TYPES),
    status: z.string().meta({ description: "Composite engine status, e.g. running:healthy; exited before the first start (docs/databases.md)" }),
    image: z.string(),
    is_public: z.boolean(),
    public_port: z.number().int().nullable().meta({ description: "Host port; kept while is_public is false (used again when it is reopened)" }),
    project_uuid: z.string(),
    environment_name: z.string(),
    server_uuid: z.string(),
    created_at: Timestamp,
    last_error: z
      .string()
      .nullable()
      .meta({ description: "Why the last deploy, start, stop or restart failed (the agent's reason, or its deadline passing); null once one succeeds" }),
    last_error_at: Timestamp.nullable().meta({ description: "When that failure was recorded" }),
  })
  .meta({ id: "Database" });
export type Database = z.infer<typeof Database>;
export const DatabaseList = listOf(Database);
export const DatabaseListQuery = PaginationQuery;

export const DatabaseEnvVar = z
  .object({
    uuid: z.string(),
    key: z.string(),
    value: z.string().nullable().meta({ description: "null when masked: only GET .../envs shows values, and only to members who may manage the database" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "DatabaseEnvVar" });
export type DatabaseEnvVar = z.infer<typeof DatabaseEnvVar>;
export const DatabaseEnvVarList = listOf(DatabaseEnvVar);

export const DatabaseDetail = Database.extend({
  // w8/rbsources: what resource backups name it by (spec 4.10's integer resource_id)
  id: z.number().int().meta({ description: "The integer id (resource_id of /resource-backups)" }),
  engine: DatabaseEngine,
  description: z.string(),
  project_name: z.string(),
  environment_uuid: z.string(),
  destination_uuid: z.string(),
  limits_memory: z.string().nullable(),
  limits_cpus: z.string().nullable(),
  internal_db_url: z.string().meta({ description: "For containers on the database's network; the password is ******** when masked" }),
  external_db_url: z
    .string()
    .nullable()
    .meta({ description: "Through the server's IP and public_port, while is_public; the password is ******** when masked" }),
  credentials: z
    .record(z.string(), z.string().nullable())
    .meta({ description: "The engine's credential parameters by their create-path names (e.g. postgres_user); passwords null when masked" }),
  credentials_masked: z.boolean().meta({ description: "Passwords are shown only to callers who may manage the database" }),
  envs: z.array(DatabaseEnvVar).meta({ description: "Values masked (null); GET .../envs shows them to members who may manage" }),
  backup_schedules: z.array(BackupSchedule),
  updated_at: Timestamp,
}).meta({ id: "DatabaseDetail" });
export type DatabaseDetail = z.infer<typeof DatabaseDetail>;

/** How a masked password appears inside a connection URL. */
export const MASKED_PASSWORD = "********";

// ---------------------------------------------------------------------------------------------
// Delete, actions

export const DeleteDatabaseQuery = z.object({
  delete_configurations: QueryBoolean.optional().meta({ description: "Remove the database's container from the server (default true). May also be sent in the JSON body." }),
  delete_volumes: QueryBoolean.optional().meta({ description: "Also delete its data volume (default false): the data is gone. May also be sent in the JSON body." }),
  docker_cleanup: QueryBoolean.optional().meta({ description: "Also delete its image when no other container uses it (default true). May also be sent in the JSON body." }),
});
export const DeleteDatabaseBody = requestBody(
  {
    delete_configurations: z.boolean().optional(),
    delete_volumes: z.boolean().optional(),
    docker_cleanup: z.boolean().optional(),
  },
);

export const DatabaseActionResponse = z
  .object({
    message: z.string(),
    status: z.string().meta({ description: "The database's status after the action (or now, if the agent is still at it)" }),
  })
  .meta({ id: "DatabaseActionResponse" });

export const DatabaseMutation = z.object({ message: z.string(), data: DatabaseDetail });

// ---------------------------------------------------------------------------------------------
// Environment variables

/** Coolify sends is_shown_once with a database's variables too (docs/compatibility.md): only false. */
const DatabaseEnvAliases = { is_shown_once: EnvVarAliases.is_shown_once };
export const CreateDatabaseEnvBody = requestBody({ key: EnvKey, value: EnvValue, ...DatabaseEnvAliases }).transform((b) => ({ key: b.key, value: b.value }));
/** PATCH .../envs (Coolify's update by key): the variable of that key gets a new value. */
export const UpdateDatabaseEnvBody = requestBody({ key: EnvKey, value: EnvValue, ...DatabaseEnvAliases }).transform((b) => ({ key: b.key, value: b.value }));
const DatabaseEnvItem = requestBody({ key: EnvKey, value: EnvValue, ...DatabaseEnvAliases });
/** The spec's `variables`, or Coolify's `data` (one of the two); a key listed twice is refused. */
export const BulkDatabaseEnvBody = requestBody({
  variables: z.array(DatabaseEnvItem).min(1).max(MAX_ENVS).optional().meta({ description: "Required unless sent as data" }),
  data: z.array(DatabaseEnvItem).min(1).max(MAX_ENVS).optional().meta({ description: "Coolify's name of variables" }),
}).transform((b, ctx) => ({ variables: bulkVariables(b, ctx).map((v) => ({ key: v.key, value: v.value })) }));
export const DatabaseEnvMutation = z.object({ message: z.string(), data: DatabaseEnvVar });
/** The answer of a create: {message, data}, and the new variable's uuid at the top where Coolify's clients read it. */
export const DatabaseEnvCreated = DatabaseEnvMutation.extend({ uuid: z.string() });
export const DatabaseEnvBulkMutation = z.object({ message: z.string(), data: z.array(DatabaseEnvVar) });
