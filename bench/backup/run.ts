/**
 * Backup bench: the agent's db.backup (pg_dump through docker exec -> gzip -> file -> upload to
 * a local S3-compatible server, optionally OpenPGP-encrypted) against the plain baseline
 * `docker exec pg_dump | gzip > file`, on the same PostgreSQL database in the same run, at a
 * small and a large size, with the agent process's peak RSS (it must not grow with the size).
 *
 *   npm run bench:backup          (node --import tsx bench/backup/run.ts; build first: npx turbo build)
 *
 * Settings (env, bounded): BENCH_BACKUP_SIZES_MB ("100,1000": database sizes, each 10..20000),
 * BENCH_BACKUP_ENCRYPT (1: also time an encrypted backup; 0 to skip).
 * Needs the local engine and capstan-test/postgres (test/kit/images.sh postgres). Everything it
 * creates carries capstan.bench=1 and is removed at the end.
 */
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createWriteStream, existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { finished } from "node:stream/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { DbBackupPayload, DbCredentials, S3Target } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import { createHandlers } from "../../agent/src/handlers/index.js";
import { startS3Server } from "../../test/support/s3-server.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const LABELS = { "capstan.bench": "1" };
const NET = `capstan-bench-backup-${randomBytes(3).toString("hex")}`;

const sizes = (process.env.BENCH_BACKUP_SIZES_MB ?? "100,1000").split(",").map((s) => Number(s.trim()));
if (sizes.length < 1 || sizes.length > 4 || sizes.some((n) => !Number.isInteger(n) || n < 10 || n > 20_000)) {
  throw new Error("BENCH_BACKUP_SIZES_MB must be 1-4 comma-separated integers in 10..20000");
}
const ENCRYPT = (process.env.BENCH_BACKUP_ENCRYPT ?? "1") !== "0";

if (!existsSync(join(repo, "shared/dist/s3/index.js"))) throw new Error("shared is not built: run `npx turbo build` first");

/** A child process (argv, no shell); resolves with stdout, rejects with stderr. */
function run(cmd: string, args: string[], opts: { input?: string; env?: Record<string, string>; stdoutTo?: NodeJS.WritableStream } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: { ...process.env, ...opts.env }, stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    if (opts.stdoutTo) child.stdout.pipe(opts.stdoutTo);
    else child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err = (err + d).slice(-4000)));
    child.stdin.end(opts.input ?? "");
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`${cmd} ${args.slice(0, 2).join(" ")} exited ${code}: ${err}`))));
  });
}

/** Baseline: docker exec pg_dump | gzip > file (two processes, a pipe, nothing else). */
async function baseline(container: string, c: DbCredentials, file: string): Promise<{ ms: number; bytes: number }> {
  const started = performance.now();
  const out = createWriteStream(file, { mode: 0o600 });
  const gzip = spawn("gzip", ["-6"], { stdio: ["pipe", "pipe", "inherit"] });
  gzip.stdout.pipe(out);
  const dump = spawn("docker", ["exec", "-e", "PGPASSWORD", "-e", "PGUSER", "-e", "PGDATABASE", "-e", "PGHOST", container, "pg_dump", "--clean", "--if-exists", "--no-password"], {
    env: { ...process.env, PGPASSWORD: c.password, PGUSER: c.user!, PGDATABASE: c.database!, PGHOST: "127.0.0.1" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  dump.stdout.pipe(gzip.stdin);
  const exit = (p: ReturnType<typeof spawn>) => new Promise<number | null>((r) => p.on("close", r));
  const [dumpCode, gzipCode] = await Promise.all([exit(dump), exit(gzip), finished(out)]);
  if (dumpCode !== 0 || gzipCode !== 0) throw new Error(`baseline failed: pg_dump ${dumpCode}, gzip ${gzipCode}`);
  return { ms: performance.now() - started, bytes: (await stat(file)).size };
}

/** The agent's db.backup in a process of its own. */
async function agentBackup(stateDir: string, payload: DbBackupPayload): Promise<{ ms: number; rssBeforeBytes: number; maxRssBytes: number; size: number }> {
  const out = await run(process.execPath, ["--import", "tsx", join(repo, "bench/backup/agent-job.ts")], { input: JSON.stringify({ stateDir, payload }) });
  const r = JSON.parse(out) as { ms: number; rssBeforeBytes: number; maxRssBytes: number; result: { size: number } };
  return { ms: r.ms, rssBeforeBytes: r.rssBeforeBytes, maxRssBytes: r.maxRssBytes, size: r.result.size };
}

async function psql(container: string, c: DbCredentials, sql: string): Promise<string> {
  return run("docker", ["exec", "-e", "PGPASSWORD", container, "psql", "-h", "127.0.0.1", "-U", c.user!, "-d", c.database!, "-qAt", "-v", "ON_ERROR_STOP=1", "-c", sql], {
    env: { PGPASSWORD: c.password },
  });
}

/** Fills the database to about `mb` MiB (table + index), in bounded batches. */
async function fill(container: string, c: DbCredentials, mb: number): Promise<number> {
  await psql(container, c, "CREATE TABLE IF NOT EXISTS bench (id bigint PRIMARY KEY, a text, b text, n double precision)");
  const target = mb * 1024 * 1024;
  let next = 1;
  const batch = 500_000;
  for (let i = 0; i < 1000; i++) {
    const size = Number(await psql(container, c, "SELECT pg_database_size(current_database())"));
    if (size >= target) return size;
    const rows = Math.max(10_000, Math.min(batch, Math.ceil(((target - size) / 150) * 1.05)));
    await psql(container, c, `INSERT INTO bench SELECT g, md5(g::text) || md5((g * 7)::text), 'row ' || g || ' of the bench table', random() FROM generate_series(${next}, ${next + rows - 1}) g`);
    next += rows;
  }
  throw new Error("the database did not reach its size in 1000 batches");
}

const mib = (b: number) => (b / 1024 / 1024).toFixed(1);
const secs = (ms: number) => (ms / 1000).toFixed(1);

async function main(): Promise<void> {
  const engine = new DockerodeEngine();
  const handlers = createHandlers(engine, { extraLabels: LABELS, db: { pollMs: 200 } });
  const work = await mkdtemp(join(tmpdir(), "capstan-bench-backup-"));
  const stateDir = join(work, "agent-state");
  const s3 = await startS3Server({ buckets: ["capstan-bench"] });
  const target: S3Target = { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true };
  await engine.createNetwork({ name: NET, driver: "bridge", labels: { ...LABELS, "capstan.managed": "true" } });
  const uuids: string[] = [];
  const rows: string[][] = [];
  try {
    for (const mb of sizes) {
      const uuid = randomUUID();
      uuids.push(uuid);
      const c: DbCredentials = { user: "bench", password: randomBytes(18).toString("base64url"), database: "bench", root_password: null };
      await handlers["db.deploy"](
        { db: { uuid, name: `bench ${mb}` }, engine: "postgresql", image: "capstan-test/postgres", credentials: c, env: {}, network: NET, networks: [], ensure_networks: [], public_port: null, memory: null, cpus: null },
        { signal: AbortSignal.timeout(300_000), progress: () => {}, job: { id: randomUUID(), attempt: 1 } },
      );
      process.stderr.write(`filling a ${mb} MiB database...\n`);
      const dbBytes = await fill(uuid, c, mb);
      await psql(uuid, c, "VACUUM ANALYZE bench");

      const base = await baseline(uuid, c, join(work, `baseline-${mb}.sql.gz`));
      const payload = (passphrase: string | null): DbBackupPayload => {
        const exec = randomUUID();
        const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\.\d{3}Z$/, "Z");
        return {
          db: { uuid, name: `bench ${mb}` },
          engine: "postgresql",
          credentials: c,
          schedule_uuid: "bench",
          execution_uuid: exec,
          filename: `postgresql-${stamp}-${exec.slice(0, 8)}.sql.gz${passphrase ? ".gpg" : ""}`,
          keep_locally: 0,
          s3: { target, prefix: `bench/${uuid}/`, keep_remote: null },
          passphrase,
        };
      };
      const agent = await agentBackup(stateDir, payload(null));
      rows.push([`${mb}`, mib(dbBytes), "plain", secs(base.ms), secs(agent.ms), (agent.ms / base.ms).toFixed(2), mib(base.bytes), mib(agent.size), mib(agent.rssBeforeBytes), mib(agent.maxRssBytes)]);
      if (ENCRYPT) {
        const enc = await agentBackup(stateDir, payload(`bench ${randomBytes(8).toString("hex")}`));
        rows.push([`${mb}`, mib(dbBytes), "encrypted", secs(base.ms), secs(enc.ms), (enc.ms / base.ms).toFixed(2), mib(base.bytes), mib(enc.size), mib(enc.rssBeforeBytes), mib(enc.maxRssBytes)]);
      }
      // The database is not needed any more: free its disk before the next size.
      await handlers["db.action"]({ db: { uuid, name: "bench" }, action: "remove", delete_volumes: true, docker_cleanup: false }, { signal: AbortSignal.timeout(120_000), progress: () => {}, job: { id: randomUUID(), attempt: 1 } });
      await rm(join(work, `baseline-${mb}.sql.gz`), { force: true });
    }
  } finally {
    for (const uuid of uuids) {
      await run("docker", ["rm", "-f", "-v", uuid]).catch(() => {});
      await run("docker", ["volume", "rm", "-f", `capstan-db-${uuid}`]).catch(() => {});
    }
    await run("docker", ["network", "rm", NET]).catch(() => {});
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
  const head = ["size MiB", "db MiB", "agent run", "baseline s", "agent s", "ratio b/a", "baseline gz MiB", "agent file MiB", "agent RSS at start MiB", "agent peak RSS MiB"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((v, i) => v.padStart(widths[i]!)).join("  ");
  console.log("\nbaseline (a): docker exec pg_dump | gzip -6 > file");
  console.log("agent    (b): db.backup handler in its own process: docker exec pg_dump -> zlib gzip [-> OpenPGP AEAD] -> file -> S3 (local s3rver)");
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}

await main();
