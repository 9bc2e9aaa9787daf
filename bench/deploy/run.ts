/**
 * Deploy bench: `POST /applications/{uuid}/deploy` of a containerimage app until the
 * deployment is finished (container healthy, proxy switched), against a plain `docker run`
 * (create + start through the engine's API) of the same image with the same health check
 * until the engine says healthy. Same engine, same
 * run, alternating rounds; prints medians and the ratio ours/bare (aim <= 1.2).
 *
 *   npm run bench:deploy        (node --import tsx bench/deploy/run.ts)
 *
 * Settings (env, bounded): DEPLOY_ROUNDS (7, 1..50), DEPLOY_HEALTH_INTERVAL_S (1, 1..10).
 * A real control plane (SQLite, in this process) and a real agent (child process on this
 * machine's engine); everything created carries capstan.bench=1 and is removed at the end.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { healthcheckFor } from "../../agent/src/deploy/health.js";
import { freePort, startTestInstance, type TestInstance } from "../../test/api/harness.js";
import { KeyFactory } from "../../test/api/support/ssh.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const bounded = (name: string, dflt: number, min: number, max: number) => {
  const v = Number(process.env[name] ?? dflt);
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`${name} must be an integer in ${min}..${max}`);
  return v;
};
const ROUNDS = bounded("DEPLOY_ROUNDS", 7, 1, 50);
const INTERVAL_S = bounded("DEPLOY_HEALTH_INTERVAL_S", 1, 1, 10);
const IMAGE = "capstan-bench/web:latest";
const LABEL = "capstan.bench=1";
const PORT = 8080;
const OVERALL_LIMIT_MS = 20 * 60_000;
const docker = new Docker({ socketPath: "/var/run/docker.sock" });

function run(cmd: string, args: string[], timeoutMs = 300_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.slice(0, 3).join(" ")}: ${stderr || err.message}`));
      else resolve(stdout.trim());
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until<T>(what: string, fn: () => Promise<T | false>, timeoutMs: number, everyMs = 25): Promise<T> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await fn();
    if (v !== false) return v;
    await sleep(everyMs);
  }
  throw new Error(`timed out: ${what}`);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The health probe our agent puts on app containers, taken from the agent itself for the baseline. */
const probe = healthcheckFor({ path: "/", port: PORT, interval_s: INTERVAL_S, timeout_s: 5, retries: 10, start_period_s: 0 }).test[1]!;

/**
 * Baseline: what `docker run -d` does (create + start) with the same image and health check,
 * through the engine's API like the agent (no CLI process per poll), until the engine says
 * healthy; polled as often as the API is polled for our deployment.
 */
async function bare(round: number): Promise<number> {
  const name = `capstan-bench-bare-${process.pid}-${round}`;
  const started = performance.now();
  const c = await docker.createContainer({
    name,
    Image: IMAGE,
    Labels: { "capstan.bench": "1" },
    Healthcheck: { Test: ["CMD-SHELL", probe], Interval: INTERVAL_S * 1e9, Timeout: 5e9, Retries: 10 },
  });
  await c.start();
  await until("bare container healthy", async () => (await c.inspect()).State.Health?.Status === "healthy", 60_000);
  const ms = performance.now() - started;
  await c.remove({ force: true });
  return ms;
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    console.error("bench/deploy: overall time limit reached");
    process.exit(2);
  }, OVERALL_LIMIT_MS);
  deadline.unref();

  await run("bash", [join(repo, "test/kit/engine.sh"), "up"]);
  await run("bash", [join(repo, "test/kit/images.sh"), "busybox"], 600_000);
  await run("bash", [join(repo, "deploy/proxy/build-image.sh")], 900_000);
  const ctx = await mkdtemp(join(tmpdir(), "capstan-bench-image-"));
  await writeFile(join(ctx, "Dockerfile"), ["FROM capstan-test/busybox:latest", "RUN mkdir -p /www && echo ok > /www/index.html", `CMD ["httpd", "-f", "-p", "${PORT}", "-h", "/www"]`].join("\n"));
  await run("docker", ["build", "-q", "--label", LABEL, "-t", IMAGE, ctx]);
  await rm(ctx, { recursive: true, force: true });

  const keys = new KeyFactory();
  let t: TestInstance | null = null;
  let agent: ChildProcess | null = null;
  const stateDir = await mkdtemp(join(tmpdir(), "capstan-bench-agent-"));
  const proxyName = `capstan-proxy-bench-${process.pid}`;
  try {
    const port = await freePort();
    t = await startTestInstance(
      {
        PLATFORM_PUBLIC_URL: `http://127.0.0.1:${port}`,
        // The bench's server is this machine at 127.0.0.1: loopback needs the opt-out.
        PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true",
        PLATFORM_PROXY_IMAGE: "capstan/proxy:latest",
        PLATFORM_PROXY_NAME: proxyName,
        PLATFORM_PROXY_HTTP_PORT: String(await freePort()),
        PLATFORM_PROXY_HTTPS_PORT: String(await freePort()),
      },
      { port },
    );
    const team = await t.newTeam();
    const key = await keys.generate("ed25519");
    const keyUuid = (await team.api.post("/security/keys", { name: "bench", private_key: key.privateKey })).body.uuid;
    const srv = (await team.api.post("/servers", { name: "bench", ip: "127.0.0.1", private_key_uuid: keyUuid })).body;
    agent = spawn(process.execPath, [join(repo, "agent/bin/capstan-agent.js")], {
      env: {
        PATH: process.env.PATH,
        CAPSTAN_URL: `http://127.0.0.1:${port}`,
        CAPSTAN_AGENT_TOKEN: srv.agent_token,
        CAPSTAN_AGENT_STATE_DIR: stateDir,
        CAPSTAN_AGENT_LABELS: LABEL,
        CAPSTAN_AGENT_LOG_LEVEL: "warn",
      },
      stdio: ["ignore", "ignore", "inherit"],
    });
    await until("agent connected", async () => (await team.api.get(`/servers/${srv.uuid}`)).body.status === "reachable", 60_000, 100);
    const detail = (await team.api.get(`/servers/${srv.uuid}`)).body;
    const project = (await team.api.post("/projects", { name: "bench" })).body.uuid;

    /** One first deploy of a fresh app: POST deploy -> deployment finished. */
    const ours = async (round: number) => {
      const created = await team.api.post("/applications/dockerimage", {
        project_uuid: project,
        environment_name: "production",
        server_uuid: srv.uuid,
        destination_uuid: detail.destinations[0].uuid,
        name: `bench-${round}`,
        docker_registry_image_name: IMAGE,
        ports_exposes: String(PORT),
        fqdn: `http://bench-${round}.bench.test`,
        health_check_enabled: true,
        health_check_path: "/",
        health_check_interval: INTERVAL_S,
        health_check_timeout: 5,
        health_check_retries: 10,
        health_check_start_period: 0,
      });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      const app = created.body.uuid as string;
      const started = performance.now();
      const dep = await team.api.post(`/applications/${app}/deploy`);
      if (dep.status !== 200) throw new Error(`deploy: ${dep.status} ${JSON.stringify(dep.body)}`);
      const d = await until(
        "deployment finished",
        async () => {
          const r = (await team.api.get(`/deployments/${dep.body.deployment_uuid}`)).body;
          return ["finished", "failed", "cancelled"].includes(r.status) ? r : false;
        },
        120_000,
      );
      const ms = performance.now() - started;
      if (d.status !== "finished") throw new Error(`deployment ${d.status}: ${d.reason}\n${d.logs}`);
      const del = await team.api.delete(`/applications/${app}`);
      if (del.status !== 200) throw new Error(`delete: ${del.status}`);
      return ms;
    };

    // Warm-up: the proxy container is created on the first deploy; not measured.
    await ours(0);
    await bare(0);
    const oursMs: number[] = [];
    const bareMs: number[] = [];
    for (let i = 1; i <= ROUNDS; i++) {
      oursMs.push(await ours(i));
      bareMs.push(await bare(i));
      console.log(`round ${i}: ours ${oursMs.at(-1)!.toFixed(0)} ms, docker run ${bareMs.at(-1)!.toFixed(0)} ms`);
    }
    const o = median(oursMs);
    const b = median(bareMs);
    console.log(`\nDeploy of a containerimage app until healthy (health interval ${INTERVAL_S} s), ${ROUNDS} rounds, medians:`);
    console.log(`  ours (POST deploy -> finished): ${o.toFixed(0)} ms (min ${Math.min(...oursMs).toFixed(0)}, max ${Math.max(...oursMs).toFixed(0)})`);
    console.log(`  docker run -> healthy:          ${b.toFixed(0)} ms (min ${Math.min(...bareMs).toFixed(0)}, max ${Math.max(...bareMs).toFixed(0)})`);
    console.log(`  ratio ours/bare: ${(o / b).toFixed(2)} (aim <= 1.2)`);
  } finally {
    if (agent && agent.exitCode === null) {
      agent.kill("SIGTERM");
      await new Promise((r) => agent!.once("exit", r));
    }
    await t?.close();
    keys.cleanup();
    await rm(stateDir, { recursive: true, force: true });
    const ids = await run("docker", ["ps", "-aq", "--filter", `label=${LABEL}`]).catch(() => "");
    if (ids) await run("docker", ["rm", "-f", ...ids.split("\n")]).catch(() => "");
    await run("docker", ["rm", "-f", proxyName]).catch(() => "");
    await run("docker", ["volume", "rm", "-f", `${proxyName}-data`]).catch(() => "");
    const vols = await run("docker", ["volume", "ls", "-q", "--filter", `label=${LABEL}`]).catch(() => "");
    if (vols) await run("docker", ["volume", "rm", "-f", ...vols.split("\n")]).catch(() => "");
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
