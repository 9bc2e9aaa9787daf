import { dbContainer } from "../databases/containers.js";
import type { ContainerDetails, Engine } from "../docker/engine.js";
import { BackupToolError } from "./exec.js";

/** The database's own container, running: dumps and restores run their tools inside it. */
export async function runningDbContainer(engine: Engine, uuid: string, signal: AbortSignal): Promise<ContainerDetails> {
  const c = await dbContainer(engine, uuid, signal);
  if (!c) throw new BackupToolError(`the database's container ${uuid} does not exist on this server`);
  if (!c.running || c.paused) throw new BackupToolError(`the database's container ${uuid} is ${c.state}; start the database first`);
  return c;
}
