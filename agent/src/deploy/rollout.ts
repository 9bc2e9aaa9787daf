import {
  type DeployPayload,
  parseMemory,
  LABEL_COMMIT,
  LABEL_DEPLOYMENT,
  LABEL_DOMAINS,
  LABEL_JOB,
  LABEL_MANAGED,
  LABEL_PROXY_NETWORK,
  LABEL_PROXY_PORT,
  LABEL_PROXY_ROUTES,
  LABEL_RESOURCE_NAME,
  LABEL_RESOURCE_TYPE,
  LABEL_RESOURCE_UUID,
  LABEL_ROLLOUT,
  RESOURCE_TYPE_APPLICATION,
} from "@capstan/shared";
import type { ContainerDetails, ContainerMount, CreateContainerSpec, Engine } from "../docker/engine.js";
import { isNotFound } from "../docker/engine.js";
import { waitContainerReady } from "../docker/readiness.js";
import { containerStatus } from "../docker/status.js";
import { joinResourceNetworks, prepareResourceNetworks } from "../networks/index.js";
import { appContainers, rolloutOf } from "./app-containers.js";
import { assertBindMounts } from "./binds.js";
import type { DeployDeps, StepCtx } from "./deps.js";
import { healthcheckFor, healthUrl } from "./health.js";
import { containerNameFor, volumeNameFor } from "./names.js";

export interface RolloutTiming {
  /** How often the new container is inspected while waiting for it. */
  pollMs: number;
  /** Without a health check: how long it must run without a restart to count as up. */
  stableMs: number;
  /** Grace period (SIGTERM -> SIGKILL) when stopping the old containers. */
  stopTimeoutS: number;
  /** Bound on the clean-up after a failed or cancelled rollout. */
  cleanupTimeoutMs: number;
}

export const DEFAULT_TIMING: RolloutTiming = { pollMs: 50, stableMs: 3_000, stopTimeoutS: 10, cleanupTimeoutMs: 60_000 };

export interface RolloutEnv {
  engine: Engine;
  deps: Pick<DeployDeps, "syncProxy">;
  extraLabels: Record<string, string>;
  timing: RolloutTiming;
  /** This server's own paths bind mounts may not touch (deploy/binds.ts); the shared list applies always. */
  sensitivePaths?: readonly string[];
}

/**
 * The labels of an application container (the contract the proxy and the control plane read).
 * Every label the platform reads is set, empty when it has no value: the engine copies an
 * image's labels onto its containers, and a label the container does not set itself could
 * otherwise come from the image (an image claiming routes for someone else's domain).
 */
export function appLabels(payload: DeployPayload, commit: string | null, extraLabels: Record<string, string>, rollout: number): Record<string, string> {
  const { app, run } = payload;
  const labels: Record<string, string> = {
    ...extraLabels,
    [LABEL_MANAGED]: "true",
    [LABEL_RESOURCE_UUID]: app.uuid,
    [LABEL_RESOURCE_NAME]: app.name,
    [LABEL_RESOURCE_TYPE]: RESOURCE_TYPE_APPLICATION,
    [LABEL_DEPLOYMENT]: payload.deployment_uuid,
    [LABEL_DOMAINS]: [...new Set(run.routes.map((r) => r.host))].join(","),
    [LABEL_PROXY_ROUTES]: JSON.stringify(run.routes),
    // The network the proxy dials the container on (the proxy network under proxy isolation).
    [LABEL_PROXY_NETWORK]: run.proxy_network ?? run.network,
    [LABEL_ROLLOUT]: String(rollout),
    [LABEL_PROXY_PORT]: run.ports.length > 0 ? String(run.ports[0]) : "",
    [LABEL_COMMIT]: commit ?? "",
    [LABEL_JOB]: "",
  };
  return labels;
}

export function appContainerSpec(payload: DeployPayload, image: string, commit: string | null, extraLabels: Record<string, string>, rollout: number): CreateContainerSpec {
  const { app, run } = payload;
  const mounts: ContainerMount[] = run.mounts.map((m) =>
    "volume" in m ? { type: "volume", source: volumeNameFor(app.uuid, m.volume), target: m.mount_path } : { type: "bind", source: m.host_path, target: m.mount_path },
  );
  return {
    name: containerNameFor(app.uuid, payload.deployment_uuid),
    image,
    env: run.env,
    labels: appLabels(payload, commit, extraLabels, rollout),
    network: run.network,
    restart: "unless-stopped",
    exposedPorts: run.ports,
    mounts,
    healthcheck: run.health ? healthcheckFor(run.health) : undefined,
    memoryBytes: run.memory ? parseMemory(run.memory) : undefined,
    nanoCpus: run.cpus ? Math.round(Number(run.cpus) * 1e9) : undefined,
  };
}

/** A rollout that failed for a reason the user should read (the job's error). */
export class RolloutError extends Error {
  override name = "RolloutError";
}

/**
 * Waits until the new container is ready to receive traffic: healthy when it has a health
 * check, otherwise running for `stableMs` without a restart.
 */
function waitReady(engine: Engine, name: string, payload: DeployPayload, timing: RolloutTiming, ctx: StepCtx): Promise<ContainerDetails> {
  const h = payload.run.health;
  const health = h ? { check: healthcheckFor(h), probe: `the health check ${healthUrl(h)}` } : null;
  return waitContainerReady(engine, name, { subject: `new container ${name}`, health, stableMs: timing.stableMs, pollMs: timing.pollMs }, ctx);
}

async function prepareMounts(env: RolloutEnv, spec: CreateContainerSpec, appUuid: string, { signal, progress }: StepCtx): Promise<void> {
  for (const m of spec.mounts ?? []) {
    if (m.type !== "volume") continue;
    const { created } = await env.engine.ensureVolume(
      { name: m.source, labels: { ...env.extraLabels, [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: appUuid } },
      signal,
    );
    if (created) progress(`volume ${m.source} created`);
  }
}

/** Removes this deployment's container; re-syncs the proxy when it may already route to it. */
async function rollback(env: RolloutEnv, name: string, payload: DeployPayload, resync: boolean, progress: (l: string) => void): Promise<void> {
  const signal = AbortSignal.timeout(env.timing.cleanupTimeoutMs);
  try {
    const c = await env.engine.inspectContainer(name, signal);
    if (c && c.labels[LABEL_DEPLOYMENT] === payload.deployment_uuid) {
      await env.engine.removeContainer(c.id, signal).catch((err) => {
        if (!isNotFound(err)) throw err;
      });
      progress(`removed the new container ${name}; the previous one keeps serving`);
    }
  } catch (err) {
    progress(`could not remove container ${name}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!resync) return;
  try {
    await env.deps.syncProxy(env.engine, payload.proxy, { signal, progress });
  } catch (err) {
    progress(`could not update the proxy after the rollback: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Images built for an application that stay on the server: the one serving and the one before. */
export const KEEP_BUILT_IMAGES = 2;

/**
 * Removes images built for the application (label capstan.resource.uuid) beyond the newest
 * KEEP_BUILT_IMAGES, never the one now serving, so a server's disk does not fill up one
 * deployment at a time. Pulled images (containerimage apps) carry no such label and stay.
 * Failures are reported, not fatal.
 */
export async function pruneImages(env: RolloutEnv, appUuid: string, serving: string, progress: (l: string) => void): Promise<void> {
  const signal = AbortSignal.timeout(env.timing.cleanupTimeoutMs);
  try {
    const images = (await env.engine.listImages({ [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: appUuid }, signal)).sort(
      (a, b) => (b.created ?? 0) - (a.created ?? 0),
    );
    const inUse = (i: { id: string; tags: string[] }) => i.id === serving || i.tags.includes(serving);
    for (const old of images.filter((i) => !inUse(i)).slice(Math.max(0, KEEP_BUILT_IMAGES - 1))) {
      try {
        await env.engine.removeImage(old.id, signal, { keepParents: false });
        progress(`removed the old image ${old.tags[0] ?? old.id.slice(7, 19)}`);
      } catch (err) {
        if (!isNotFound(err)) progress(`could not remove the old image ${old.tags[0] ?? old.id}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
  } catch (err) {
    progress(`could not list the application's old images: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Stops and removes the app's containers older than the one now serving. Failures are reported, not fatal. */
async function retireOlder(env: RolloutEnv, appUuid: string, keep: string, rollout: number, progress: (l: string) => void): Promise<void> {
  const signal = AbortSignal.timeout(env.timing.cleanupTimeoutMs + env.timing.stopTimeoutS * 1000);
  let list;
  try {
    list = await appContainers(env.engine, appUuid, signal);
  } catch (err) {
    progress(`could not list the older containers: ${err instanceof Error ? err.message : String(err)}`);
    return;
  }
  for (const c of list) {
    if (c.name === keep || rolloutOf(c) > rollout) continue;
    try {
      if (c.state === "running" || c.state === "restarting" || c.state === "paused") await env.engine.stopContainer(c.id, env.timing.stopTimeoutS, signal);
      await env.engine.removeContainer(c.id, signal);
      progress(`stopped and removed the previous container ${c.name}`);
    } catch (err) {
      if (isNotFound(err)) continue;
      progress(`could not remove the previous container ${c.name}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

/**
 * Zero-downtime rollout of one deployment: create and start its container (or find the one
 * an earlier attempt of this job started), wait until it is ready, point the proxy at it, then
 * retire the older containers. On failure or cancel before the switch, the new container is
 * removed and the old ones keep serving.
 */
export async function rollout(env: RolloutEnv, input: { payload: DeployPayload; image: string; commit: string | null }, ctx: StepCtx) {
  const { engine } = env;
  const { payload, image, commit } = input;
  const { signal, progress } = ctx;
  signal.throwIfAborted(); // cancelled while waiting for the app's lock
  const spec = appContainerSpec(payload, image, commit, env.extraLabels, Date.now());
  const name = spec.name;

  let existing = await engine.inspectContainer(name, signal);
  if (existing && (existing.labels[LABEL_MANAGED] !== "true" || existing.labels[LABEL_DEPLOYMENT] !== payload.deployment_uuid)) {
    throw new RolloutError(`container name ${name} is taken by a container of another deployment; not touching it`);
  }
  if (existing && !existing.running) {
    progress(`removing container ${name} left ${existing.state} by an earlier attempt`);
    await engine.removeContainer(existing.id, signal).catch((err) => {
      if (!isNotFound(err)) throw err;
    });
    existing = null;
  }

  let rolloutAt = existing ? rolloutOf(existing) : Number(spec.labels[LABEL_ROLLOUT]);
  let switching = false;
  try {
    if (existing) {
      progress(`container ${name} from an earlier attempt of this deployment is running; waiting for it`);
    } else {
      await prepareResourceNetworks(engine, payload.run, { ...ctx, extraLabels: env.extraLabels });
      await prepareMounts(env, spec, payload.app.uuid, ctx);
      // The rollout stamp is taken when the container is created: newer wins in the proxy.
      rolloutAt = Date.now();
      spec.labels[LABEL_ROLLOUT] = String(rolloutAt);
      // The last check before the engine mounts anything of the server.
      assertBindMounts(spec.mounts, env.sensitivePaths ?? []);
      const { id } = await engine.createContainer(spec, signal);
      progress(`container ${name} created (${id.slice(0, 12)})`);
      // Joined before it starts: it never serves a moment without its networks.
      await joinResourceNetworks(engine, name, payload.run, ctx);
      await engine.startContainer(id, signal);
      progress(
        payload.run.health
          ? `container ${name} started; waiting for its health check ${healthUrl(payload.run.health)}`
          : `container ${name} started; waiting ${Math.round(env.timing.stableMs / 1000)}s for it to stay up`,
      );
    }
    await waitReady(engine, name, payload, env.timing, ctx);
    switching = true;
    const { routes } = await env.deps.syncProxy(engine, payload.proxy, ctx);
    progress(`proxy updated: ${routes} route(s); traffic goes to ${name}`);
    signal.throwIfAborted();
  } catch (err) {
    await rollback(env, name, payload, switching, progress);
    throw err;
  }

  // Traffic has moved: the old containers go whatever happens to the job's signal now.
  await retireOlder(env, payload.app.uuid, name, rolloutAt, progress);
  // A user's own image was never built for the app: no listing of the engine's images (~70 ms
  // on a server with many) on every deploy of an image application.
  if (payload.source.kind !== "image" || payload.source.built_for_app === true) await pruneImages(env, payload.app.uuid, image, progress);
  const final = await engine.inspectContainer(name, AbortSignal.timeout(10_000)).catch(() => null);
  const status = final ? containerStatus(final.state, final.health) : "running:unknown";
  progress(`deployment ${payload.deployment_uuid} is live (${status})`);
  return { image, container: name, commit, status };
}
