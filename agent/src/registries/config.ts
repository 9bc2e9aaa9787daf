import { mkdir, readFile, chmod } from "node:fs/promises";
import { join } from "node:path";
import { writeFileAtomic } from "../state/atomic.js";

/**
 * The agent's registry logins (issue 18, docs/registries.md): a docker config.json in the
 * agent's state directory (`<state>/docker/config.json`, directory 0700, file 0600), the file
 * `docker login` writes, so the agent's own pulls and the compose CLI (DOCKER_CONFIG) read the
 * same logins, and they survive an agent restart or a reboot (the state directory is a volume).
 * Written only after the engine accepted the login (POST /auth).
 */
export function registryConfigDir(stateDir: string): string {
  return join(stateDir, "docker");
}

/** The hub's logins live under this key in a docker config.json (what `docker login` writes for docker.io). */
const HUB_KEY = "https://index.docker.io/v1/";
export const configKey = (registry: string) => (registry === "docker.io" ? HUB_KEY : registry);

interface DockerConfig {
  auths?: Record<string, { auth?: string }>;
  [k: string]: unknown;
}

async function load(file: string): Promise<DockerConfig> {
  try {
    const parsed = JSON.parse(await readFile(file, "utf8")) as unknown;
    return parsed && typeof parsed === "object" ? (parsed as DockerConfig) : {};
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw err;
  }
}

async function save(dir: string, file: string, config: DockerConfig): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await chmod(dir, 0o700);
  await writeFileAtomic(file, JSON.stringify(config, null, 2) + "\n", 0o600);
}

/** Stores (or replaces) the login of `registry`. */
export async function storeLogin(stateDir: string, registry: string, username: string, password: string): Promise<void> {
  const dir = registryConfigDir(stateDir);
  const file = join(dir, "config.json");
  const config = await load(file);
  config.auths = { ...config.auths, [configKey(registry)]: { auth: Buffer.from(`${username}:${password}`, "utf8").toString("base64") } };
  await save(dir, file, config);
}

/** Forgets the login of `registry`; false when there was none. */
export async function removeLogin(stateDir: string, registry: string): Promise<boolean> {
  const dir = registryConfigDir(stateDir);
  const file = join(dir, "config.json");
  const config = await load(file);
  const key = configKey(registry);
  if (!config.auths || !(key in config.auths)) return false;
  const { [key]: _gone, ...rest } = config.auths;
  config.auths = rest;
  await save(dir, file, config);
  return true;
}

/** The stored login of `registry`, or null (pulls use it: the engine takes it in its auth header). */
export async function storedLogin(stateDir: string, registry: string): Promise<{ username: string; password: string } | null> {
  const auth = (await load(join(registryConfigDir(stateDir), "config.json"))).auths?.[configKey(registry)]?.auth;
  if (!auth) return null;
  const text = Buffer.from(auth, "base64").toString("utf8");
  const i = text.indexOf(":");
  return i > 0 ? { username: text.slice(0, i), password: text.slice(i + 1) } : null;
}
