import { type DeployPayload, LABEL_COMMIT, LABEL_DEPLOYMENT, LABEL_MANAGED } from "@capstan/shared";
import type { ContainerDetails, Engine } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";
import { assertBindSource, serverSensitivePaths } from "../deploy/binds.js";
import { createMasker, deploySecrets, maskError } from "../deploy/mask.js";
import { containerNameFor } from "../deploy/names.js";
import { rollout } from "../deploy/rollout.js";
import { produceImage } from "../deploy/source.js";
import type { ResolvedAppOptions } from "./app-options.js";
import type { KeyedMutex } from "../mutex.js";

export const appLockKey = (appUuid: string) => `app:${appUuid}`;

/**
 * A running container this deployment already started (an earlier delivery of this job, before
 * the agent restarted): the rollout continues with it instead of building again.
 */
async function earlierAttempt(engine: Engine, payload: DeployPayload, signal: AbortSignal): Promise<ContainerDetails | null> {
  const c = await engine.inspectContainer(containerNameFor(payload.app.uuid, payload.deployment_uuid), signal);
  if (!c || !c.running || c.labels[LABEL_MANAGED] !== "true" || c.labels[LABEL_DEPLOYMENT] !== payload.deployment_uuid) return null;
  return c;
}

/**
 * app.deploy: source -> image (pull, or build a Dockerfile / git checkout), then a zero-downtime
 * rollout, or a compose deployment. Every progress line and the error are masked: no value of
 * the run/build env or of the git credentials is printed.
 */
export function appDeploy(engine: Engine, opts: ResolvedAppOptions, locks: KeyedMutex): Handler<"app.deploy"> {
  return async (payload, job) => {
    const mask = createMasker(deploySecrets(payload));
    const ctx = { signal: job.signal, progress: (line: string) => job.progress(mask(line)) };
    const { deps } = opts;
    try {
      const sensitivePaths = await serverSensitivePaths(engine, opts.stateDir, ctx.signal);
      // Refused before anything is pulled or built; the rollout checks again before it creates.
      for (const m of payload.run.mounts) if ("host_path" in m) assertBindSource(m.host_path, sensitivePaths);
      if (payload.source.kind === "compose") {
        return await locks.run(appLockKey(payload.app.uuid), async () => {
          const r = await deps.deployCompose(engine, payload, { ...ctx, stateDir: opts.stateDir, extraLabels: opts.extraLabels });
          const { routes } = await deps.syncProxy(engine, payload.proxy, ctx);
          ctx.progress(`proxy updated: ${routes} route(s)`);
          return { image: "", container: r.container, commit: null, status: r.status };
        });
      }

      const earlier = await earlierAttempt(engine, payload, ctx.signal);
      let image: string;
      let commit: string | null;
      let commitMessage: string | null = null;
      if (earlier) {
        image = earlier.image;
        commit = earlier.labels[LABEL_COMMIT] || null;
        ctx.progress(`container ${earlier.name} of this deployment already runs (earlier delivery); skipping the build`);
      } else {
        // Builds run outside the app lock: an action (stop, restart) need not wait for a build.
        const produced = await produceImage(engine, payload, { stateDir: opts.stateDir, extraLabels: opts.extraLabels, deps }, ctx);
        ({ image, commit } = produced);
        commitMessage = produced.commitMessage ?? null;
      }
      ctx.signal.throwIfAborted();
      const result = await locks.run(appLockKey(payload.app.uuid), () =>
        rollout({ engine, deps, extraLabels: opts.extraLabels, timing: opts.timing, sensitivePaths }, { payload, image, commit }, ctx),
      );
      return { ...result, commit_message: commitMessage };
    } catch (err) {
      throw maskError(err, mask);
    }
  };
}
