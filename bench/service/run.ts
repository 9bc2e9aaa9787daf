/**
 * Service bench (issue 17): create + start of a built-in template service through Capstan
 * (POST /services, POST /services/{uuid}/start, until the service is running:healthy) against a
 * bare compose up of the same rendered file (the one the agent stored for that start) until every
 * container is healthy, as `docker compose up --wait` does. Same engine, same run, alternating
 * rounds; prints medians and the ratio ours/bare (aim <= 1.2).
 *
 *   npm run bench:service        (node --import tsx bench/service/run.ts)
 *
 * Settings (env, bounded): SERVICE_ROUNDS (5, 1..30). The template is gotify (one container with
 * a 10 s health check interval), its image replaced through PLATFORM_TEMPLATE_IMAGE_OVERRIDES by
 * a local busybox image answering its health check (no pulls). A real control plane (SQLite, in
 * this process), a real agent and proxy on this machine's engine (test/e2e/support/local-server.ts);
 * everything created carries capstan.bench=1 and capstan.test.run=<run id> and is removed at the end.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse } from "yaml";
import { removeLabelled, repo, sh, until } from "../../test/e2e/support/kit.js";
import { startLocalStack, type LocalStack } from "../../test/e2e/support/local-server.js";

const bounded = (name: string, dflt: number, min: number, max: number) => {
  const v = Number(process.env[name] ?? dflt);
  if (!Number.isInteger(v) || v < min || v > max) throw new Error(`${name} must be an integer in ${min}..${max}`);
  return v;
};
const ROUNDS = bounded("SERVICE_ROUNDS", 5, 1, 30);
const RUN = `bench-svc-${randomBytes(3).toString("hex")}`;
// Not capstan.test=1: every e2e run's teardown (test/kit/cleanup.sh) sweeps that label from the
// shared engine, other engineers' runs included; capstan.test.run is what removeLabelled cleans.
const LABELS = `capstan.bench=1,capstan.test.run=${RUN}`;
const IMAGE = `capstan-bench/gotify:${RUN}`;
const OVERALL_LIMIT_MS = 20 * 60_000;
const POLL_MS = 25;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The compose command the agent uses (agent/src/deploy/compose.ts): the v2 plugin when present, else docker-compose. */
async function composeCommand(): Promise<string[]> {
  const works = (cmd: string, args: string[]) => new Promise<boolean>((resolve) => execFile(cmd, args, { timeout: 30_000 }, (err, out) => resolve(!err && /\d+\.\d+/.test(String(out)))));
  if (await works("docker", ["compose", "version", "--short"])) return ["docker", "compose"];
  if (await works("docker-compose", ["version", "--short"])) return ["docker-compose"];
  throw new Error("neither `docker compose` nor `docker-compose` answers");
}

/**
 * The external networks the file names, created when missing (labelled with the run), as the
 * agent ensures them before `up` (another suite's cleanup may have removed a shared one meanwhile).
 */
async function ensureExternalNetworks(file: string): Promise<void> {
  const doc = parse(file) as { networks?: Record<string, { external?: boolean; name?: string } | null> };
  for (const [key, n] of Object.entries(doc.networks ?? {})) {
    if (!n?.external) continue;
    const name = n.name ?? key;
    const exists = await sh("docker", ["network", "inspect", name]).then(() => true, () => false);
    if (!exists) await sh("docker", ["network", "create", "--label", "capstan.bench=1", "--label", `capstan.test.run=${RUN}`, name]);
  }
}

/** State and health of a project's containers, one `docker inspect` per poll. */
async function allHealthy(project: string): Promise<boolean> {
  const ids = (await sh("docker", ["ps", "-aq", "--filter", `label=com.docker.compose.project=${project}`])).split("\n").filter(Boolean);
  if (!ids.length) return false;
  const states = JSON.parse(await sh("docker", ["inspect", ...ids])) as { State: { Running: boolean; Health?: { Status: string } } }[];
  return states.every((s) => s.State.Running && (s.State.Health === undefined || s.State.Health.Status === "healthy"));
}

async function main(): Promise<void> {
  const deadline = setTimeout(() => {
    console.error("bench/service: overall time limit reached");
    process.exit(2);
  }, OVERALL_LIMIT_MS);
  deadline.unref();

  await sh("bash", [join(repo, "test/kit/engine.sh"), "up"]);
  await sh("bash", [join(repo, "test/kit/images.sh"), "busybox"]);
  await sh("bash", [join(repo, "deploy/proxy/build-image.sh")]);
  // gotify's health check runs `curl -fsS -o /dev/null <url>`: a curl that fetches its last argument with busybox wget.
  const ctx = await mkdtemp(join(tmpdir(), "capstan-bench-svc-image-"));
  await writeFile(join(ctx, "curl"), '#!/bin/sh\nfor a; do u="$a"; done\nexec wget -q -O /dev/null "$u"\n', { mode: 0o755 });
  await writeFile(
    join(ctx, "Dockerfile"),
    ["FROM capstan-test/busybox:latest", "COPY curl /usr/local/bin/curl", "RUN mkdir -p /www && echo ok > /www/health", 'CMD ["httpd", "-f", "-p", "80", "-h", "/www"]'].join("\n"),
  );
  await sh("docker", ["build", "-q", "--label", "capstan.bench=1", "--label", `capstan.test.run=${RUN}`, "-t", IMAGE, ctx]);
  await rm(ctx, { recursive: true, force: true });

  const compose = await composeCommand();
  const work = await mkdtemp(join(tmpdir(), "capstan-bench-svc-"));
  let stack: LocalStack | null = null;
  try {
    stack = await startLocalStack({ name: RUN, deployTimeoutS: 180, agentLabels: LABELS, env: { PLATFORM_TEMPLATE_IMAGE_OVERRIDES: JSON.stringify({ "gotify/server": IMAGE }) } });
    const { team, server, project, stateDir } = stack;

    /** POST /services (gotify) + start until running:healthy; answers the time and the file the agent ran. */
    const ours = async (round: number): Promise<{ ms: number; file: string; uuid: string }> => {
      const started = performance.now();
      const created = await team.api.post("/services", {
        project_uuid: project,
        environment_name: "production",
        server_uuid: server.uuid,
        destination_uuid: server.destination,
        type: "gotify",
        name: `bench-${round}`,
      });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
      const uuid = created.body.uuid as string;
      const res = await team.api.post(`/services/${uuid}/start`);
      if (res.status !== 200 && res.status !== 202) {
        const health = await sh("docker", ["inspect", "--format", "{{json .State.Health}}", `${uuid}-gotify`]).catch((e: Error) => e.message);
        throw new Error(`start: ${res.status} ${JSON.stringify(res.body)}; health: ${health}`);
      }
      await until("the service to be running:healthy", async () => (await team.api.get(`/services/${uuid}`)).body.status === "running:healthy", 120_000, POLL_MS);
      const ms = performance.now() - started;
      const file = await readFile(join(stateDir, "compose", uuid, "docker-compose.yml"), "utf8");
      const del = await team.api.delete(`/services/${uuid}?delete_volumes=true`);
      if (del.status !== 200) throw new Error(`delete: ${del.status} ${JSON.stringify(del.body)}`);
      await until("the service's containers to go", async () => (await sh("docker", ["ps", "-aq", "--filter", `label=capstan.resource.uuid=${uuid}`])) === "", 60_000, 100);
      return { ms, file, uuid };
    };

    /** The same rendered file, brought up by compose directly (the same project name), until every container is healthy. */
    const bare = async (file: string, uuid: string): Promise<number> => {
      const path = join(work, `${uuid}.yml`);
      await writeFile(path, file, { mode: 0o600 });
      const projectName = `capstan-${uuid}`;
      const [cmd, ...pre] = compose;
      const started = performance.now();
      await ensureExternalNetworks(file);
      await sh(cmd!, [...pre, "-p", projectName, "-f", path, "up", "-d"]).catch(async (err: Error) => {
        // The shared engine's other suites remove unused test networks: ensure them again, once.
        if (!/declared as external/.test(err.message)) throw err;
        console.log("  (an external network went missing before up: created again, round kept)");
        await ensureExternalNetworks(file);
        await sh(cmd!, [...pre, "-p", projectName, "-f", path, "up", "-d"]);
      });
      await until("the compose project to be healthy", () => allHealthy(projectName), 120_000, POLL_MS);
      const ms = performance.now() - started;
      await sh(cmd!, [...pre, "-p", projectName, "-f", path, "down", "-v"]);
      return ms;
    };

    // Warm-up (the proxy container, the environment's network): not measured.
    const warm = await ours(0);
    await bare(warm.file, warm.uuid);
    const oursMs: number[] = [];
    const bareMs: number[] = [];
    for (let i = 1; i <= ROUNDS; i++) {
      const o = await ours(i);
      oursMs.push(o.ms);
      bareMs.push(await bare(o.file, o.uuid));
      console.log(`round ${i}: ours ${oursMs.at(-1)!.toFixed(0)} ms, ${compose.join(" ")} up ${bareMs.at(-1)!.toFixed(0)} ms`);
    }
    const o = median(oursMs);
    const b = median(bareMs);
    console.log(`\nCreate + start of the gotify template service until healthy (health interval 10 s), ${ROUNDS} rounds, medians:`);
    console.log(`  ours (POST /services + start -> running:healthy): ${o.toFixed(0)} ms (min ${Math.min(...oursMs).toFixed(0)}, max ${Math.max(...oursMs).toFixed(0)})`);
    console.log(`  ${compose.join(" ")} up -d -> healthy:          ${b.toFixed(0)} ms (min ${Math.min(...bareMs).toFixed(0)}, max ${Math.max(...bareMs).toFixed(0)})`);
    console.log(`  ratio ours/bare: ${(o / b).toFixed(2)} (aim <= 1.2)`);
  } finally {
    await stack?.close();
    await rm(work, { recursive: true, force: true });
    await removeLabelled(RUN);
    for (const n of (await sh("docker", ["network", "ls", "-q", "--filter", `label=capstan.test.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean)) {
      await sh("docker", ["network", "rm", n]).catch(() => "");
    }
    await sh("docker", ["rmi", IMAGE]).catch(() => "");
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
