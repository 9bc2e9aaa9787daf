import {
  DATABASE_ENGINE_FACTS,
  type DatabaseEngine,
  type DbDeployPayload,
  databaseVolumeName,
  parseMemory,
  type RESOURCE_TYPES,
  LABEL_COMMIT,
  LABEL_DATABASE_ENGINE,
  LABEL_DEPLOYMENT,
  LABEL_DOMAINS,
  LABEL_JOB,
  LABEL_MANAGED,
  LABEL_PROXY_NETWORK,
  LABEL_PROXY_PORT,
  LABEL_PROXY_ROUTES,
  LABEL_RESOURCE_NAME,
  LABEL_RESOURCE_TYPE,
  LABEL_RESOURCE_UUID,
  LABEL_ROLLOUT,
} from "@capstan/shared";
import type { CreateContainerSpec } from "../docker/engine.js";
import type { EngineRuntime } from "./engines.js";

export const RESOURCE_TYPE_DATABASE = "database" satisfies (typeof RESOURCE_TYPES)[number];

/** Grace period (SIGTERM -> SIGKILL) of a database's stops: enough to flush and shut down cleanly. */
export const DB_STOP_TIMEOUT_S = 30;

/** Where the engine's port is published when public_port is set. */
export const PUBLIC_HOST_IP = "0.0.0.0";

/** A database's container name: its uuid (also its DNS name on its networks). */
export const dbContainerName = (uuid: string) => uuid;

/**
 * The labels of a database container (and of its volume). Every label the platform reads is
 * set, empty when it has no value: the engine copies an image's labels onto its containers,
 * and an image must not be able to claim proxy routes, a deployment or a rollout.
 * capstan.job records which db.deploy job made the container (a redelivery finds it);
 * capstan.database.engine its engine (the server's resource list shows standalone-<engine>).
 */
export function dbLabels(
  db: { uuid: string; name: string },
  engine: DatabaseEngine,
  extraLabels: Record<string, string>,
  jobId = "",
): Record<string, string> {
  return {
    ...extraLabels,
    [LABEL_MANAGED]: "true",
    [LABEL_RESOURCE_UUID]: db.uuid,
    [LABEL_RESOURCE_NAME]: db.name,
    [LABEL_RESOURCE_TYPE]: RESOURCE_TYPE_DATABASE,
    [LABEL_DATABASE_ENGINE]: engine,
    [LABEL_JOB]: jobId,
    [LABEL_DEPLOYMENT]: "",
    [LABEL_ROLLOUT]: "",
    [LABEL_DOMAINS]: "",
    [LABEL_PROXY_ROUTES]: "",
    [LABEL_PROXY_PORT]: "",
    [LABEL_PROXY_NETWORK]: "",
    [LABEL_COMMIT]: "",
  };
}

/** The volume's labels: who owns it (delete_volumes finds it by them), nothing else. */
export function dbVolumeLabels(db: { uuid: string; name: string }, extraLabels: Record<string, string>): Record<string, string> {
  return { ...extraLabels, [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: db.uuid, [LABEL_RESOURCE_TYPE]: RESOURCE_TYPE_DATABASE };
}

/**
 * User variables first, the engine's over them: a user variable named like one of the engine's
 * (POSTGRES_PASSWORD, ...) would break the credentials the platform hands out, so it is
 * dropped and reported. So is one named like a variable the engine reserves without setting
 * (REDISCLI_AUTH for the redis-like engines).
 */
export function mergeEnv(engineEnv: Record<string, string>, userEnv: Record<string, string>, reserved: string[] = []): { env: Record<string, string>; overridden: string[] } {
  const overridden = Object.keys(userEnv).filter((k) => Object.hasOwn(engineEnv, k) || reserved.includes(k));
  const kept = Object.fromEntries(Object.entries(userEnv).filter(([k]) => !reserved.includes(k)));
  return { env: { ...kept, ...engineEnv }, overridden };
}

export interface DbSpecOptions {
  extraLabels: Record<string, string>;
  jobId: string;
  /** Host address public_port binds to (production: all IPv4 addresses). */
  publicHostIp?: string;
}

/**
 * The database's one container: named by its uuid on its primary network (Docker's DNS answers
 * the name there; further networks are joined after create), its volume at the engine's data
 * dir, restarted by the engine unless stopped, and the engine's port published on the host only
 * when public_port is set.
 */
export function dbContainerSpec(payload: DbDeployPayload, runtime: EngineRuntime, opts: DbSpecOptions): CreateContainerSpec {
  const facts = DATABASE_ENGINE_FACTS[payload.engine];
  const { env } = mergeEnv(runtime.env, payload.env, runtime.reservedEnv);
  return {
    name: dbContainerName(payload.db.uuid),
    image: payload.image,
    ...(runtime.cmd ? { cmd: runtime.cmd } : {}),
    env,
    labels: dbLabels(payload.db, payload.engine, opts.extraLabels, opts.jobId),
    network: payload.network,
    restart: "unless-stopped",
    exposedPorts: [facts.port],
    mounts: [{ type: "volume", source: databaseVolumeName(payload.db.uuid), target: facts.dataDir }],
    healthcheck: runtime.healthcheck,
    memoryBytes: payload.memory ? parseMemory(payload.memory) : undefined,
    nanoCpus: payload.cpus ? Math.round(Number(payload.cpus) * 1e9) : undefined,
    publish: payload.public_port !== null ? [{ port: facts.port, hostPort: payload.public_port, hostIp: opts.publicHostIp ?? PUBLIC_HOST_IP }] : undefined,
    stopTimeoutS: DB_STOP_TIMEOUT_S,
  };
}
