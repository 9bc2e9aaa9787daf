import { execFile } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";

const run = promisify(execFile);
export const repo = join(dirname(fileURLToPath(import.meta.url)), "../../..");
const kit = (script: string) => join(repo, "test/kit", script);

/**
 * The agent image built from this checkout by the e2e global setup. Checkouts sharing one
 * engine set CAPSTAN_AGENT_REPO to build and install their own (capstan/agent:latest otherwise).
 */
export const AGENT_IMAGE = `${process.env.CAPSTAN_AGENT_REPO ?? "capstan/agent"}:latest`;

/** Runs a command (argv, no shell); returns trimmed stdout, throws with stderr on failure. */
export async function sh(cmd: string, args: string[], opts: { input?: string; timeoutMs?: number; env?: Record<string, string> } = {}): Promise<string> {
  try {
    const child = run(cmd, args, { maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 600_000, ...(opts.env ? { env: { ...process.env, ...opts.env } } : {}) });
    if (opts.input !== undefined) {
      child.child.stdin?.end(opts.input);
    }
    const { stdout } = await child;
    return stdout.trim();
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(" ")} failed: ${e.stderr?.trim() || e.message}`);
  }
}

/** Removes the containers, then the volumes, that carry a test run's label (cleanup by label, never by name). */
export async function removeLabelled(run: string): Promise<void> {
  const filter = ["--filter", `label=capstan.test.run=${run}`];
  const ids = (await sh("docker", ["ps", "-aq", ...filter]).catch(() => "")).split("\n").filter(Boolean);
  if (ids.length) await sh("docker", ["rm", "-f", ...ids]).catch(() => {});
  const vols = (await sh("docker", ["volume", "ls", "-q", ...filter]).catch(() => "")).split("\n").filter(Boolean);
  if (vols.length) await sh("docker", ["volume", "rm", "-f", ...vols]).catch(() => {});
}

export interface TestHost {
  name: string;
  ip: string;
}

/** Fresh test hosts (containers with their own Docker Engine) on PREFIX-net; `dockerdArgs`: extra flags of their engines. */
export async function startHosts(n: number, prefix: string, opts: { dockerdArgs?: string } = {}): Promise<TestHost[]> {
  const out = await sh("bash", [kit("hosts.sh"), "up", String(n), prefix], opts.dockerdArgs ? { env: { HOSTS_DOCKERD_ARGS: opts.dockerdArgs } } : {});
  return out
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [name, ip] = line.split(" ");
      return { name: name!, ip: ip! };
    });
}

export async function loadImages(host: string, ...images: string[]): Promise<void> {
  await sh("bash", [kit("hosts.sh"), "load", host, ...images]);
}

export async function stopHosts(prefix: string): Promise<void> {
  await sh("bash", [kit("hosts.sh"), "down", prefix]);
}

/** The address of this machine on a test network: where hosts reach the control plane. */
export async function gatewayOf(network: string): Promise<string> {
  return sh("docker", ["network", "inspect", "-f", "{{(index .IPAM.Config 0).Gateway}}", network]);
}

/** docker exec into a test host. */
export function onHost(host: string, ...argv: string[]): Promise<string> {
  return sh("docker", ["exec", host, ...argv]);
}

export async function until<T>(what: string, fn: () => Promise<T | false | null | undefined>, timeoutMs = 30_000, everyMs = 200): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
}

// ---- private registry on the test hosts' network (issues 18 and 20) ----
export const REGISTRY_IMAGE = "capstan-test/registry:latest";
/** The engine flags that let test hosts pull from a registry at a private address over plain HTTP. */
export const INSECURE_REGISTRIES = "--insecure-registry 172.16.0.0/12 --insecure-registry 192.168.0.0/16 --insecure-registry 10.0.0.0/8";

/** An htpasswd (bcrypt) line for the registry, made by apache2-utils' htpasswd with the password on stdin. */
export const htpasswdLine = (user: string, password: string): Promise<string> =>
  sh("docker", ["run", "--rm", "-i", "--label", "capstan.test=1", REGISTRY_IMAGE, "htpasswd", "-niB", user], { input: password });

/**
 * Starts Debian's docker-registry (`capstan-test/registry`, test/kit/images.sh registry) as
 * container `name` on `${prefix}-net`, with one htpasswd login (the password goes over stdin);
 * labelled for the label cleanup. Answers its address (ip:5000) and the directory holding the
 * htpasswd file (the caller removes it, and the container, when done).
 */
export async function startPrivateRegistry(prefix: string, name: string, user: string, password: string): Promise<{ host: string; authDir: string }> {
  const authDir = await mkdtemp(join(tmpdir(), `capstan-${prefix}-auth-`));
  await writeFile(join(authDir, "htpasswd"), `${await htpasswdLine(user, password)}\n`, { mode: 0o600 });
  await sh("docker", [
    "run", "-d", "--name", name, "--network", `${prefix}-net`,
    "--label", "capstan.test=1", "--label", `capstan.test.prefix=${prefix}`,
    "-e", "REGISTRY_AUTH_HTPASSWD_REALM=capstan-test", "-e", "REGISTRY_AUTH_HTPASSWD_PATH=/auth/htpasswd",
    "-v", `${authDir}:/auth:ro`, REGISTRY_IMAGE,
  ]);
  const ip = await sh("docker", ["inspect", "-f", `{{(index .NetworkSettings.Networks "${prefix}-net").IPAddress}}`, name]);
  return { host: `${ip}:5000`, authDir };
}

/** Runs argv in a test host with `input` on its standard input (a password, a Dockerfile). */
export const onHostWithInput = (host: string, input: string, ...argv: string[]) => sh("docker", ["exec", "-i", host, ...argv], { input });
