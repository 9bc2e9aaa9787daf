import { type BuildPayload, LABEL_COMMIT, LABEL_DEPLOYMENT } from "@capstan/shared";
import { EngineError, type Engine, type RegistryCredentials } from "../docker/engine.js";
import type { Handler } from "../dispatch/types.js";
import { registryOf, splitImageRef } from "../deploy/image.js";
import { storedLogin } from "../registries/config.js";
import { buildSecrets, createMasker } from "../deploy/mask.js";
import { produceImage } from "../deploy/source.js";
import type { ResolvedAppOptions } from "./app-options.js";

/** Every line of the build phase carries this prefix in the deployment's log. */
export const BUILD_LOG_PREFIX = "[build] ";

/** Bound on removing the local image after the push (it is only clean-up). */
const CLEANUP_MS = 60_000;

export { splitImageRef };

/**
 * app.build on a build server: the deployment's source becomes an image here (the same
 * build as app.deploy's), tagged with the registry reference the control plane chose, then
 * pushed there with the registry login. The local image goes after the push; its untagged
 * parents stay as build cache. An image this deployment already built (an earlier delivery,
 * before the agent restarted) is pushed without building again. Output and errors are
 * masked: no build env value, git credential or registry password is printed.
 */
export function appBuild(engine: Engine, opts: ResolvedAppOptions): Handler<"app.build"> {
  return async (payload, job) => {
    const target = payload.push.image;
    const registry = registryOf(target);
    // The instance's build registry login when the payload carries one, else the server's stored login of that registry.
    const login = payload.push.auth ?? (await storedLogin(opts.stateDir, registry));
    const auth: RegistryCredentials | null = login ? { ...login, serveraddress: registry } : null;
    const mask = createMasker([...buildSecrets(payload), ...(auth ? [auth.password] : [])]);
    const ctx = { signal: job.signal, progress: (line: string) => job.progress(BUILD_LOG_PREFIX + mask(line)) };
    try {
      let commit: string | null = null;
      let commitMessage: string | null = null;
      const earlier = await builtEarlier(engine, payload, ctx.signal);
      if (earlier) {
        commit = earlier.labels[LABEL_COMMIT] || null;
        ctx.progress(`image ${target} of this deployment was built by an earlier delivery; pushing it`);
      } else {
        const produced = await produceImage(
          engine,
          { deployment_uuid: payload.deployment_uuid, app: payload.app, source: payload.source, build: payload.build, run: { ports: payload.ports } },
          { stateDir: opts.stateDir, extraLabels: opts.extraLabels, deps: opts.deps, tag: target, labels: { [LABEL_DEPLOYMENT]: payload.deployment_uuid } },
          ctx,
        );
        commit = produced.commit;
        commitMessage = produced.commitMessage ?? null;
      }
      ctx.signal.throwIfAborted();

      const { repository, tag } = splitImageRef(target);
      ctx.progress(`pushing ${target} to ${registry}${auth ? ` as ${auth.username}` : ""}`);
      let digest: string | null;
      try {
        ({ digest } = await engine.pushImage(repository, tag, auth, ctx.progress, ctx.signal));
      } catch (err) {
        ctx.signal.throwIfAborted();
        throw new EngineError(`pushing the image to the registry ${registry} failed: ${reasonOf(err)}`);
      }
      const image = digest ? `${repository}@${digest}` : target;
      ctx.progress(`pushed ${image}`);
      return { image, commit, commit_message: commitMessage };
    } catch (err) {
      if (err instanceof Error) {
        err.message = mask(err.message);
        throw err;
      }
      throw new Error(mask(String(err)));
    } finally {
      await removeLocal(engine, target, ctx.progress);
    }
  };
}

function reasonOf(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  // The engine's message already names the push; keep what the registry said.
  return message.replace(/^push image \S+: /, "");
}

async function builtEarlier(engine: Engine, payload: BuildPayload, signal: AbortSignal) {
  const images = await engine.listImages({ [LABEL_DEPLOYMENT]: payload.deployment_uuid }, signal);
  return images.find((i) => i.tags.includes(payload.push.image)) ?? null;
}

/** The pushed (or failed) image leaves this server; its parents stay as the build cache. */
async function removeLocal(engine: Engine, ref: string, progress: (line: string) => void): Promise<void> {
  const signal = AbortSignal.timeout(CLEANUP_MS);
  try {
    if (!(await engine.imageExists(ref, signal))) return;
    await engine.removeImage(ref, signal, { keepParents: true });
    progress(`removed the local image ${ref} (build cache kept)`);
  } catch (err) {
    progress(`could not remove the local image ${ref}: ${reasonOf(err)}`);
  }
}
