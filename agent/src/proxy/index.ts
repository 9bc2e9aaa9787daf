import { inspectAll } from "../docker/inspect.js";
import { ProxySettings, LABEL_RESOURCE_UUID, MANAGED, type RouteOwnership } from "@capstan/shared";
import { type Engine, EngineError } from "../docker/engine.js";
import { KeyedMutex } from "../mutex.js";
import { disconnectOne, ensureNetworks, findNetwork, isPlatformNetwork } from "../networks/index.js";
import { ProxyDocker, type ProxyContainer } from "./docker.js";
import { ADMIN_LISTEN, canonicalJson, renderCaddyConfig } from "./render.js";
import { type Candidate, selectRoutes } from "./select.js";
import { proxyFacts, recordLoadedRoutes } from "./facts.js";
export { onProxyWarningsChanged } from "./facts.js";
import type { ProxyFacts } from "@capstan/shared";

export { ADMIN_LISTEN, renderCaddyConfig, canonicalJson } from "./render.js";
export { selectRoutes, type Candidate, type ResolvedRoute } from "./select.js";

/** Default container name (ProxySettings.name defaults to it too); the data volume is `<name>-data`. */
export const PROXY_NAME = "capstan-proxy";
export const LABEL_COMPONENT = "capstan.component";
export const PROXY_COMPONENT = "proxy";

/** Caddy keeps certificates and its ACME account under XDG_DATA_HOME=/data (a named volume). */
const DATA_DIR = "/data";
/** Caddy's copy of the last config it loaded (XDG_CONFIG_HOME=/config); `--resume` boots from it. */
const AUTOSAVE = "/config/caddy/autosave.json";

const EXEC_TIMEOUT_MS = 40_000;
/** A freshly started Caddy opens its admin API within a second or two; give it this long. */
const READY_TIMEOUT_MS = 30_000;

export interface ProxyContext {
  signal: AbortSignal;
  progress(line: string): void;
}

/** Knobs for tests and special setups; production uses the defaults. */
export interface ProxyOptions {
  /** Named volume for Caddy's data (default `<settings.name>-data`). */
  volume?: string;
  /** Extra labels on the proxy container, its volume and the networks it creates (tests add capstan.test=1). */
  labels?: Record<string, string>;
  /** Extra labels a container must carry to be routed (tests route only their own containers). */
  select?: Record<string, string>;
  /** Host address the ports are published on (default: every interface). */
  hostIp?: string;
}

export interface SyncResult {
  routes: number;
  /** false when Caddy already ran exactly this config (nothing was sent). */
  reloaded: boolean;
  warnings: string[];
}

const locks = new KeyedMutex();
const clients = new Map<string, ProxyDocker>();
/** The proxy's container name per engine, as the last sync was told it (the control plane's setting); the default until then. */
const proxyNames = new Map<string, string>();
let proxyNameChanged: ((name: string) => void) | null = null;

/** Called when a sync is told a proxy name other than the one known (main.ts persists it and reports facts now). */
export function onProxyNameChanged(fn: ((name: string) => void) | null): void {
  proxyNameChanged = fn;
}

/** The name a previous run of the agent synced the proxy under (state/store.ts), for the facts before the first sync. */
export function rememberProxyName(engine: Engine, name: string): void {
  proxyNames.set(engine.socketPath, name);
}

function dockerFor(engine: Engine): ProxyDocker {
  let d = clients.get(engine.socketPath);
  if (!d) clients.set(engine.socketPath, (d = new ProxyDocker(engine.socketPath)));
  return d;
}

/**
 * Makes the server's reverse proxy match its containers: ensures the proxy container (image,
 * published ports, data volume, every network in settings), renders Caddy's config from the
 * capstan.* labels of the managed containers, and loads it through Caddy's admin API unless
 * Caddy already runs that exact config. Calls for one proxy run one at a time.
 *
 * The admin API listens on 127.0.0.1 inside the proxy container only (see render.ts), so the
 * agent drives it with `docker exec <proxy> caddy reload`, the config on its stdin (argv, no
 * shell); the proxy never gets the Docker socket.
 */
export function syncProxy(engine: Engine, settings: ProxySettings, ctx: ProxyContext, opts: ProxyOptions = {}): Promise<SyncResult> {
  const parsed = ProxySettings.safeParse(settings);
  if (!parsed.success) return Promise.reject(new EngineError(`invalid proxy settings: ${parsed.error.issues.map((i) => i.message).join("; ")}`));
  const name = parsed.data.name;
  if (proxyNames.get(engine.socketPath) !== name) {
    proxyNames.set(engine.socketPath, name);
    proxyNameChanged?.(name);
  }
  return locks.run(`proxy:${engine.socketPath}:${name}`, () => sync(engine, parsed.data, ctx, { ...opts, name }));
}

/**
 * The server's proxy for the agent's facts reports (GET /servers/{uuid} shows it): state,
 * image, Caddy's version, routes loaded (proxy/facts.ts). Its name is the one the last sync was
 * given (kept across restarts in the state directory); before any sync ever, the one container
 * labelled as the platform's proxy, else the default name.
 */
export async function gatherProxyFacts(engine: Engine, signal?: AbortSignal): Promise<ProxyFacts> {
  let name = proxyNames.get(engine.socketPath);
  if (name === undefined) {
    const found = await engine.listContainers({ ...MANAGED, [LABEL_COMPONENT]: PROXY_COMPONENT }, signal);
    name = found.length === 1 ? found[0]!.name : PROXY_NAME;
  }
  return proxyFacts(dockerFor(engine), name, (c) => c.labels[LABEL_COMPONENT] === PROXY_COMPONENT, signal);
}

/**
 * If this server has a proxy, re-renders its config from the containers as they are now,
 * reusing the proxy's own image, ports and networks. Returns null when there is no proxy yet.
 * Not run at agent start: without the control plane's host-ownership table (a job brings it)
 * it could not tell a taken host from a free one; Caddy serves its autosaved config until the
 * next job syncs.
 */
export async function resyncProxy(engine: Engine, ctx: ProxyContext, opts: ProxyOptions & { name?: string } = {}): Promise<SyncResult | null> {
  const name = opts.name ?? PROXY_NAME;
  const c = await dockerFor(engine).inspect(name, ctx.signal);
  if (!c || c.labels[LABEL_COMPONENT] !== PROXY_COMPONENT) return null;
  const settings = ProxySettings.safeParse({
    name,
    image: c.image,
    networks: c.networks,
    http_port: Number(c.ports["80/tcp"]),
    https_port: Number(c.ports["443/tcp"]),
  });
  if (!settings.success) {
    ctx.progress(`proxy ${name}: cannot read its settings back (${settings.error.issues[0]?.message}); waiting for the next deploy to sync it`);
    return null;
  }
  return syncProxy(engine, settings.data, ctx, opts);
}

/** proxy container id -> the canonical config this process loaded into it last. */
const lastLoaded = new Map<string, string>();

/**
 * engine socket + proxy name -> the newest ownership table a job brought (by generation). A job
 * written before a host moved but run after a newer one uses the newer table; a sync without a
 * table (resyncProxy, an older control plane) uses the last one known.
 */
const newestOwnership = new Map<string, RouteOwnership>();

export function ownershipFor(key: string, given: RouteOwnership | undefined): RouteOwnership | undefined {
  const known = newestOwnership.get(key);
  if (given && (!known || given.generation >= known.generation)) {
    newestOwnership.set(key, given);
    return given;
  }
  return known;
}

async function sync(engine: Engine, settings: ProxySettings, ctx: ProxyContext, opts: ProxyOptions & { name: string }): Promise<SyncResult> {
  const { signal, progress } = ctx;
  const docker = dockerFor(engine);
  const warnings: string[] = [];
  const warn = (line: string) => {
    warnings.push(line);
    progress(`proxy: ${line}`);
  };

  // The dedicated proxy network (proxy isolation) is created here when missing.
  if (settings.ensure_networks.length > 0) await ensureNetworks(engine, settings.ensure_networks, { signal, progress, extraLabels: opts.labels });
  const networks: string[] = [];
  for (const n of settings.networks) {
    if ((await engine.listNetworks(n, signal)).length > 0) networks.push(n);
    else warn(`network ${n} does not exist on this server; not joining it`);
  }
  if (networks.length === 0) throw new EngineError(`none of the proxy's networks exist on this server (${settings.networks.join(", ")})`);

  const proxy = await ensureContainer(docker, settings, networks, ctx, opts);
  const joined = await leaveUnlisted(engine, opts.name, proxy, networks, ctx);

  const candidates = await gatherCandidates(engine, opts.select ?? {}, signal);
  const selection = selectRoutes(candidates, joined, ownershipFor(`${engine.socketPath}:${opts.name}`, settings.ownership));
  for (const w of selection.warnings) warn(w);

  const config = canonicalJson(renderCaddyConfig(selection.routes, { httpsPort: settings.https_port, httpPort: settings.http_port }));
  // What this agent last loaded into this very container (a restarted Caddy resumes it); only
  // without that is Caddy's autosave read back, which costs a `docker exec`.
  const known = lastLoaded.get(proxy.id) ?? (await loadedConfig(docker, proxy.id, signal));
  if (known === config) {
    lastLoaded.set(proxy.id, config);
    recordLoadedRoutes(proxy.id, selection.routes.length, warnings);
    return { routes: selection.routes.length, reloaded: false, warnings };
  }
  lastLoaded.delete(proxy.id);
  await reload(docker, proxy.id, opts.name, config, signal);
  lastLoaded.set(proxy.id, config);
  recordLoadedRoutes(proxy.id, selection.routes.length, warnings);
  progress(`proxy: loaded ${selection.routes.length} route${selection.routes.length === 1 ? "" : "s"}`);
  return { routes: selection.routes.length, reloaded: true, warnings };
}

function wanted(settings: ProxySettings): Record<string, number> {
  return { "80/tcp": settings.http_port, "443/tcp": settings.https_port, "443/udp": settings.https_port };
}

/** The proxy container, running, with the wanted image and ports and on every network. */
async function ensureContainer(
  docker: ProxyDocker,
  settings: ProxySettings,
  networks: string[],
  { signal, progress }: ProxyContext,
  opts: ProxyOptions & { name: string },
): Promise<ProxyContainer> {
  const labels = { ...opts.labels, ...MANAGED, [LABEL_COMPONENT]: PROXY_COMPONENT };
  const publish = wanted(settings);
  let current = await docker.inspect(opts.name, signal);
  if (current && current.labels[LABEL_COMPONENT] !== PROXY_COMPONENT) {
    throw new EngineError(`container ${opts.name} exists but is not Capstan's proxy (no ${LABEL_COMPONENT}=${PROXY_COMPONENT} label); not touching it`);
  }
  if (current) {
    const drift = current.image !== settings.image ? `image ${current.image} -> ${settings.image}` : portDrift(current, publish);
    if (drift) {
      // Certificates live in the volume and routes are re-rendered below, so replacing it loses nothing.
      progress(`proxy: replacing ${opts.name} (${drift})`);
      await docker.remove(current.id, signal);
      current = null;
    }
  }
  if (!current) {
    const volume = opts.volume ?? `${opts.name}-data`;
    await docker.ensureVolume(volume, labels, signal);
    try {
      await docker.create(
        {
          name: opts.name,
          image: settings.image,
          env: { CADDY_ADMIN: ADMIN_LISTEN, XDG_DATA_HOME: DATA_DIR, XDG_CONFIG_HOME: "/config" },
          labels,
          network: networks[0]!,
          publish,
          hostIp: opts.hostIp ?? "",
          volume: { name: volume, target: DATA_DIR },
        },
        signal,
      );
      progress(`proxy: created ${opts.name} from ${settings.image}`);
    } catch (err) {
      // Another sync (another agent process) created it meanwhile: use that one.
      if (!(err instanceof EngineError && err.statusCode === 409)) {
        if (err instanceof EngineError && err.statusCode === 404) throw new EngineError(`proxy image ${settings.image} is not present on this server`, 404);
        throw err;
      }
    }
    current = await docker.inspect(opts.name, signal);
    if (!current) throw new EngineError(`proxy container ${opts.name} vanished right after it was created`);
  }
  for (const n of networks) {
    if (current.networks.includes(n)) continue;
    try {
      await docker.connect(n, current.id, signal);
      progress(`proxy: joined network ${n}`);
    } catch (err) {
      // "already exists in network": joined by a concurrent call; anything else is real.
      if (!(err instanceof EngineError && /already exists/i.test(err.message))) throw err;
    }
  }
  if (!current.running) {
    await docker.start(current.id, signal);
    progress(`proxy: started ${opts.name}`);
  }
  return current;
}

/**
 * The proxy joins exactly the listed networks among the platform's: it leaves a platform
 * network (capstan.managed) no longer listed, e.g. an environment network after proxy
 * isolation's cleanup. Networks the platform did not make stay as they are. Returns the
 * networks it is on afterwards (the ones routes may use).
 */
async function leaveUnlisted(engine: Engine, name: string, proxy: ProxyContainer, listed: string[], { signal, progress }: ProxyContext): Promise<string[]> {
  const on = new Set([...proxy.networks, ...listed]);
  for (const network of proxy.networks) {
    if (listed.includes(network)) continue;
    const net = await findNetwork(engine, network, signal);
    if (!net || !isPlatformNetwork(net)) continue;
    if (await disconnectOne(engine, net, name, signal)) progress(`proxy: left network ${network} (no longer listed)`);
    on.delete(network);
  }
  return [...on];
}

function portDrift(c: ProxyContainer, publish: Record<string, number>): string | null {
  for (const [spec, port] of Object.entries(publish)) {
    if (c.ports[spec] !== String(port)) return `${spec} published on ${c.ports[spec] ?? "nothing"}, want ${port}`;
  }
  return null;
}

async function gatherCandidates(engine: Engine, select: Record<string, string>, signal: AbortSignal): Promise<Candidate[]> {
  const summaries = (await engine.listContainers({ ...select, ...MANAGED }, signal)).filter(
    (s) => s.labels[LABEL_RESOURCE_UUID] && s.state === "running",
  );
  return (await inspectAll(engine, summaries, signal)).map((d) => ({
    name: d.name,
    running: d.running && !d.paused,
    health: d.health,
    labels: d.labels,
    networks: d.networks,
  }));
}

/** Caddy's autosave of its running config, canonicalised; null when unreadable. */
async function loadedConfig(docker: ProxyDocker, id: string, signal: AbortSignal): Promise<string | null> {
  try {
    const r = await docker.exec(id, ["cat", AUTOSAVE], EXEC_TIMEOUT_MS, signal);
    return r.exitCode === 0 ? canonicalJson(JSON.parse(r.stdout)) : null;
  } catch (err) {
    if (signal.aborted) throw err;
    return null;
  }
}

/**
 * `caddy reload` inside the proxy container reads the config from its stdin and POSTs it to the
 * admin API on its loopback (no copy of the file into the container first: that was an archive
 * upload of ~100 ms on every deploy; a restarted Caddy resumes from its own autosave).
 * Retried (bounded) while the admin API is not up yet, e.g. right after the container started.
 */
async function reload(docker: ProxyDocker, id: string, name: string, config: string, signal: AbortSignal): Promise<void> {
  const argv = ["timeout", "30", "caddy", "reload", "--config", "/dev/stdin", "--address", ADMIN_LISTEN];
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    let reason: string;
    try {
      const r = await docker.exec(id, argv, EXEC_TIMEOUT_MS, signal, config);
      if (r.exitCode === 0) return;
      reason = caddyError(r.stderr) ?? `caddy reload exited with ${r.exitCode}`;
      if (!/connection refused|connect: no such file|EOF/i.test(reason)) {
        throw new EngineError(`proxy rejected the configuration: ${reason}`);
      }
    } catch (err) {
      if (signal.aborted || (err instanceof EngineError && err.message.startsWith("proxy rejected"))) throw err;
      // 409: the container is (re)starting; anything else transient ends at the deadline below.
      reason = err instanceof Error ? err.message : String(err);
    }
    if (Date.now() > deadline) {
      throw new EngineError(`proxy ${name} did not accept its configuration within ${READY_TIMEOUT_MS / 1000} s: ${reason} (see: docker logs ${name})`);
    }
    await new Promise((r) => setTimeout(r, 300));
    signal.throwIfAborted();
  }
}

function caddyError(stderr: string): string | null {
  const line = stderr
    .split("\n")
    .map((l) => l.trim())
    .find((l) => l.startsWith("Error:"));
  return line ? line.slice("Error:".length).trim().slice(0, 2000) : null;
}
