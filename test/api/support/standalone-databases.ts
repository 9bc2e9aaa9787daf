import { expect } from "vitest";
import type { DatabaseEngine, JobEnvelope } from "@capstan/shared";
import type { ApiClient } from "../harness.js";
import type { ScriptedAgent } from "./fake-agent.js";
import { ok, placement, type AppWorld } from "./applications.js";

/** What every engine's create path returns in its URL, with the parameter names of its credentials. */
export interface EngineCase {
  scheme: string;
  port: number;
  /** Default user name in the URL (redis-like: "default"). */
  user: string;
  /** Path of the URL (database). */
  path: string;
  /** Query string of the URL, if any. */
  search: string;
  userParam: string | null;
  passwordParam: string;
  databaseParam: string | null;
  rootPasswordParam: string | null;
  image: string;
}

export const ENGINES: Record<DatabaseEngine, EngineCase> = {
  postgresql: { scheme: "postgres:", port: 5432, user: "postgres", path: "/postgres", search: "", userParam: "postgres_user", passwordParam: "postgres_password", databaseParam: "postgres_db", rootPasswordParam: null, image: "postgres:17-alpine" },
  mysql: { scheme: "mysql:", port: 3306, user: "mysql", path: "/default", search: "", userParam: "mysql_user", passwordParam: "mysql_password", databaseParam: "mysql_database", rootPasswordParam: "mysql_root_password", image: "mysql:8.4" },
  mariadb: { scheme: "mysql:", port: 3306, user: "mariadb", path: "/default", search: "", userParam: "mariadb_user", passwordParam: "mariadb_password", databaseParam: "mariadb_database", rootPasswordParam: "mariadb_root_password", image: "mariadb:11" },
  mongodb: { scheme: "mongodb:", port: 27017, user: "root", path: "/default", search: "?authSource=admin", userParam: "mongo_initdb_root_username", passwordParam: "mongo_initdb_root_password", databaseParam: "mongo_initdb_database", rootPasswordParam: null, image: "mongo:8" },
  redis: { scheme: "redis:", port: 6379, user: "default", path: "/0", search: "", userParam: null, passwordParam: "redis_password", databaseParam: null, rootPasswordParam: null, image: "redis:7-alpine" },
  keydb: { scheme: "redis:", port: 6379, user: "default", path: "/0", search: "", userParam: null, passwordParam: "keydb_password", databaseParam: null, rootPasswordParam: null, image: "eqalpha/keydb:latest" },
  dragonfly: { scheme: "redis:", port: 6379, user: "default", path: "/0", search: "", userParam: null, passwordParam: "dragonfly_password", databaseParam: null, rootPasswordParam: null, image: "docker.dragonflydb.io/dragonflydb/dragonfly:latest" },
  clickhouse: { scheme: "clickhouse:", port: 9000, user: "default", path: "/default", search: "", userParam: "clickhouse_admin_user", passwordParam: "clickhouse_admin_password", databaseParam: "clickhouse_db", rootPasswordParam: null, image: "clickhouse/clickhouse-server:latest" },
};
export const ENGINE_NAMES = Object.keys(ENGINES) as DatabaseEngine[];

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
/** Generated passwords: 32 random bytes as URL-safe base64. */
export const GENERATED = /^[A-Za-z0-9_-]{43}$/;

export interface CreatedDb {
  uuid: string;
  name: string;
  type: string;
  internal_db_url: string;
}

/** Creates a database; instant_deploy is off unless given (tests that answer jobs ask for it). */
export async function createDb(w: AppWorld, engine: DatabaseEngine = "postgresql", extra: Record<string, unknown> = {}, api: ApiClient = w.api): Promise<CreatedDb> {
  return ok(api.post(`/databases/${engine}`, { ...placement(w), instant_deploy: false, ...extra }), `create ${engine}`);
}

/**
 * Takes the next job, which must be of the type, and answers it. Delivery is at least once (a
 * reconnect or the pump may deliver a job again): a second delivery of a job is skipped, as the
 * real agent dedupes by id.
 */
export async function answerJob(agent: ScriptedAgent, type: string, answer: { result: unknown } | { error: string }): Promise<JobEnvelope> {
  const redelivered = (j: JobEnvelope) => agent.jobs.indexOf(j) !== agent.jobs.findIndex((k) => k.id === j.id);
  let job = await agent.nextJob(10_000);
  while (redelivered(job)) job = await agent.nextJob(10_000);
  expect(job.type, JSON.stringify(job.payload)).toBe(type);
  if ("error" in answer) await agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: answer.error });
  else await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: answer.result });
  return job;
}

/** A db.deploy answered as the real agent does when the container came up healthy. */
export const deployed = (uuid: string, status = "running:healthy") => ({ result: { container: uuid, status } });

/** The job rows of databases, counted (nothing-created checks). */
export async function jobCount(db: { job: { count(a: { where: { type: { in: string[] } } }): Promise<number> } }): Promise<number> {
  return db.job.count({ where: { type: { in: ["db.deploy", "db.action"] } } });
}
