import type { ProxyFacts } from "@capstan/shared";
import type { ExecResult, ProxyContainer } from "./docker.js";

/** What reading the proxy's facts needs of the engine (ProxyDocker; tests pass a fake). */
export interface ProxyFactsSource {
  inspect(name: string, signal?: AbortSignal): Promise<ProxyContainer | null>;
  exec(containerId: string, argv: string[], timeoutMs: number, signal?: AbortSignal): Promise<ExecResult>;
}

const VERSION_TIMEOUT_MS = 5_000;

/**
 * Caddy's version per proxy container id. A container's binary does not change (a new image
 * means a new container), so `caddy version` runs once per container, not on every facts report.
 */
const versions = new Map<string, string>();
/** Routes in the config this process last loaded, per proxy container id (recorded by the sync). */
const loaded = new Map<string, number>();

/** Why the last sync of each proxy container id left something out (bad `proxy.*` labels among them). */
const lastWarnings = new Map<string, string[]>();
const MAX_WARNINGS = 100;

let warningsChanged: (() => void) | null = null;

/** Called when a sync's warnings differ from the last ones (main.ts: send the facts now, not in a minute). */
export function onProxyWarningsChanged(fn: (() => void) | null): void {
  warningsChanged = fn;
}

/** The sync loaded (or found already loaded) a config with this many routes into the container. */
export function recordLoadedRoutes(containerId: string, routes: number, warnings: readonly string[] = []): void {
  loaded.set(containerId, routes);
  const bounded = warnings.slice(0, MAX_WARNINGS).map((w) => (w.length > 500 ? `${w.slice(0, 497)}...` : w));
  const before = lastWarnings.get(containerId);
  lastWarnings.set(containerId, bounded);
  if (before === undefined ? bounded.length > 0 : before.join("\n") !== bounded.join("\n")) warningsChanged?.();
}

/** The official image says its version in CADDY_VERSION; any other image is asked (`caddy version`). */
async function versionOf(source: ProxyFactsSource, c: ProxyContainer, signal?: AbortSignal): Promise<string | null> {
  const fromEnv = c.env.find((e) => e.startsWith("CADDY_VERSION="))?.slice("CADDY_VERSION=".length).trim();
  if (fromEnv) return fromEnv.slice(0, 100);
  const known = versions.get(c.id);
  if (known !== undefined) return known;
  if (!c.running) return null;
  try {
    const r = await source.exec(c.id, ["caddy", "version"], VERSION_TIMEOUT_MS, signal);
    // "v2.6.2 h1:..." (a module hash may follow): the first word is the version.
    const version = r.exitCode === 0 ? (r.stdout.trim().split(/\s+/)[0] ?? "") : "";
    if (!version) return null;
    versions.set(c.id, version.slice(0, 100));
    return version.slice(0, 100);
  } catch {
    signal?.throwIfAborted();
    return null; // asked again on the next report
  }
}

/**
 * The server's reverse proxy as the engine shows it now: its container's state (missing when
 * there is none), image, Caddy's version and how many routes this agent loaded into it last.
 * A container of that name that is not the platform's proxy (no capstan.component=proxy label)
 * is reported as missing: the platform's proxy is not there.
 */
export async function proxyFacts(source: ProxyFactsSource, name: string, isProxy: (c: ProxyContainer) => boolean, signal?: AbortSignal): Promise<ProxyFacts> {
  const c = await source.inspect(name, signal);
  if (!c || !isProxy(c)) return { kind: "caddy", name, image: null, version: null, status: "missing", routes: null };
  return {
    kind: "caddy",
    name,
    image: c.image.slice(0, 1000),
    version: await versionOf(source, c, signal),
    status: c.state.slice(0, 50) || (c.running ? "running" : "exited"),
    routes: loaded.get(c.id) ?? null,
    // Only once a sync has run: before it there is nothing to say (and the field stays optional).
    ...(lastWarnings.has(c.id) ? { warnings: lastWarnings.get(c.id)! } : {}),
  };
}
