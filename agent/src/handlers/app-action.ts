import { type JobPayload, LABEL_MANAGED, LABEL_RESOURCE_UUID } from "@capstan/shared";

type AppActionPayload = JobPayload<"app.action">;
import type { ContainerSummary, Engine } from "../docker/engine.js";
import { isNotFound } from "../docker/engine.js";
import { ensureRunning, ensureStopped, restartContainer } from "../docker/power.js";
import type { Handler, JobContext } from "../dispatch/types.js";
import { aggregateStatus, appContainers, latestRollout } from "../deploy/app-containers.js";
import { appLockKey } from "./app-deploy.js";
import type { ResolvedAppOptions } from "./app-options.js";
import type { KeyedMutex } from "../mutex.js";

const describe = (err: unknown) => (err instanceof Error ? err.message : String(err));

async function statusOf(engine: Engine, list: ContainerSummary[], signal: AbortSignal): Promise<string> {
  const details = await Promise.all(list.map((c) => engine.inspectContainer(c.name, signal)));
  return aggregateStatus(details.filter((d) => d !== null).map((d) => ({ state: d.state, health: d.health })));
}

async function removeAll(engine: Engine, opts: ResolvedAppOptions, payload: AppActionPayload, { signal, progress }: JobContext): Promise<void> {
  for (const c of await appContainers(engine, payload.app.uuid, signal)) {
    try {
      await engine.removeContainer(c.id, signal);
      progress(`container ${c.name} removed`);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }
  // Then what a compose project has besides containers (its network, its stored file unless
  // the configuration is kept, its volumes when asked); it finds nothing to do for other apps.
  const keepFiles = payload.delete_configurations === false;
  await opts.deps.composeDown(engine, { appUuid: payload.app.uuid, removeVolumes: payload.delete_volumes, keepFiles }, { signal, progress, stateDir: opts.stateDir });
  const owned = { [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: payload.app.uuid };
  if (payload.delete_volumes) {
    for (const v of await engine.listVolumes(owned, signal)) {
      try {
        await engine.removeVolume(v.name, signal);
        progress(`volume ${v.name} removed`);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
  }
  if (payload.docker_cleanup) {
    for (const img of await engine.listImages(owned, signal)) {
      try {
        await engine.removeImage(img.id, signal);
        progress(`image ${img.tags[0] ?? img.id.slice(7, 19)} removed`);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
  }
}

/**
 * app.action: start / stop / restart / remove the application's containers (found by their
 * capstan.resource.uuid label, compose services included), then a proxy sync so routes follow.
 */
export function appAction(engine: Engine, opts: ResolvedAppOptions, locks: KeyedMutex): Handler<"app.action"> {
  return (payload, ctx) =>
    locks.run(appLockKey(payload.app.uuid), async () => {
      const { signal, progress } = ctx;
      const { action } = payload;
      const all = await appContainers(engine, payload.app.uuid, signal);
      const stopS = opts.timing.stopTimeoutS;
      // start/restart bring back the newest rollout only: an older leftover must not serve.
      const latest = latestRollout(all);
      if ((action === "start" || action === "restart") && latest.length === 0) {
        throw new Error(`application ${payload.app.name} has no container on this server; deploy it first`);
      }
      switch (action) {
        case "start":
          for (const c of latest) await ensureRunning(engine, c, signal, progress);
          break;
        case "restart":
          for (const c of latest) await restartContainer(engine, c, stopS, signal, progress);
          break;
        case "stop":
          if (all.length === 0) progress(`application ${payload.app.name} has no container on this server`);
          for (const c of all) await ensureStopped(engine, c, stopS, signal, progress);
          break;
        case "remove":
          await removeAll(engine, opts, payload, ctx);
          break;
      }
      try {
        const { routes } = await opts.deps.syncProxy(engine, payload.proxy, { signal, progress });
        progress(`proxy updated: ${routes} route(s)`);
      } catch (err) {
        signal.throwIfAborted();
        throw new Error(`${action} done, but the proxy could not be updated: ${describe(err)}`);
      }
      if (action === "remove") return { status: "removed" };
      const now = await appContainers(engine, payload.app.uuid, signal);
      return { status: await statusOf(engine, action === "stop" ? now : latestRollout(now), signal) };
    });
}
