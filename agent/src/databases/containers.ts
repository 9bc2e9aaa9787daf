import { LABEL_MANAGED, LABEL_RESOURCE_TYPE, LABEL_RESOURCE_UUID } from "@capstan/shared";
import type { ContainerDetails, ContainerSummary, Engine } from "../docker/engine.js";
import { EngineError, isNotFound } from "../docker/engine.js";
import { dbContainerName, RESOURCE_TYPE_DATABASE } from "./spec.js";

/** Is this container one the platform made for this database? */
export const isDbContainer = (c: { labels: Record<string, string> }, uuid: string): boolean =>
  c.labels[LABEL_MANAGED] === "true" && c.labels[LABEL_RESOURCE_UUID] === uuid && c.labels[LABEL_RESOURCE_TYPE] === RESOURCE_TYPE_DATABASE;

/**
 * The database's container (named by its uuid), or null. A container of that name that the
 * platform did not make for this database is never touched: the job fails with that reason.
 */
export async function dbContainer(engine: Engine, uuid: string, signal: AbortSignal): Promise<ContainerDetails | null> {
  const name = dbContainerName(uuid);
  const c = await engine.inspectContainer(name, signal);
  if (c && !isDbContainer(c, uuid)) {
    throw new EngineError(`container name ${name} is taken by a container that is not this database's; not touching it`, 409);
  }
  return c;
}

/** Every container of the database, whatever its name (a leftover of an interrupted deploy too). */
export async function dbContainers(engine: Engine, uuid: string, signal: AbortSignal): Promise<ContainerSummary[]> {
  const list = await engine.listContainers({ [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: uuid }, signal);
  return list.filter((c) => isDbContainer(c, uuid));
}

const STOPPABLE = new Set(["running", "restarting", "paused"]);

/**
 * Stops (gracefully: SIGTERM, SIGKILL after stopTimeoutS) and removes every container of the
 * database, so that at most one ever uses its data volume. Returns the images they ran.
 */
export async function removeDbContainers(
  engine: Engine,
  uuid: string,
  stopTimeoutS: number,
  { signal, progress }: { signal: AbortSignal; progress(line: string): void },
): Promise<string[]> {
  const images = new Set<string>();
  for (const c of await dbContainers(engine, uuid, signal)) {
    images.add(c.image);
    try {
      if (STOPPABLE.has(c.state)) {
        await engine.stopContainer(c.id, stopTimeoutS, signal);
        progress(`container ${c.name} stopped`);
      }
      await engine.removeContainer(c.id, signal);
      progress(`container ${c.name} removed`);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
  return [...images];
}
