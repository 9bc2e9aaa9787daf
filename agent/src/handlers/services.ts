import { type JobPayload, LABEL_MANAGED, LABEL_RESOURCE_UUID, LABEL_SERVICE_COMPONENT, type ServiceDeployResult } from "@capstan/shared";
import type { ContainerSummary, Engine } from "../docker/engine.js";
import { isNotFound } from "../docker/engine.js";
import { ensureStopped } from "../docker/power.js";
import { containerStatus } from "../docker/status.js";
import type { Handler } from "../dispatch/types.js";
import { aggregateStatus, appContainers } from "../deploy/app-containers.js";
import { composeUp } from "../deploy/compose.js";
import { createMasker, maskError } from "../deploy/mask.js";
import { appLockKey } from "./app-deploy.js";
import type { ResolvedAppOptions } from "./app-options.js";
import type { KeyedMutex } from "../mutex.js";

/**
 * Services (issue 17, spec 4.6): a service is a compose project like a compose application's
 * (agent/src/deploy/compose.ts: the same checks of the rewritten file, networks, `up`, health
 * wait), under the same per-resource lock; its containers carry capstan.resource.type
 * "service" and their component's uuid, so statuses are reported per component.
 */

const describe = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Component name of a service container (`<service uuid>-<compose service>`). */
const componentName = (serviceUuid: string, container: string) => container.replace(/^\//, "").slice(serviceUuid.length + 1);

async function componentStatuses(engine: Engine, serviceUuid: string, list: ContainerSummary[], signal: AbortSignal): Promise<ServiceDeployResult> {
  const details = (await Promise.all(list.map((c) => engine.inspectContainer(c.name, signal)))).filter((d) => d !== null);
  return {
    status: aggregateStatus(details.map((d) => ({ state: d.state, health: d.health }))),
    components: details
      .filter((d) => d.labels[LABEL_SERVICE_COMPONENT])
      .map((d) => ({ name: componentName(serviceUuid, d.name), status: containerStatus(d.state, d.health) })),
  };
}

/** service.deploy: compose up of the service's rewritten file (pull first when asked), then a proxy sync. */
export function serviceDeploy(engine: Engine, opts: ResolvedAppOptions, locks: KeyedMutex): Handler<"service.deploy"> {
  return (payload, job) =>
    locks.run(appLockKey(payload.service.uuid), async () => {
      const secrets = Object.values(payload.run.env);
      const mask = createMasker(secrets);
      const ctx = { signal: job.signal, progress: (line: string) => job.progress(mask(line)) };
      try {
        const r = await composeUp(
          engine,
          { deployment_uuid: payload.deployment_uuid, app: payload.service, compose: payload.compose, run: payload.run, pull: payload.pull, recreate: payload.recreate, secrets },
          { ...ctx, stateDir: opts.stateDir, extraLabels: opts.extraLabels },
        );
        const { routes } = await opts.deps.syncProxy(engine, payload.proxy, ctx);
        ctx.progress(`proxy updated: ${routes} route(s)`);
        return {
          status: r.status,
          components: r.containers
            .filter((d) => d.labels[LABEL_SERVICE_COMPONENT])
            .map((d) => ({ name: componentName(payload.service.uuid, d.name), status: containerStatus(d.state, d.health) })),
        };
      } catch (err) {
        throw maskError(err, mask);
      }
    });
}

/** service.action: stop the service's containers, or remove everything of it (then a proxy sync, so routes follow). */
export function serviceAction(engine: Engine, opts: ResolvedAppOptions, locks: KeyedMutex): Handler<"service.action"> {
  return (payload, ctx) =>
    locks.run(appLockKey(payload.service.uuid), async () => {
      const { signal, progress } = ctx;
      const uuid = payload.service.uuid;
      if (payload.action === "stop") {
        const all = await appContainers(engine, uuid, signal);
        if (all.length === 0) progress(`service ${payload.service.name} has no container on this server`);
        for (const c of all) await ensureStopped(engine, c, opts.timing.stopTimeoutS, signal, progress);
      } else {
        await opts.deps.composeDown(
          engine,
          { appUuid: uuid, removeVolumes: payload.delete_volumes, keepFiles: !payload.delete_configurations },
          { signal, progress, stateDir: opts.stateDir },
        );
        // Containers outside the compose project (none are expected) go too.
        for (const c of await appContainers(engine, uuid, signal)) {
          try {
            await engine.removeContainer(c.id, signal);
            progress(`container ${c.name} removed`);
          } catch (err) {
            if (!isNotFound(err)) throw err;
          }
        }
        if (payload.docker_cleanup) {
          for (const img of await engine.listImages({ [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: uuid }, signal)) {
            try {
              await engine.removeImage(img.id, signal);
              progress(`image ${img.tags[0] ?? img.id.slice(7, 19)} removed`);
            } catch (err) {
              if (!isNotFound(err)) throw err;
            }
          }
        }
      }
      try {
        const { routes } = await opts.deps.syncProxy(engine, payload.proxy, { signal, progress });
        progress(`proxy updated: ${routes} route(s)`);
      } catch (err) {
        signal.throwIfAborted();
        throw new Error(`${payload.action} done, but the proxy could not be updated: ${describe(err)}`);
      }
      if (payload.action === "remove") return { status: "removed", components: [] };
      return componentStatuses(engine, uuid, await appContainers(engine, uuid, signal), signal);
    });
}
