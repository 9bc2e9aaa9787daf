import { lstat, mkdir } from "node:fs/promises";
import { join } from "node:path";
import {
  type DeployPayload,
  SOURCE_BUILDERS,
  type SourceBuilder,
  LABEL_COMMIT,
  LABEL_MANAGED,
  LABEL_RESOURCE_UUID,
} from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { resolveRepoDir, writeContextFile } from "./context.js";
import type { DeployDeps, StepCtx } from "./deps.js";
import { buildFromDir, ensureImage, registryOf } from "./image.js";
import { imageTagFor } from "./names.js";
import { allLogins } from "../registries/config.js";
import { createWorkDir } from "./workdir.js";

export interface SourceOptions {
  stateDir: string;
  extraLabels: Record<string, string>;
  deps: Pick<DeployDeps, "fetchGit" | "planBuild">;
  /** Tag of the built image; default `capstan/<app uuid>:<deployment uuid>` (imageTagFor). */
  tag?: string;
  /** More labels for a built image (the build server marks the deployment it built). */
  labels?: Record<string, string>;
}

/** What turning a source into an image reads of a deployment (app.deploy and app.build). */
export interface ImageInput {
  deployment_uuid: string;
  app: DeployPayload["app"];
  source: DeployPayload["source"];
  build: DeployPayload["build"];
  run: Pick<DeployPayload["run"], "ports">;
}

/** Dockerfile name a source builder's plan is written to (beside the app's own files). */
export const PLAN_DOCKERFILE = "Dockerfile.capstan";

const isSourceBuilder = (p: string): p is SourceBuilder => (SOURCE_BUILDERS as readonly string[]).includes(p);

/**
 * Turns the deployment's source into a local image: the image itself (pulled when missing),
 * or a build of a Dockerfile / a git checkout. Returns the image reference and the commit.
 */
export async function produceImage(
  engine: Engine,
  payload: ImageInput,
  opts: SourceOptions,
  ctx: StepCtx,
): Promise<{ image: string; commit: string | null; commitMessage?: string | null }> {
  const { source, build } = payload;
  if (source.kind === "image") {
    // The payload's login (an image a build server pushed to the instance's registry), else the server's stored logins.
    const auth = source.auth ? { ...source.auth, serveraddress: registryOf(source.image) } : null;
    await ensureImage(engine, source.image, ctx, { auth, always: source.always_pull === true || auth !== null, logins: opts.stateDir });
    return { image: source.image, commit: null };
  }
  if (source.kind === "compose") throw new Error("compose deployments do not build a single image");

  const tag = opts.tag ?? imageTagFor(payload.app.uuid, payload.deployment_uuid);
  // The base images of the FROM lines are pulled with the server's stored logins.
  const registryConfig = await allLogins(opts.stateDir);
  const buildOpts = (dockerfile: string, commit: string | null = null) => ({
    dockerfile,
    registryConfig,
    tag,
    buildargs: build.env,
    nocache: build.no_cache,
    labels: {
      ...opts.extraLabels,
      ...opts.labels,
      [LABEL_MANAGED]: "true",
      [LABEL_RESOURCE_UUID]: payload.app.uuid,
      ...(commit ? { [LABEL_COMMIT]: commit } : {}),
    },
  });

  const work = await createWorkDir(opts.stateDir, payload.deployment_uuid);
  try {
    if (source.kind === "dockerfile") {
      // A context holding only the Dockerfile: COPY/ADD of local files have nothing to reach.
      const dir = join(work.path, "context");
      await mkdir(dir, { mode: 0o700 });
      await writeContextFile(dir, "Dockerfile", source.dockerfile);
      await buildFromDir(engine, dir, buildOpts("Dockerfile"), ctx);
      return { image: tag, commit: null };
    }

    const clone = join(work.path, "src");
    ctx.progress(`fetching ${source.url} (${source.commit ? `commit ${source.commit}` : `branch ${source.branch}`})`);
    const fetched = await opts.deps.fetchGit(source, clone, ctx);
    ctx.progress(`checked out ${fetched.commit.slice(0, 12)}${fetched.message ? `: ${fetched.message.split("\n")[0]}` : ""}`);
    ctx.signal.throwIfAborted();
    const dir = await resolveRepoDir(clone, build.base_directory);

    if (build.pack === "containerfile") {
      const st = await lstat(join(dir, "Dockerfile")).catch(() => null);
      if (!st?.isFile()) throw new Error(`no Dockerfile in ${build.base_directory} of the repository (build pack containerfile needs one)`);
      await buildFromDir(engine, dir, buildOpts("Dockerfile", fetched.commit), ctx);
    } else if (isSourceBuilder(build.pack)) {
      const plan = await opts.deps.planBuild({ pack: build.pack, dir, baseImages: build.base_images, buildEnv: build.env, ports: payload.run.ports });
      ctx.progress(`${build.pack}: ${plan.summary}`);
      for (const [rel, content] of Object.entries(plan.files)) await writeContextFile(dir, rel, content);
      await writeContextFile(dir, PLAN_DOCKERFILE, plan.dockerfile);
      await buildFromDir(engine, dir, buildOpts(PLAN_DOCKERFILE, fetched.commit), ctx);
    } else {
      throw new Error(`build pack ${build.pack} cannot build a git source`);
    }
    return { image: tag, commit: fetched.commit, commitMessage: fetched.message ? fetched.message.split("\n")[0]!.slice(0, 1000) : null };
  } finally {
    await work.dispose().catch(() => {});
  }
}
