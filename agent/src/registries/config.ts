import { createHash } from "node:crypto";
import { mkdir, readFile, chmod } from "node:fs/promises";
import { join } from "node:path";
import type { RegistryCredentials } from "../docker/engine.js";
import { writeFileAtomic } from "../state/atomic.js";

/**
 * The agent's registry logins (issue 18, docs/registries.md): a docker config.json in the
 * agent's state directory (`<state>/docker/config.json`, directory 0700, file 0600), the file
 * `docker login` writes, so the agent's own pulls and the compose CLI (DOCKER_CONFIG) read the
 * same logins, and they survive an agent restart or a reboot (the state directory is a volume).
 * Written only after the engine accepted the login (POST /auth).
 *
 * Beside it, `capstan-registries.json` (0600) keeps what the control plane needs to tell a login
 * still stands: the fingerprint of the credentials each login came from, a hash of the entry
 * written (an entry changed or removed by hand no longer matches: drift), and which registry is
 * the team's default (images naming no registry host are pulled from it).
 */
export function registryConfigDir(stateDir: string): string {
  return join(stateDir, "docker");
}

/** The hub's logins live under this key in a docker config.json (what `docker login` writes for docker.io). */
const HUB_KEY = "https://index.docker.io/v1/";
export const configKey = (registry: string) => (registry === "docker.io" ? HUB_KEY : registry);
const META_FILE = "capstan-registries.json";

interface DockerConfig {
  auths?: Record<string, { auth?: string }>;
  [k: string]: unknown;
}
interface Meta {
  default?: string | null;
  logins?: Record<string, { fingerprint: string; entry: string }>;
}

async function loadJson<T extends object>(file: string): Promise<T> {
  try {
    const parsed = JSON.parse(await readFile(file, "utf8")) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as T) : ({} as T);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {} as T;
    throw err;
  }
}

async function save(dir: string, name: string, content: object): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  await writeFileAtomic(join(dir, name), JSON.stringify(content, null, 2) + "\n", 0o600);
}

let changed: (() => void) | null = null;
/** Called after a login is stored or removed (main.ts: the facts, with the logins' fingerprints, go now, not in a minute). */
export function onRegistryLoginsChanged(fn: (() => void) | null): void {
  changed = fn;
}

const entryHash = (auth: string) => createHash("sha256").update(auth).digest("hex");

/** Stores (or replaces) the login of `registry`, with the fingerprint of its credentials and whether it is the default. */
export async function storeLogin(
  stateDir: string,
  registry: string,
  username: string,
  password: string,
  meta: { fingerprint?: string; isDefault?: boolean } = {},
): Promise<void> {
  const dir = registryConfigDir(stateDir);
  const config = await loadJson<DockerConfig>(join(dir, "config.json"));
  const auth = Buffer.from(`${username}:${password}`, "utf8").toString("base64");
  config.auths = { ...config.auths, [configKey(registry)]: { auth } };
  await save(dir, "config.json", config);
  const m = await loadJson<Meta>(join(dir, META_FILE));
  m.logins = { ...m.logins, [registry]: { fingerprint: meta.fingerprint ?? "", entry: entryHash(auth) } };
  if (meta.isDefault) m.default = registry;
  else if (m.default === registry) m.default = null;
  await save(dir, META_FILE, m);
  changed?.();
}

/** Forgets the login of `registry`; false when there was none. */
export async function removeLogin(stateDir: string, registry: string): Promise<boolean> {
  const dir = registryConfigDir(stateDir);
  const config = await loadJson<DockerConfig>(join(dir, "config.json"));
  const m = await loadJson<Meta>(join(dir, META_FILE));
  const key = configKey(registry);
  const hadMeta = !!m.logins && registry in m.logins;
  if (hadMeta || m.default === registry) {
    const { [registry]: _g, ...logins } = m.logins ?? {};
    await save(dir, META_FILE, { ...m, logins, default: m.default === registry ? null : (m.default ?? null) });
  }
  if (!config.auths || !(key in config.auths)) return false;
  const { [key]: _gone, ...rest } = config.auths;
  config.auths = rest;
  await save(dir, "config.json", config);
  changed?.();
  return true;
}

function decode(auth: string | undefined): { username: string; password: string } | null {
  if (!auth) return null;
  const text = Buffer.from(auth, "base64").toString("utf8");
  const i = text.indexOf(":");
  return i > 0 ? { username: text.slice(0, i), password: text.slice(i + 1) } : null;
}

/** The stored login of `registry`, or null (pulls use it: the engine takes it in its auth header). */
export async function storedLogin(stateDir: string, registry: string): Promise<{ username: string; password: string } | null> {
  return decode((await loadJson<DockerConfig>(join(registryConfigDir(stateDir), "config.json"))).auths?.[configKey(registry)]?.auth);
}

/** The registry part of an image reference (host[:port]), or null when it names none (a hub image by Docker's rule). */
export function hostOf(ref: string): string | null {
  const first = ref.split("/")[0]!;
  return ref.includes("/") && (first.includes(".") || first.includes(":") || first === "localhost") ? first : null;
}

/**
 * What a pull of `ref` uses: the stored login of the image's registry host; an image naming no
 * host comes from the team's default registry when the server has its login (`ref` qualified
 * with its host; the hub's names stay as they are), else from the hub with the hub's login if
 * any. No stored login: an anonymous pull (a registry removed fails with the registry's reason).
 */
export async function pullPlan(stateDir: string, ref: string): Promise<{ pull: string; auth: RegistryCredentials | null }> {
  const host = hostOf(ref);
  let registry = host ?? "docker.io";
  let pull = ref;
  if (!host && !ref.includes("@")) {
    const def = (await loadJson<Meta>(join(registryConfigDir(stateDir), META_FILE))).default;
    if (def && def !== "docker.io" && (await storedLogin(stateDir, def))) {
      registry = def;
      pull = `${def}/${ref}`;
    }
  }
  const login = await storedLogin(stateDir, registry);
  return { pull, auth: login ? { ...login, serveraddress: registry } : null };
}

/** Every stored login by registry (a build's X-Registry-Config: the base images of its FROM lines). */
export async function allLogins(stateDir: string): Promise<Record<string, RegistryCredentials>> {
  const auths = (await loadJson<DockerConfig>(join(registryConfigDir(stateDir), "config.json"))).auths ?? {};
  const out: Record<string, RegistryCredentials> = {};
  for (const [key, v] of Object.entries(auths)) {
    const login = decode(v.auth);
    if (login) out[key] = { ...login, serveraddress: key };
  }
  return out;
}

/**
 * The logins as the control plane last wrote them, for drift: each registry's fingerprint while
 * its config.json entry is still the one written, null when it was changed or removed since.
 */
export async function loginStates(stateDir: string): Promise<{ registry: string; fingerprint: string | null }[]> {
  const dir = registryConfigDir(stateDir);
  const [config, m] = await Promise.all([loadJson<DockerConfig>(join(dir, "config.json")), loadJson<Meta>(join(dir, META_FILE))]);
  return Object.entries(m.logins ?? {}).map(([registry, l]) => {
    const auth = config.auths?.[configKey(registry)]?.auth;
    return { registry, fingerprint: auth && entryHash(auth) === l.entry && l.fingerprint ? l.fingerprint : null };
  });
}
