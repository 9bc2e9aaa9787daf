import type { Engine } from "./engine.js";

/** What switching a container on or off needs to know of it (summaries and details both have it). */
export interface Switchable {
  id: string;
  name: string;
  /** the engine's state: created, running, paused, restarting, removing, exited, dead */
  state: string;
}

type Progress = (line: string) => void;

const UP = new Set(["running", "restarting"]);
const DOWN = new Set(["created", "exited", "dead"]);

/** Makes the container run: a paused one is unpaused, a stopped one started, a running one left alone. */
export async function ensureRunning(engine: Engine, c: Switchable, signal: AbortSignal, progress: Progress): Promise<void> {
  if (UP.has(c.state)) {
    progress(`container ${c.name} already running`);
  } else if (c.state === "paused") {
    await engine.unpauseContainer(c.id, signal);
    progress(`container ${c.name} unpaused`);
  } else {
    await engine.startContainer(c.id, signal);
    progress(`container ${c.name} started (was ${c.state})`);
  }
}

/** Stops the container gracefully (SIGTERM, SIGKILL after stopTimeoutS) unless it is not running. */
export async function ensureStopped(engine: Engine, c: Switchable, stopTimeoutS: number, signal: AbortSignal, progress: Progress): Promise<void> {
  if (DOWN.has(c.state)) {
    progress(`container ${c.name} already stopped`);
    return;
  }
  await engine.stopContainer(c.id, stopTimeoutS, signal);
  progress(`container ${c.name} stopped`);
}

export async function restartContainer(engine: Engine, c: Switchable, stopTimeoutS: number, signal: AbortSignal, progress: Progress): Promise<void> {
  await engine.restartContainer(c.id, stopTimeoutS, signal);
  progress(`container ${c.name} restarted`);
}
