import { z } from "zod";
import { CpuLimit, EnvKey, EnvValue, ImageRef, MemoryLimit, Port } from "../validation/inputs.js";
import { DockerName } from "./names.js";
import { AppRef } from "./deploy.js";
import { NetworkSpec } from "./networks.js";

/** Spec 4.5: the engines of the create paths (`POST /databases/{engine}`). */
export const DATABASE_ENGINES = ["postgresql", "mysql", "mariadb", "mongodb", "redis", "clickhouse", "dragonfly", "keydb"] as const;
export const DatabaseEngine = z.enum(DATABASE_ENGINES);
export type DatabaseEngine = z.infer<typeof DatabaseEngine>;

/**
 * What every engine needs to know on both ends: the default image (latest stable of the engine's
 * official image), the port it listens on inside its network, the URL scheme of internal_db_url and
 * where its data lives inside the container (the persistent volume is mounted there).
 */
export const DATABASE_ENGINE_FACTS: Record<DatabaseEngine, { image: string; port: number; scheme: string; dataDir: string }> = {
  postgresql: { image: "postgres:17-alpine", port: 5432, scheme: "postgres", dataDir: "/var/lib/postgresql/data" },
  mysql: { image: "mysql:8.4", port: 3306, scheme: "mysql", dataDir: "/var/lib/mysql" },
  mariadb: { image: "mariadb:11", port: 3306, scheme: "mysql", dataDir: "/var/lib/mysql" },
  mongodb: { image: "mongo:8", port: 27017, scheme: "mongodb", dataDir: "/data/db" },
  redis: { image: "redis:7-alpine", port: 6379, scheme: "redis", dataDir: "/data" },
  keydb: { image: "eqalpha/keydb:latest", port: 6379, scheme: "redis", dataDir: "/data" },
  dragonfly: { image: "docker.dragonflydb.io/dragonflydb/dragonfly:latest", port: 6379, scheme: "redis", dataDir: "/data" },
  clickhouse: { image: "clickhouse/clickhouse-server:latest", port: 9000, scheme: "clickhouse", dataDir: "/var/lib/clickhouse" },
};

/**
 * Credentials of one database, as the agent passes them to the engine (sealed at rest in the
 * control plane, carried only inside sealed job payloads). `user`/`database` are null for engines
 * without them (redis-like engines have only a password).
 */
export const DbCredentials = z.object({
  user: z.string().min(1).max(128).nullable(),
  password: z.string().min(1).max(256),
  database: z.string().min(1).max(128).nullable(),
  /** mysql / mariadb root password; null elsewhere */
  root_password: z.string().min(1).max(256).nullable(),
});
export type DbCredentials = z.infer<typeof DbCredentials>;

export const DbRef = AppRef;

/** The volume that holds a database's data. */
export const databaseVolumeName = (uuid: string) => `capstan-db-${uuid}`;

/**
 * db.deploy: (re)creates the database's one container from the payload. Never two containers on one
 * data volume: the old container is stopped and removed before the new one starts.
 */
export const DbDeployPayload = z.object({
  db: DbRef,
  engine: DatabaseEngine,
  image: ImageRef,
  credentials: DbCredentials,
  /** User variables (GET/POST /databases/{uuid}/envs), after the engine's own. */
  env: z.record(EnvKey, EnvValue),
  /** Primary network (the destination's or the environment's); the container's DNS name is db.uuid there. */
  network: DockerName,
  /** Further networks to join (shared networks attached by the user). */
  networks: z.array(DockerName).max(64).default([]),
  /** Networks the agent creates first when missing (environment networks; idempotent by name). */
  ensure_networks: z.array(NetworkSpec).max(16).default([]),
  /** Host port that publishes the engine's port; null: not published. */
  public_port: Port.nullable(),
  memory: MemoryLimit.nullable(),
  cpus: CpuLimit.nullable(),
});
export type DbDeployPayload = z.infer<typeof DbDeployPayload>;
export const DbDeployResult = z.object({ container: z.string(), status: z.string() });

export const DB_ACTIONS = ["start", "stop", "restart", "remove"] as const;
export const DbActionPayload = z.object({
  db: DbRef,
  action: z.enum(DB_ACTIONS),
  /** remove only */
  delete_volumes: z.boolean().default(false),
  docker_cleanup: z.boolean().default(false),
});
export const DbActionResult = z.object({ status: z.string() });
