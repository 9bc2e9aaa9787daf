import type { BuildImageOptions, Engine, RegistryCredentials } from "../docker/engine.js";
import { EngineError } from "../docker/engine.js";
import { pullPlan } from "../registries/config.js";
import { contextStream } from "./context.js";

export interface StepContext {
  signal: AbortSignal;
  /** Already masked by the caller. */
  progress(line: string): void;
}

export interface PullOptions {
  /** Registry login for this pull (sent in the engine's auth header, never printed). */
  auth?: RegistryCredentials | null;
  /** Pull even when the image is present: the registry's copy is the one to run. */
  always?: boolean;
  /**
   * The agent's state directory: without an explicit `auth`, the pull uses the stored login of
   * the image's registry (and the default registry for an image naming no host; registries/config.ts).
   */
  logins?: string;
}

/** The registry part of an image reference (host[:port]), as the engine's auth config names it. */
export function registryOf(ref: string): string {
  const first = ref.split("/")[0]!;
  return ref.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost") ? first : "docker.io";
}

/** `host:port/path/name:tag` -> repository and tag (the tag follows the last ':' after the last '/'). */
export function splitImageRef(ref: string): { repository: string; tag: string } {
  const slash = ref.lastIndexOf("/");
  const colon = ref.lastIndexOf(":");
  if (colon <= slash) return { repository: ref, tag: "latest" };
  return { repository: ref.slice(0, colon), tag: ref.slice(colon + 1) };
}

/**
 * Uses a local image, or pulls it (always, with `opts.always`); a failed pull fails with the
 * registry's reason (unless a local copy may be used).
 */
export async function ensureImage(engine: Engine, ref: string, { signal, progress }: StepContext, opts: PullOptions = {}): Promise<void> {
  if (!opts.always && (await engine.imageExists(ref, signal))) {
    progress(`image ${ref} is present on this server`);
    return;
  }
  let pull = ref;
  let auth = opts.auth ?? null;
  if (!auth && opts.logins) ({ pull, auth } = await pullPlan(opts.logins, ref));
  progress(`pulling image ${pull}${auth ? ` (as ${auth.username})` : ""}`);
  try {
    await engine.pullImage(pull, progress, signal, auth);
    // From the default registry: the image keeps the name it was asked by.
    if (pull !== ref) {
      const { repository, tag } = splitImageRef(ref);
      await engine.tagImage(pull, repository, tag, signal);
    }
  } catch (err) {
    signal.throwIfAborted();
    const reason = err instanceof Error ? err.message : String(err);
    if (opts.always) throw new EngineError(`image ${ref} could not be pulled: ${reason}`);
    throw new EngineError(`image ${ref} is not on this server and could not be pulled: ${reason}`);
  }
  if (!(await engine.imageExists(ref, signal))) throw new EngineError(`image ${ref} could not be pulled`);
  progress(`pulled image ${ref}`);
}

/**
 * Builds `dir` (a context directory on disk) with the Dockerfile at `opts.dockerfile`.
 * The context is streamed; aborting the signal aborts the build request and the stream.
 */
export async function buildFromDir(engine: Engine, dir: string, opts: BuildImageOptions, { signal, progress }: StepContext): Promise<string> {
  signal.throwIfAborted();
  const context = await contextStream(dir, opts.dockerfile);
  // The build request ends on the job's signal, and also when the context cannot be read
  // (the engine would otherwise wait for the rest of the archive).
  const request = new AbortController();
  const onAbort = () => request.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  let contextError: Error | null = null;
  context.on("error", (err: Error) => {
    contextError ??= err;
    request.abort(err);
  });
  progress(`building image ${opts.tag}${opts.nocache ? " (no cache)" : ""}`);
  try {
    const { id } = await engine.buildImage(context, opts, progress, request.signal);
    progress(`built image ${opts.tag}${id ? ` (${id.replace(/^sha256:/, "").slice(0, 12)})` : ""}`);
    return opts.tag;
  } catch (err) {
    signal.throwIfAborted();
    if (contextError) throw new Error(`reading the build context failed: ${(contextError as Error).message}`);
    throw err;
  } finally {
    signal.removeEventListener("abort", onAbort);
    context.destroy();
  }
}
