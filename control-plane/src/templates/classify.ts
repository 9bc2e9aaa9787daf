import type { ServiceComponentKind } from "@capstan/shared";

/**
 * Service application or service database, by image, as users of this API family expect (the
 * catalog's list of database images, plus the Redis-compatible servers it runs as databases):
 * a database gets no domain and is what a user backs up; everything else is an application.
 * docs/templates.md lists these repositories.
 */
export const DATABASE_REPOSITORIES: readonly string[] = [
  // PostgreSQL and images built on it
  "postgres",
  "bitnami/postgresql",
  "postgis/postgis",
  "pgvector/pgvector",
  "timescale/timescaledb",
  "timescale/timescaledb-ha",
  "supabase/postgres",
  // MySQL and MariaDB
  "mysql",
  "mysql/mysql-server",
  "bitnami/mysql",
  "mariadb",
  "bitnami/mariadb",
  // MongoDB
  "mongo",
  "bitnami/mongodb",
  // Redis and compatible servers
  "redis",
  "bitnami/redis",
  "valkey/valkey",
  "eqalpha/keydb",
  "dragonflydb/dragonfly",
  // Others the catalog counts as databases
  "memcached",
  "couchdb",
  "neo4j",
  "influxdb",
  "clickhouse/clickhouse-server",
];
const DATABASES = new Set(DATABASE_REPOSITORIES);

/**
 * The repository of an image reference, without registry host, tag or digest, and without
 * Docker Hub's implicit `library/`: `docker.io/library/postgres:16` and `postgres` are both
 * `postgres`, `docker.dragonflydb.io/dragonflydb/dragonfly:v1` is `dragonflydb/dragonfly`.
 */
export function repositoryOf(image: string): string {
  let ref = image.trim().toLowerCase();
  const at = ref.indexOf("@");
  if (at >= 0) ref = ref.slice(0, at);
  const parts = ref.split("/");
  const last = parts.at(-1)!;
  const colon = last.indexOf(":");
  if (colon >= 0) parts[parts.length - 1] = last.slice(0, colon);
  // A first component with a dot or a port, or "localhost", is a registry host (Docker's rule).
  if (parts.length > 1 && (/[.:]/.test(parts[0]!) || parts[0] === "localhost")) parts.shift();
  if (parts.length > 1 && parts[0] === "library") parts.shift();
  return parts.join("/");
}

export function isDatabaseImage(image: string): boolean {
  return DATABASES.has(repositoryOf(image));
}

export function componentKind(image: string): ServiceComponentKind {
  return isDatabaseImage(image) ? "database" : "application";
}
