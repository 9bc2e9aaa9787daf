import { databaseVolumeName, type JobPayload, LABEL_MANAGED, LABEL_RESOURCE_UUID } from "@capstan/shared";
import type { JobContext } from "../dispatch/types.js";
import { type Engine, EngineError, isNotFound } from "../docker/engine.js";
import { ensureRunning, ensureStopped, restartContainer } from "../docker/power.js";
import { containerStatus } from "../docker/status.js";
import { dbContainer, removeDbContainers } from "./containers.js";
import type { DbOptions } from "./deploy.js";

type DbActionPayload = JobPayload<"db.action">;

/**
 * db.action on the database's one container: start (unpauses a paused one), stop (gracefully),
 * restart, remove. Start and restart need a container (deploy first); stop and remove of a
 * database without one succeed (nothing to do). Remove takes the container, then with
 * delete_volumes its data volume, and with docker_cleanup the image it ran unless another
 * container still uses that image.
 */
export async function databaseAction(engine: Engine, payload: DbActionPayload, opts: DbOptions, ctx: JobContext): Promise<{ status: string }> {
  const { signal, progress } = ctx;
  const { db, action } = payload;
  if (action === "remove") {
    await removeDatabase(engine, payload, opts, ctx);
    return { status: "removed" };
  }
  const c = await dbContainer(engine, db.uuid, signal);
  if (!c) {
    if (action === "stop") {
      progress(`database ${db.name} has no container on this server; nothing to stop`);
      return { status: "exited" };
    }
    throw new EngineError(`database ${db.name} has no container on this server; deploy it first`, 404);
  }
  if (action === "start") await ensureRunning(engine, c, signal, progress);
  else if (action === "stop") await ensureStopped(engine, c, opts.stopTimeoutS, signal, progress);
  else await restartContainer(engine, c, opts.stopTimeoutS, signal, progress);
  const now = await engine.inspectContainer(c.name, signal);
  return { status: now ? containerStatus(now.state, now.health) : "exited" };
}

async function removeDatabase(engine: Engine, payload: DbActionPayload, opts: DbOptions, ctx: JobContext): Promise<void> {
  const { signal, progress } = ctx;
  const { db } = payload;
  await dbContainer(engine, db.uuid, signal); // refuses a foreign container holding the name
  const images = await removeDbContainers(engine, db.uuid, opts.stopTimeoutS, ctx);
  if (images.length === 0) progress(`database ${db.name} has no container on this server`);

  if (payload.delete_volumes) {
    const owned = await engine.listVolumes({ [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: db.uuid }, signal);
    for (const name of new Set([databaseVolumeName(db.uuid), ...owned.map((v) => v.name)])) {
      try {
        await engine.removeVolume(name, signal);
        progress(`volume ${name} removed`);
      } catch (err) {
        if (isNotFound(err)) continue;
        throw new EngineError(`volume ${name} could not be removed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  } else {
    progress(`volume ${databaseVolumeName(db.uuid)} kept`);
  }

  if (payload.docker_cleanup) {
    for (const image of images) {
      const users = await engine.containersOfImage(image, signal);
      if (users.length > 0) {
        progress(`image ${image} kept: used by ${users.map((u) => u.name).slice(0, 5).join(", ")}`);
        continue;
      }
      try {
        await engine.removeImage(image, signal);
        progress(`image ${image} removed`);
      } catch (err) {
        if (!isNotFound(err)) progress(`image ${image} could not be removed: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  }
}
