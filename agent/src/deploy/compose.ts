import { execFile, spawn } from "node:child_process";
import { chmod, mkdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  ComposeMeta,
  type DeployPayload,
  LABEL_DEPLOYMENT,
  LABEL_MANAGED,
  LABEL_RESOURCE_UUID,
  type NetworkSpec,
} from "@capstan/shared";
import { type ContainerDetails, type Engine, isNotFound } from "../docker/engine.js";
import { KeyedMutex } from "../mutex.js";
import { registryConfigDir } from "../registries/config.js";
import { assertBindSource, serverSensitivePaths } from "./binds.js";
import { prepareResourceNetworks } from "../networks/index.js";
import { sleep } from "../sleep.js";
import { resourceStatus } from "../status/aggregate.js";
import { createMasker, deploySecrets, type Masker } from "./mask.js";

/**
 * Compose deployments (build pack containercompose). The control plane sends the file it
 * rewrote (control-plane/src/compose: names, labels, networks, every `$` escaped); the agent
 * checks it is that rewrite, writes it to its private state directory and runs compose with
 * argv and a minimal environment, then waits for the services to run (and be healthy).
 */

export interface ComposeCtx {
  signal: AbortSignal;
  progress(line: string): void;
  stateDir: string;
  /** The agent's CAPSTAN_AGENT_LABELS: added to every service and volume, never over the platform's own. */
  extraLabels?: Record<string, string>;
}

/** The rendered file with the agent's extra labels on every service, named volume and network it creates. */
export function withExtraLabels(rendered: string, extra: Record<string, string> | undefined): string {
  if (!extra || Object.keys(extra).length === 0) return rendered;
  type Labelled = { labels?: Record<string, string>; external?: boolean } | null;
  const doc = JSON.parse(rendered) as { services?: Record<string, Labelled>; volumes?: Record<string, Labelled>; networks?: Record<string, Labelled> };
  for (const part of [doc.services, doc.volumes, doc.networks]) {
    for (const [name, item] of Object.entries(part ?? {})) {
      // External objects (the destination network) exist already; compose does not create them.
      if (item?.external) continue;
      part![name] = { ...item, labels: { ...extra, ...item?.labels } };
    }
  }
  return JSON.stringify(doc);
}

/** What the rendered file says about itself under x-capstan (shared's ComposeMeta). */
type Meta = ComposeMeta;

type Service = Record<string, unknown> & { labels?: Record<string, unknown>; restart?: unknown; healthcheck?: unknown };

export const composeProject = (appUuid: string) => `capstan-${appUuid}`;
const appNetwork = (appUuid: string) => `capstan-${appUuid}`;
const composeDir = (stateDir: string, appUuid: string) => join(stateDir, "compose", appUuid);
const COMPOSE_FILE = "docker-compose.yml";
const MAX_FILE = 1_048_576;

/** Service keys the control plane never writes; their presence means the file is not its rewrite. */
const FORBIDDEN_SERVICE_KEYS = [
  "privileged", "cap_add", "devices", "device_cgroup_rules", "gpus", "pid", "ipc", "uts", "userns_mode", "network_mode",
  "cgroup", "cgroup_parent", "sysctls", "runtime", "isolation", "build", "env_file", "extends", "secrets", "configs",
  "volumes_from", "external_links", "links", "logging", "ports", "storage_opt", "oom_kill_disable", "credential_spec", "profiles",
];
const TOP_LEVEL_KEYS = new Set(["x-capstan", "services", "networks", "volumes"]);

/** One compose run per application at a time on this agent (deploy, down). */
const locks = new KeyedMutex();

/** Bounds of the wait for services after `up`. */
const POLL_MS = 500;
/** Services without a health check must stay running this long (a crash loop shows within it). */
const SETTLE_MS = 1_500;
const MIN_WAIT_MS = 60_000;
const MAX_WAIT_MS = 15 * 60_000;
/** Restarts during the wait after which a service is reported as crash-looping. */
const MAX_RESTARTS = 3;
/** How long `docker compose down` may take before it is killed. */
const DOWN_TIMEOUT_MS = 5 * 60_000;

/**
 * What one compose run needs: a compose application's deployment (app.deploy) or a service's
 * start (service.deploy, issue 17). `app` is the resource (application or service) that owns
 * the project; `secrets` are masked in every line printed.
 */
export interface ComposeDeploy {
  deployment_uuid: string;
  app: { uuid: string; name: string };
  compose: string;
  run: { network: string; networks?: string[] | undefined; ensure_networks?: NetworkSpec[] | undefined };
  /** Pull every image of the file before `up` (a service's start with pull). */
  pull?: boolean;
  /** Recreate every container even when its configuration is unchanged (a service's restart). */
  recreate?: boolean;
  secrets: string[];
}

/** Deploys a compose payload; resolves with the public service's container and the app's status. */
export function deployCompose(engine: Engine, payload: DeployPayload, ctx: ComposeCtx): Promise<{ container: string; status: string }> {
  if (payload.source.kind !== "compose") return Promise.reject(new Error(`deployCompose needs a compose source, got ${payload.source.kind}`));
  return composeUp(
    engine,
    { deployment_uuid: payload.deployment_uuid, app: payload.app, compose: payload.source.compose, run: payload.run, secrets: deploySecrets(payload) },
    ctx,
  ).then(({ container, status }) => ({ container, status }));
}

/**
 * Runs a rewritten compose file: checks it is the control plane's rewrite, creates the networks
 * it joins, writes it privately, `pull` when asked, `up -d --remove-orphans`, then waits for its
 * services. Resolves with the public container, the project's status and each container's state.
 */
export function composeUp(engine: Engine, job: ComposeDeploy, ctx: ComposeCtx): Promise<{ container: string; status: string; containers: ContainerDetails[] }> {
  return locks.run(job.app.uuid, async () => {
    const mask = createMasker(job.secrets);
    const progress = (line: string) => ctx.progress(mask(line));
    const { meta, services } = checkRendered(job.compose, job, await serverSensitivePaths(engine, ctx.stateDir, ctx.signal));

    // The file declares the destination and further networks external: they must exist before `up`.
    await prepareResourceNetworks(engine, job.run, { signal: ctx.signal, progress, extraLabels: ctx.extraLabels });
    const dir = composeDir(ctx.stateDir, job.app.uuid);
    const file = await writePrivate(dir, COMPOSE_FILE, withExtraLabels(job.compose, ctx.extraLabels));
    const cmd = await composeCommand(engine, ctx.signal);
    if (job.pull) {
      progress(`compose: ${[...cmd, "-p", meta.project, "pull"].join(" ")}`);
      await runCompose(cmd, ["-p", meta.project, "-f", file, "pull"], { cwd: dir, engine, signal: ctx.signal, progress, mask, stateDir: ctx.stateDir });
    }
    const up = ["up", "-d", "--remove-orphans", ...(job.recreate ? ["--force-recreate"] : [])];
    progress(`compose: ${[...cmd, "-p", meta.project, ...up].join(" ")} (${meta.containers.length} service(s))`);
    await runCompose(cmd, ["-p", meta.project, "-f", file, ...up], { cwd: dir, engine, signal: ctx.signal, progress, mask, stateDir: ctx.stateDir });

    const states = await waitForServices(engine, meta, services, { signal: ctx.signal, progress, mask });
    const status = resourceStatus(states);
    progress(`compose project ${meta.project}: ${status}`);
    return { container: meta.public_container, status, containers: states };
  });
}

/**
 * Removes an application's compose project: containers, its own network, and its named
 * volumes when `removeVolumes`. Works from the stored file when there is one, then sweeps by
 * label what is left (a lost state directory, services dropped from earlier files). The
 * stored file (it holds variable values) is deleted, unless `keepFiles` (DELETE with
 * delete_configurations=false: the configuration stays on the server, nothing runs from it).
 */
export function composeDown(
  engine: Engine,
  opts: { appUuid: string; removeVolumes: boolean; keepFiles?: boolean },
  ctx: ComposeCtx,
): Promise<{ containers: number; volumes: number }> {
  if (!/^[a-z0-9-]{1,64}$/.test(opts.appUuid)) return Promise.reject(new Error(`invalid application uuid ${opts.appUuid}`));
  return locks.run(opts.appUuid, async () => {
    const { signal, progress } = ctx;
    const project = composeProject(opts.appUuid);
    const dir = composeDir(ctx.stateDir, opts.appUuid);
    const file = join(dir, COMPOSE_FILE);
    if (await exists(file)) {
      try {
        const cmd = await composeCommand(engine, signal);
        const args = ["-p", project, "-f", file, "down", "--remove-orphans", "--timeout", "10", ...(opts.removeVolumes ? ["--volumes"] : [])];
        const down = AbortSignal.any([signal, AbortSignal.timeout(DOWN_TIMEOUT_MS)]);
        await runCompose(cmd, args, { cwd: dir, engine, signal: down, progress, mask: (l) => l });
      } catch (err) {
        signal.throwIfAborted();
        // The sweep below removes the same things through the engine.
        progress(`compose down did not finish (${err instanceof Error ? err.message : String(err)}); removing by label`);
      }
    }
    let containers = 0;
    const owned = { [LABEL_MANAGED]: "true", [LABEL_RESOURCE_UUID]: opts.appUuid };
    for (const c of await engine.listContainers({ ...owned, "com.docker.compose.project": project }, signal)) {
      try {
        await engine.removeContainer(c.id, signal);
        containers++;
        progress(`container ${c.name} removed`);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    for (const n of await engine.listNetworks(appNetwork(opts.appUuid), signal)) {
      if (n.labels[LABEL_RESOURCE_UUID] !== opts.appUuid) continue;
      try {
        await engine.removeNetwork(n.id, signal);
        progress(`network ${n.name} removed`);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    let volumes = 0;
    if (opts.removeVolumes) {
      for (const v of await engine.listVolumes(owned, signal)) {
        try {
          await engine.removeVolume(v.name, signal);
          volumes++;
          progress(`volume ${v.name} removed`);
        } catch (err) {
          if (!isNotFound(err)) throw err;
        }
      }
    }
    if (opts.keepFiles) progress(`configuration kept in ${dir}`);
    else await rm(dir, { recursive: true, force: true });
    return { containers, volumes };
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The payload's file must be the control plane's rewrite for this application and deployment:
 * JSON as the rewrite writes it, with the names, labels and networks it sets, and none of the
 * keys it refuses. A job payload is never trusted as safe just because it arrived.
 */
export function checkRendered(text: string, payload: Pick<ComposeDeploy, "app" | "deployment_uuid" | "run">, sensitive: readonly string[] = []): { meta: Meta; services: Record<string, Service> } {
  const bad = (why: string): never => {
    throw new Error(`the compose file is not the platform's rewrite for this deployment (${why})`);
  };
  if (Buffer.byteLength(text) > MAX_FILE) bad("too large");
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return bad("not in the rewritten format");
  }
  if (!isObject(doc)) return bad("not a mapping");
  for (const key of Object.keys(doc)) if (!TOP_LEVEL_KEYS.has(key)) bad(`top-level key ${key}`);
  const parsedMeta = ComposeMeta.safeParse(doc["x-capstan"]);
  if (!parsedMeta.success) return bad("x-capstan");
  const meta = parsedMeta.data;
  const uuid = payload.app.uuid;
  if (meta.project !== composeProject(uuid) || meta.app_uuid !== uuid) bad("project");
  if (meta.deployment_uuid !== payload.deployment_uuid) bad("deployment");
  if (meta.network !== payload.run.network) bad("network");
  const services = doc.services;
  if (!isObject(services) || Object.keys(services).length === 0) return bad("no services");
  const names = Object.keys(services);
  const extraKeys = extraNetworkKeys(doc.networks, payload);
  if (meta.containers.join("\n") !== names.join("\n") || !names.includes(meta.public_container)) bad("service list");
  for (const [name, s] of Object.entries(services)) {
    if (!isObject(s) || !name.startsWith(`${uuid}-`) || s.container_name !== name) bad(`service ${name}`);
    const svc = s as Service;
    const labels = svc.labels;
    if (!isObject(labels) || labels[LABEL_MANAGED] !== "true" || labels[LABEL_RESOURCE_UUID] !== uuid || labels[LABEL_DEPLOYMENT] !== payload.deployment_uuid) {
      bad(`labels of ${name}`);
    }
    for (const key of FORBIDDEN_SERVICE_KEYS) if (key in svc) bad(`${name}: ${key}`);
    if (svc.security_opt !== undefined && JSON.stringify(svc.security_opt) !== JSON.stringify(["no-new-privileges:true"])) bad(`${name}: security_opt`);
    const nets = svc.networks;
    if (!isObject(nets) || !("app" in nets) || !("destination" in nets) || Object.keys(nets).some((k) => k !== "app" && k !== "destination" && !extraKeys.has(k))) {
      bad(`networks of ${name}`);
    }
    for (const v of Array.isArray(svc.volumes) ? svc.volumes : []) {
      // Binds are written as "SOURCE:TARGET[:ro]"; the source must pass the shared host-path rule
      // (with this server's own paths), in its normal form.
      if (typeof v === "string") {
        const source = v.split(":")[0]!;
        try {
          assertBindSource(source, sensitive);
        } catch (err) {
          bad(`bind ${source}: ${(err as Error).message}`);
        }
      } else if (!isObject(v) || (v.type !== "volume" && v.type !== "tmpfs")) bad(`mount of ${name}`);
    }
  }
  const networks = doc.networks;
  if (!isObject(networks)) return bad("networks");
  const dest = networks.destination;
  const app = networks.app;
  if (!isObject(dest) || dest.external !== true || dest.name !== payload.run.network) bad("destination network");
  if (!isObject(app) || app.external !== undefined || app.name !== appNetwork(uuid)) bad("application network");
  if (Object.keys(networks).length !== 2 + extraKeys.size) bad("extra networks");
  if (doc.volumes !== undefined) {
    if (!isObject(doc.volumes)) bad("volumes");
    for (const [key, v] of Object.entries(doc.volumes as object)) {
      if (!isObject(v) || v.name !== `${uuid}-${key}` || "external" in v || "driver" in v || "driver_opts" in v) bad(`volume ${key}`);
    }
  }
  return { meta, services: services as Record<string, Service> };
}

/**
 * Keys of the rendered file's further networks: each must be declared external (the agent
 * creates it before `up`, compose only joins it) and be one of the deployment's run.networks
 * (shared networks, the proxy network). Any other network is not the rewrite's.
 */
function extraNetworkKeys(networks: unknown, payload: Pick<ComposeDeploy, "run">): Set<string> {
  const allowed = new Set(payload.run.networks ?? []);
  const keys = new Set<string>();
  if (!isObject(networks)) return keys;
  for (const [key, n] of Object.entries(networks)) {
    if (key === "app" || key === "destination") continue;
    if (!isObject(n) || n.external !== true || typeof n.name !== "string" || !allowed.has(n.name) || Object.keys(n).length !== 2) continue;
    keys.add(key);
  }
  return keys;
}

/** Writes a file only the agent can read (it holds variable values), atomically. */
async function writePrivate(dir: string, name: string, content: string): Promise<string> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  const file = join(dir, name);
  const tmp = `${file}.tmp`;
  await rm(tmp, { force: true });
  await writeFile(tmp, content, { mode: 0o600, flag: "wx" });
  await rename(tmp, file);
  return file;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * What compose runs with: a PATH, a HOME, the engine's socket, a UTF-8 locale, and DOCKER_CONFIG
 * naming the agent's registry logins (registries/config.ts: compose's pulls use the logins the
 * control plane synced, and only those). Nothing else of the agent's environment (its token,
 * its settings) and no COMPOSE_* variable reaches compose; the rendered file has no variables
 * left to resolve anyway. No password is in this environment: compose reads the file.
 */
function composeEnv(engine: Engine, stateDir?: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH ?? "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    DOCKER_HOST: `unix://${engine.socketPath}`,
    LANG: "C.UTF-8",
    LC_ALL: "C.UTF-8",
  };
  if (process.env.HOME) env.HOME = process.env.HOME;
  if (stateDir) env.DOCKER_CONFIG = registryConfigDir(stateDir);
  else if (process.env.DOCKER_CONFIG) env.DOCKER_CONFIG = process.env.DOCKER_CONFIG;
  return env;
}

let detected: string[] | null = null;

/** `docker compose` (the v2 plugin) when present, else `docker-compose` (Debian's 1.29). */
async function composeCommand(engine: Engine, signal: AbortSignal): Promise<string[]> {
  if (detected) return detected;
  const works = (cmd: string, args: string[]) =>
    new Promise<boolean>((resolve) => {
      execFile(cmd, args, { env: composeEnv(engine), timeout: 30_000, signal, maxBuffer: 64 * 1024 }, (err, stdout) => resolve(!err && /\d+\.\d+/.test(String(stdout))));
    });
  if (await works("docker", ["compose", "version", "--short"])) detected = ["docker", "compose"];
  else if (await works("docker-compose", ["version", "--short"])) detected = ["docker-compose"];
  signal.throwIfAborted();
  if (!detected) throw new Error("compose is not installed on this server: neither `docker compose` nor `docker-compose` answers");
  return detected;
}

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;?]*[A-Za-z]/g;

/** Runs compose with argv (no shell); each output line becomes a progress line. */
function runCompose(
  cmd: string[],
  args: string[],
  opts: { cwd: string; engine: Engine; signal: AbortSignal; progress(line: string): void; mask: Masker; stateDir?: string },
): Promise<void> {
  return new Promise((resolve, reject) => {
    opts.signal.throwIfAborted();
    const child = spawn(cmd[0]!, [...cmd.slice(1), ...args], { cwd: opts.cwd, env: composeEnv(opts.engine, opts.stateDir), stdio: ["ignore", "pipe", "pipe"] });
    const tail: string[] = [];
    const onLine = (raw: string) => {
      const line = opts.mask(raw.replace(ANSI, "").replace(/\r/g, "").trimEnd()).slice(0, 2000);
      if (!line) return;
      opts.progress(line);
      tail.push(line);
      if (tail.length > 10) tail.shift();
    };
    for (const stream of [child.stdout, child.stderr]) {
      let buf = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.search(/[\r\n]/)) >= 0) {
          onLine(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
        }
        // A line without end that keeps growing is flushed in pieces.
        if (buf.length > 8192) {
          onLine(buf);
          buf = "";
        }
      });
      stream.on("end", () => onLine(buf));
    }
    let killTimer: NodeJS.Timeout | null = null;
    const onAbort = () => {
      child.kill("SIGTERM");
      // compose (Python) may ignore SIGTERM while the engine answers; do not wait forever.
      killTimer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      killTimer.unref();
    };
    opts.signal.addEventListener("abort", onAbort, { once: true });
    child.on("error", (err) => {
      opts.signal.removeEventListener("abort", onAbort);
      reject(new Error(`could not run ${cmd.join(" ")}: ${err.message}`));
    });
    child.on("close", (code, sig) => {
      opts.signal.removeEventListener("abort", onAbort);
      if (killTimer) clearTimeout(killTimer);
      if (opts.signal.aborted) return reject(opts.signal.reason instanceof Error ? opts.signal.reason : new Error("compose run aborted"));
      if (code === 0) return resolve();
      const last = tail.slice(-5).join(" | ");
      reject(new Error(`${cmd.join(" ")} ${args.find((a) => a === "up" || a === "down" || a === "pull")} failed (${sig ?? `exit ${code}`})${last ? `: ${last}` : ""}`));
    });
  });
}

/** Go duration ("1m30s", "500ms") to ms; compose's default when absent. */
function durationMs(v: unknown, fallback: number): number {
  if (typeof v !== "string") return fallback;
  let total = 0;
  for (const m of v.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)/g)) {
    total += Number(m[1]) * { ns: 1e-6, us: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ns" | "us" | "ms" | "s" | "m" | "h"];
  }
  return total;
}

/** How long the engine may take to call each service healthy or unhealthy, plus slack. */
export function waitBoundMs(services: Record<string, Service>): number {
  let longest = 0;
  for (const s of Object.values(services)) {
    const hc = s.healthcheck;
    if (!isObject(hc) || hc.disable === true) continue;
    const interval = durationMs(hc.interval, 30_000);
    const timeout = durationMs(hc.timeout, 30_000);
    const start = durationMs(hc.start_period, 0);
    const retries = typeof hc.retries === "number" ? hc.retries : 3;
    longest = Math.max(longest, start + (interval + timeout) * (retries + 1));
  }
  return Math.min(MAX_WAIT_MS, Math.max(MIN_WAIT_MS, longest + 30_000));
}

/** A one-shot service (restart no / on-failure) that exited 0 has done its job. */
const oneShot = (s: Service | undefined) => typeof s?.restart === "string" && (s.restart === "no" || s.restart.startsWith("on-failure"));

/**
 * Waits until every service runs (healthy when it has a health check) or has completed as a
 * one-shot job; fails on an unhealthy, exited or crash-looping service with its last log lines.
 */
async function waitForServices(
  engine: Engine,
  meta: Meta,
  services: Record<string, Service>,
  ctx: { signal: AbortSignal; progress(line: string): void; mask: Masker },
): Promise<ContainerDetails[]> {
  const deadline = Date.now() + waitBoundMs(services);
  const firstRestarts = new Map<string, number>();
  const lastRestarts = new Map<string, number>();
  let readySince: number | null = null;
  let lastWaiting = "";
  for (;;) {
    ctx.signal.throwIfAborted();
    const details = await Promise.all(meta.containers.map((name) => engine.inspectContainer(name, ctx.signal)));
    const waiting: string[] = [];
    for (const [i, name] of meta.containers.entries()) {
      const d = details[i];
      if (!d) {
        waiting.push(`${name} (not created)`);
        continue;
      }
      const restarts = d.restartCount ?? 0;
      if (!firstRestarts.has(name)) firstRestarts.set(name, restarts);
      // The engine shows a crash-looping container as running between its quick restarts:
      // a restart since the last look is never "ready".
      const restartedSinceLastLook = lastRestarts.has(name) && lastRestarts.get(name) !== restarts;
      lastRestarts.set(name, restarts);
      if (d.health === "unhealthy") {
        await failWithLogs(engine, d, `service ${name} is unhealthy${d.healthOutput ? `: ${d.healthOutput.slice(0, 500)}` : ""}`, ctx);
      }
      if (d.state === "exited" || d.state === "dead") {
        if (d.exitCode === 0 && oneShot(services[name])) continue;
        await failWithLogs(engine, d, `service ${name} exited with code ${d.exitCode ?? "unknown"}`, ctx);
      }
      if (restarts - firstRestarts.get(name)! >= MAX_RESTARTS) {
        await failWithLogs(engine, d, `service ${name} keeps restarting (exit code ${d.exitCode ?? "unknown"})`, ctx);
      }
      if (!d.running || d.paused || d.state === "restarting") waiting.push(`${name} (${d.state})`);
      else if (restartedSinceLastLook) waiting.push(`${name} (restarted)`);
      else if (d.health === "starting") waiting.push(`${name} (health: starting)`);
    }
    if (waiting.length === 0) {
      readySince ??= Date.now();
      if (Date.now() - readySince >= SETTLE_MS) return details.filter((d): d is ContainerDetails => d !== null);
    } else {
      readySince = null;
      const summary = waiting.join(", ");
      if (summary !== lastWaiting) ctx.progress(`waiting for ${summary}`);
      lastWaiting = summary;
    }
    if (Date.now() > deadline) throw new Error(`services not ready in time: ${waiting.join(", ") || "unstable"}`);
    await sleep(POLL_MS, ctx.signal);
  }
}

async function failWithLogs(engine: Engine, d: ContainerDetails, reason: string, ctx: { signal: AbortSignal; progress(line: string): void; mask: Masker }): Promise<never> {
  try {
    const { lines } = await engine.containerLogs(d.id, { since: 0, tail: 20, timestamps: false, maxBytes: 16 * 1024 }, ctx.signal);
    if (lines.length) ctx.progress(`last log lines of ${d.name}:`);
    for (const line of lines) ctx.progress(`  ${ctx.mask(line).slice(0, 2000)}`);
  } catch {
    // The logs only explain the failure; the failure itself is what is reported.
  }
  throw new Error(ctx.mask(reason));
}
