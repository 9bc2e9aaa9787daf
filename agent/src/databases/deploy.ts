import { type DbDeployPayload, databaseVolumeName, LABEL_JOB } from "@capstan/shared";
import type { JobContext } from "../dispatch/types.js";
import type { Engine } from "../docker/engine.js";
import { isNotFound } from "../docker/engine.js";
import { containerStatus } from "../docker/status.js";
import { assertBindMounts, serverSensitivePaths } from "../deploy/binds.js";
import { ensureImage } from "../deploy/image.js";
import { dirOwner, putPrivateFile } from "./container-files.js";
import { dbContainer, removeDbContainers } from "./containers.js";
import { type EngineRuntime, engineRuntime } from "./engines.js";
import { waitHealthy } from "./health.js";
import { isRedisLike, waitDatasetLoaded } from "./redis-cli.js";
import { ensureDatabase as ensureClickhouseDatabase } from "../backup/engines/clickhouse.js";
import { joinDbNetworks, prepareDbNetworks } from "./networks.js";
import { dbContainerName, dbContainerSpec, dbVolumeLabels, mergeEnv } from "./spec.js";

export interface DbOptions {
  /** Extra labels on everything the agent creates (tests: capstan.test=1). */
  extraLabels: Record<string, string>;
  /** Host address public_port binds to (production 0.0.0.0; tests loopback). */
  publicHostIp: string;
  /** How often a starting container is inspected. */
  pollMs: number;
  /** Grace period of a database's stops (SIGTERM -> SIGKILL). */
  stopTimeoutS: number;
  /** Bound on removing a container that never started. */
  cleanupTimeoutMs: number;
  /** The agent's state directory: images are pulled with its stored registry logins. */
  stateDir?: string;
}

/**
 * db.deploy: the database's one container, (re)created in place from the payload. Everything
 * that can fail without harm comes first (networks, image, volume); then the old container is
 * stopped and removed, and only then the new one is created on the same volume: never two
 * containers on one data dir. Files the engine needs (password files, redis-like config) are
 * copied in between create and start, owned like the data dir (the server's user reads them). Waits until the engine's probe says healthy, and a redis-like server until it loaded
 * its dataset (its probe cannot tell, engines.ts).
 *
 * Redelivered (the agent restarted mid-job): a running container made by this same job is
 * waited for instead of being replaced.
 */
export async function deployDatabase(engine: Engine, payload: DbDeployPayload, opts: DbOptions, ctx: JobContext): Promise<{ container: string; status: string }> {
  const { signal, progress } = ctx;
  const name = dbContainerName(payload.db.uuid);
  const runtime = engineRuntime(payload.engine, payload.credentials);
  const netCtx = { signal, progress, extraLabels: opts.extraLabels };

  const existing = await dbContainer(engine, payload.db.uuid, signal);
  if (existing?.running && existing.labels[LABEL_JOB] === ctx.job.id) {
    progress(`container ${name} of this job already runs (earlier delivery); waiting for it`);
    const c = await waitReady(engine, name, payload, runtime, opts, ctx);
    return { container: name, status: containerStatus(c.state, c.health) };
  }

  const { overridden } = mergeEnv(runtime.env, payload.env, runtime.reservedEnv);
  if (overridden.length > 0) progress(`variable(s) ${overridden.join(", ")} are set by the platform for ${payload.engine}; the user's value is not used`);

  await prepareDbNetworks(engine, payload, netCtx);
  await ensureImage(engine, payload.image, ctx, { ...(opts.stateDir ? { logins: opts.stateDir } : {}) });
  const volume = databaseVolumeName(payload.db.uuid);
  const { created } = await engine.ensureVolume({ name: volume, labels: dbVolumeLabels(payload.db, opts.extraLabels) }, signal);
  progress(created ? `volume ${volume} created` : `volume ${volume} kept (existing data)`);

  signal.throwIfAborted();
  await removeDbContainers(engine, payload.db.uuid, opts.stopTimeoutS, ctx);

  const spec = dbContainerSpec(payload, runtime, { extraLabels: opts.extraLabels, jobId: ctx.job.id, publicHostIp: opts.publicHostIp });
  // A database mounts its own volume only; should a bind ever join, the same rule as for applications holds.
  assertBindMounts(spec.mounts, await serverSensitivePaths(engine, null, signal));
  const { id } = await engine.createContainer(spec, signal);
  progress(`container ${name} created (${id.slice(0, 12)}) from ${payload.image}`);
  try {
    for (const f of runtime.files) {
      const owner = await dirOwner(engine, id, f.ownerOf, signal);
      await putPrivateFile(engine, id, f.dir, f.name, Buffer.from(f.content, "utf8"), owner, signal);
    }
    await joinDbNetworks(engine, name, payload, netCtx);
    await engine.startContainer(id, signal);
  } catch (err) {
    // A container that never started holds nothing: it goes, so no half-made one stays behind.
    await engine.removeContainer(id, AbortSignal.timeout(opts.cleanupTimeoutMs)).catch((e) => {
      if (!isNotFound(e)) progress(`could not remove the container that did not start: ${e instanceof Error ? e.message : String(e)}`);
    });
    throw err;
  }
  progress(
    payload.public_port !== null
      ? `container ${name} started; port ${spec.publish![0]!.port} published on ${spec.publish![0]!.hostIp}:${payload.public_port}; waiting for ${runtime.probe}`
      : `container ${name} started (not published); waiting for ${runtime.probe}`,
  );
  // An unhealthy database stays as it is (its logs tell why); the job fails with the probe's output.
  const c = await waitReady(engine, name, payload, runtime, opts, ctx);
  const status = containerStatus(c.state, c.health);
  progress(`database ${payload.db.name} is up (${status})`);
  return { container: name, status };
}

/** Healthy by the engine's probe; a redis-like engine's dataset loaded; ClickHouse's database there. */
async function waitReady(engine: Engine, name: string, payload: DbDeployPayload, runtime: EngineRuntime, opts: DbOptions, ctx: JobContext) {
  const c = await waitHealthy(engine, name, runtime, opts, ctx);
  if (isRedisLike(payload.engine)) await waitDatasetLoaded(engine, name, payload.engine, payload.credentials.password, opts, ctx);
  if (payload.engine === "clickhouse") {
    await ensureClickhouseDatabase({ engine, container: name, credentials: payload.credentials, signal: ctx.signal, progress: ctx.progress });
  }
  return c;
}
