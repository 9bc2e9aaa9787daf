/**
 * Resource backup bench (issue 19): the agent's resource.backup (the engine's archive of an
 * application's volume -> tar re-packed with a sha256 manifest -> gzip -> file [-> S3]) against a
 * plain `tar | gzip -6` of the same volume, in the same run, at several sizes, with the agent
 * process's peak RSS (it must not grow with the size).
 *
 *   npm run bench:resource-backup      (node --import tsx bench/resource-backup/run.ts; build first)
 *
 * Settings (env, bounded): BENCH_RB_SIZES_MB ("100,1024": volume sizes, each 10..8192),
 * BENCH_RB_LARGE=1 adds the 3 GiB (3072 MiB) case. Needs the local engine and capstan-test/busybox
 * (test/kit/images.sh busybox). Everything it creates carries capstan.bench=1 and
 * capstan.bench.run=<run> and is removed by that label at the end, as are its temp files.
 */
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { createWriteStream, existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { finished } from "node:stream/promises";
import { fileURLToPath } from "node:url";
import type { ResourceBackupPayload, S3Target } from "@capstan/shared";
import { startS3Server } from "../../test/support/s3-server.js";

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");
const RUN = randomBytes(4).toString("hex");
const LABELS = ["--label", "capstan.bench=1", "--label", `capstan.bench.run=${RUN}`];

const sizes = (process.env.BENCH_RB_SIZES_MB ?? "100,1024").split(",").map((s) => Number(s.trim()));
if (process.env.BENCH_RB_LARGE === "1") sizes.push(3072);
if (sizes.length < 1 || sizes.length > 5 || sizes.some((n) => !Number.isInteger(n) || n < 10 || n > 8192)) {
  throw new Error("BENCH_RB_SIZES_MB must be 1-4 comma-separated integers in 10..8192");
}
if (!existsSync(join(repo, "shared/dist/s3/index.js"))) throw new Error("shared is not built: run `npx turbo build` first");

/** A child process (argv, no shell); resolves with stdout, rejects with stderr. */
function run(cmd: string, args: string[], opts: { input?: string } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: [opts.input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (err = (err + d).slice(-4000)));
    if (opts.input !== undefined) {
      // A child that exits without reading its input must not crash the bench (EPIPE).
      child.stdin!.on("error", () => {});
      child.stdin!.end(opts.input);
    }
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`${cmd} ${args.slice(0, 2).join(" ")} exited ${code}: ${err}`))));
  });
}

/**
 * Fills the volume mounted at /data of `container` with about `mb` MiB of mixed data, in files of
 * 1 MiB: one in three random (incompressible), two in three text (numbers, compressible), and
 * 200 small files per 100 MiB in a nested folder. Bounded: at most 8192 large files.
 */
async function fill(container: string, mb: number): Promise<void> {
  const script = [
    "set -e; mkdir -p /data/bin /data/text /data/small/a/b",
    `i=0; while [ $i -lt ${mb} ]; do`,
    "  if [ $((i % 3)) -eq 0 ]; then head -c 1048576 /dev/urandom > /data/bin/f$i.bin;",
    "  else seq $((i * 200000)) $((i * 200000 + 200000)) | head -c 1048576 > /data/text/f$i.txt; fi",
    "  i=$((i + 1)); done",
    `j=0; while [ $j -lt ${Math.max(10, Math.round(mb * 2))} ]; do echo "small file $j of the bench, line one" > /data/small/a/b/s$j.txt; j=$((j + 1)); done`,
  ].join("\n");
  await run("docker", ["exec", container, "sh", "-c", script]);
}

/** Baseline: `tar -c | gzip -6 > file` of the volume's directory on the host. */
async function baseline(dir: string, file: string): Promise<{ ms: number; bytes: number }> {
  const started = performance.now();
  const out = createWriteStream(file, { mode: 0o600 });
  const gzip = spawn("gzip", ["-6"], { stdio: ["pipe", "pipe", "inherit"] });
  gzip.stdout.pipe(out);
  const tar = spawn("tar", ["-C", dir, "-cf", "-", "."], { stdio: ["ignore", "pipe", "inherit"] });
  tar.stdout.pipe(gzip.stdin);
  const exit = (p: ReturnType<typeof spawn>) => new Promise<number | null>((r) => p.on("close", r));
  const [tarCode, gzipCode] = await Promise.all([exit(tar), exit(gzip), finished(out)]);
  if (tarCode !== 0 || gzipCode !== 0) throw new Error(`baseline failed: tar ${tarCode}, gzip ${gzipCode}`);
  return { ms: performance.now() - started, bytes: (await stat(file)).size };
}

/** The engine's archive alone (what the agent reads): `docker cp <container>:/data -` to nowhere. */
async function engineArchive(container: string): Promise<number> {
  const started = performance.now();
  const cp = spawn("docker", ["cp", `${container}:/data`, "-"], { stdio: ["ignore", "ignore", "inherit"] });
  const code = await new Promise<number | null>((r) => cp.on("close", r));
  if (code !== 0) throw new Error(`docker cp exited ${code}`);
  return performance.now() - started;
}

interface AgentRun { ms: number; rssBeforeBytes: number; maxRssBytes: number; size: number }

/** The agent's resource.backup in a process of its own. */
async function agentBackup(stateDir: string, payload: ResourceBackupPayload): Promise<AgentRun> {
  const input = JSON.stringify({ stateDir, type: "resource.backup", payload, labels: { "capstan.bench": "1" } });
  const out = await run(process.execPath, ["--import", "tsx", join(repo, "test/support/agent-job.ts")], { input });
  const r = JSON.parse(out) as { ms: number; rssBeforeBytes: number; maxRssBytes: number; result: { size: number } };
  return { ms: r.ms, rssBeforeBytes: r.rssBeforeBytes, maxRssBytes: r.maxRssBytes, size: r.result.size };
}

const mib = (b: number) => (b / 1024 / 1024).toFixed(1);
const secs = (ms: number) => (ms / 1000).toFixed(1);

async function cleanup(): Promise<void> {
  const ids = (await run("docker", ["ps", "-aq", "--filter", `label=capstan.bench.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  if (ids.length) await run("docker", ["rm", "-f", "-v", ...ids]).catch(() => {});
  const vols = (await run("docker", ["volume", "ls", "-q", "--filter", `label=capstan.bench.run=${RUN}`]).catch(() => "")).split("\n").filter(Boolean);
  if (vols.length) await run("docker", ["volume", "rm", "-f", ...vols]).catch(() => {});
}

async function main(): Promise<void> {
  const work = await mkdtemp(join(tmpdir(), "capstan-bench-rb-"));
  const stateDir = join(work, "agent-state");
  const s3 = await startS3Server({ buckets: ["capstan-bench"] });
  const target: S3Target = { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true };
  const rows: string[][] = [];
  try {
    for (const mb of sizes) {
      const uuid = randomUUID();
      const volume = `capstan-bench-rb-${RUN}-${mb}`;
      await run("docker", ["volume", "create", ...LABELS, volume]);
      await run("docker", [
        "run", "-d", "--name", `capstan-bench-rb-${RUN}-${mb}`, ...LABELS, "--label", "capstan.managed=true", "--label", `capstan.resource.uuid=${uuid}`,
        "-v", `${volume}:/data`, "capstan-test/busybox", "sleep", "86400",
      ]);
      process.stderr.write(`filling a ${mb} MiB volume...\n`);
      await fill(`capstan-bench-rb-${RUN}-${mb}`, mb);
      const mountpoint = await run("docker", ["volume", "inspect", "-f", "{{.Mountpoint}}", volume]);
      const volBytes = Number((await run("du", ["-sb", mountpoint])).split(/\s/)[0]);

      const base = await baseline(mountpoint, join(work, `baseline-${mb}.tar.gz`));
      const engineMs = await engineArchive(`capstan-bench-rb-${RUN}-${mb}`);
      await rm(join(work, `baseline-${mb}.tar.gz`), { force: true });
      const payload = (s3on: boolean): ResourceBackupPayload => {
        const exec = randomUUID();
        return {
          resource: { kind: "application", uuid, name: `bench ${mb}` },
          volumes: [{ name: "data", mount_path: "/data" }],
          schedule_uuid: "bench",
          execution_uuid: exec,
          filename: `volume-20260301T030000Z-${exec.slice(0, 8)}.tar.gz`,
          keep_locally: s3on ? 0 : 1,
          s3: s3on ? { target, prefix: `bench/${uuid}/`, keep_remote: null } : null,
          passphrase: null,
          stop_during_backup: false,
          backup_type: "volume",
          configuration: null,
        };
      };
      for (const [label, s3on] of [["local", false], ["s3", true]] as const) {
        const agent = await agentBackup(stateDir, payload(s3on));
        rows.push([`${mb}`, mib(volBytes), label, secs(base.ms), secs(engineMs), secs(agent.ms), (agent.ms / base.ms).toFixed(2), mib(base.bytes), mib(agent.size), mib(agent.rssBeforeBytes), mib(agent.maxRssBytes)]);
        await rm(join(stateDir, "backups"), { recursive: true, force: true });
      }
      // Free the disk before the next size.
      await cleanup();
    }
  } finally {
    await cleanup();
    await s3.stop();
    await rm(work, { recursive: true, force: true });
  }
  const head = ["size MiB", "volume MiB", "agent to", "baseline s", "engine archive s", "agent s", "ratio b/a", "baseline gz MiB", "agent file MiB", "agent RSS at start MiB", "agent peak RSS MiB"];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: string[]) => r.map((v, i) => v.padStart(widths[i]!)).join("  ");
  console.log("\nbaseline (a): tar -c <volume dir> | gzip -6 > file");
  console.log("engine archive: docker cp <container>:/data - > /dev/null (the engine's tar stream the agent reads, alone)");
  console.log("agent    (b): resource.backup in its own process: engine archive -> tar re-pack + sha256 manifest -> zlib gzip -> file [-> S3 (local s3rver)]");
  console.log(line(head));
  for (const r of rows) console.log(line(r));
}

await main();
