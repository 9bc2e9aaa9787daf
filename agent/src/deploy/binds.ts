import { checkHostPath } from "@capstan/shared";
import type { ContainerMount, EngineSystem } from "../docker/engine.js";

/**
 * The agent is the last line before a bind mount reaches the engine: it checks every bind source
 * again with the control plane's own rule (shared checkHostPath), plus this server's own paths
 * the control plane does not know (the agent's state directory, the engine's socket when it is
 * not at its usual place). A job payload is never trusted as checked just because it arrived.
 */
export class BindMountRefused extends Error {
  override name = "BindMountRefused";
}

/** This server's paths no bind mount may be, be inside of, or contain (besides the shared list). */
export function ownSensitivePaths(stateDir: string | null, socketPath: string, engineDataRoot: string | null = null): string[] {
  return [socketPath, ...(stateDir ? [stateDir] : []), ...(engineDataRoot ? [engineDataRoot] : [])];
}

const dataRoots = new WeakMap<object, string>();

/**
 * The engine's data root (`docker info` DockerRootDir: images, containers, volumes), asked once
 * per engine. The shared list covers the default /var/lib/docker; a server whose engine keeps its
 * data elsewhere (say /data/docker) is protected only by this. Null when the engine does not say.
 */
export async function engineDataRoot(engine: Pick<EngineSystem, "info">, signal?: AbortSignal): Promise<string | null> {
  const known = dataRoots.get(engine);
  if (known) return known;
  try {
    const dir = (await engine.info(signal)).dockerRootDir;
    if (dir) dataRoots.set(engine, dir);
    return dir;
  } catch {
    // An engine that cannot answer cannot create containers either; the deploy fails there.
    return null;
  }
}

/** ownSensitivePaths with the engine's socket and data root. */
export async function serverSensitivePaths(engine: Pick<EngineSystem, "info" | "socketPath">, stateDir: string | null, signal?: AbortSignal): Promise<string[]> {
  return ownSensitivePaths(stateDir, engine.socketPath, await engineDataRoot(engine, signal));
}

/**
 * Throws BindMountRefused, naming the source and the reason, when a bind source breaks the rule
 * or is not in its normalised form (the control plane only ever sends normalised paths, so any
 * other form did not come from its checks).
 */
export function assertBindSource(source: string, sensitive: readonly string[]): void {
  const r = checkHostPath(source, sensitive);
  if (!r.ok) throw new BindMountRefused(`bind mount of ${JSON.stringify(source.slice(0, 200))} refused by the agent: ${r.reason}`);
  if (r.path !== source) {
    throw new BindMountRefused(`bind mount of ${JSON.stringify(source.slice(0, 200))} refused by the agent: the path is not in its normal form (${r.path})`);
  }
}

/** assertBindSource for every bind mount of a container about to be created. */
export function assertBindMounts(mounts: readonly ContainerMount[] | undefined, sensitive: readonly string[]): void {
  for (const m of mounts ?? []) if (m.type === "bind") assertBindSource(m.source, sensitive);
}
