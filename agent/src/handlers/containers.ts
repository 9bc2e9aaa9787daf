import { type ManagedContainer, LABEL_JOB, LABEL_MANAGED, MANAGED } from "@capstan/shared";
import { type ContainerDetails, type Engine, EngineError, isConflict, isNotFound } from "../docker/engine.js";
import { inspectAll } from "../docker/inspect.js";
import { ensureRunning } from "../docker/power.js";
import { containerStatus } from "../docker/status.js";
import type { Handler, JobContext } from "../dispatch/types.js";
import { KeyedMutex } from "../mutex.js";
import type { HandlerOptions } from "./server.js";

/** Every container labelled capstan.managed=true, in any state, with its composite status. */
export function containersList(engine: Engine): Handler<"containers.list"> {
  return async (_payload, { signal }) => {
    const summaries = await engine.listContainers(MANAGED, signal);
    const containers: ManagedContainer[] = (await inspectAll(engine, summaries, signal)).map((d) => ({
      id: d.id,
      name: d.name,
      image: d.image,
      status: containerStatus(d.state, d.health),
      labels: d.labels,
    }));
    containers.sort((a, b) => a.name.localeCompare(b.name));
    return { containers };
  };
}

function notManaged(name: string): EngineError {
  return new EngineError(`container ${name} exists but is not managed by Capstan (no ${LABEL_MANAGED}=true label); not touching it`);
}

/**
 * Runs a container unless one with that exact name exists (then starts it if needed). The
 * result's `created` is true when this job created it, including on an earlier attempt.
 */
export function containerEnsure(engine: Engine, opts: HandlerOptions = {}, locks = new KeyedMutex()): Handler<"container.ensure"> {
  return (spec, ctx) =>
    locks.run(`container:${spec.name}`, async () => {
      const { signal, progress } = ctx;
      const existing = await engine.inspectContainer(spec.name, signal);
      if (existing) return adopt(engine, existing, ctx);

      if (!(await engine.imageExists(spec.image, signal))) {
        throw new EngineError(`image ${spec.image} is not present on this server`);
      }
      if (spec.network && (await engine.listNetworks(spec.network, signal)).length === 0) {
        throw new EngineError(`network ${spec.network} does not exist on this server`);
      }
      let id: string;
      try {
        ({ id } = await engine.createContainer(
          {
            name: spec.name,
            image: spec.image,
            cmd: spec.cmd,
            env: spec.env,
            labels: { ...opts.extraLabels, ...spec.labels, ...MANAGED, [LABEL_JOB]: ctx.job.id },
            network: spec.network,
            restart: spec.restart,
          },
          signal,
        ));
      } catch (err) {
        // Created meanwhile by someone else (another agent process, an operator): same outcome.
        if (isConflict(err)) {
          const raced = await inspectAfterConflict(engine, spec.name, signal);
          if (raced) return adopt(engine, raced, ctx);
        }
        if (isNotFound(err)) throw new EngineError(`image ${spec.image} is not present on this server`, 404);
        throw err;
      }
      progress(`container ${spec.name} created (${id.slice(0, 12)})`);
      await engine.startContainer(id, signal);
      progress(`container ${spec.name} started`);
      return { id, created: true };
    });
}

/**
 * After a 409 "name already in use": the engine reserves a name before the container it is
 * creating can be inspected (404 meanwhile), so look again for a few seconds.
 */
async function inspectAfterConflict(engine: Engine, name: string, signal: AbortSignal, waitMs = 5_000): Promise<ContainerDetails | null> {
  const until = Date.now() + waitMs;
  for (;;) {
    const found = await engine.inspectContainer(name, signal);
    if (found || Date.now() >= until) return found;
    await new Promise((r) => setTimeout(r, 100));
    signal.throwIfAborted();
  }
}

async function adopt(engine: Engine, c: ContainerDetails, { signal, progress, job }: JobContext) {
  if (c.labels[LABEL_MANAGED] !== "true") throw notManaged(c.name);
  await ensureRunning(engine, c, signal, progress);
  return { id: c.id, created: c.labels[LABEL_JOB] === job.id };
}

/** Force-removes the container with exactly that name; a missing one is {removed: false}. */
export function containerRemove(engine: Engine, locks = new KeyedMutex()): Handler<"container.remove"> {
  return ({ name }, { signal, progress }) =>
    locks.run(`container:${name}`, async () => {
      const c = await engine.inspectContainer(name, signal);
      if (!c) {
        progress(`container ${name} does not exist`);
        return { removed: false };
      }
      if (c.labels[LABEL_MANAGED] !== "true") throw notManaged(name);
      try {
        await engine.removeContainer(c.id, signal);
      } catch (err) {
        if (isNotFound(err)) return { removed: false };
        throw err;
      }
      progress(`container ${name} removed`);
      return { removed: true };
    });
}
