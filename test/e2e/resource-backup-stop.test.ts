import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResourceBackupPayload } from "@capstan/shared";
import { JOURNAL_DIR } from "../../agent/src/backup/stop-journal.js";
import { removeLabelled, repo, sh, until } from "./support/kit.js";
import { spawnLocalAgent, stopLocalAgent } from "./support/local-agent.js";

/**
 * stop_during_backup (docs/resource-backups.md) on the real local engine: an application of two
 * containers (busybox, labelled as the agent labels an application's) with a volume. The backup
 * runs in an agent process of its own (test/support/agent-job.ts: the agent's resource.backup
 * handler); it is killed (SIGKILL) while the containers are stopped and the archive is being
 * written, and the real agent (agent/bin/capstan-agent.js, as a host-process agent runs) is
 * started on the same state dir: it starts the containers again from its journal before it
 * even reaches its control plane (none listens here), and clears the journal.
 */
const RUN = randomBytes(4).toString("hex");
const LABELS = { "capstan.test": "1", "capstan.test.run": RUN };
let stateDir: string;
const children: ChildProcess[] = [];

async function app(uuid: string, mb: number): Promise<string[]> {
  const labels = Object.entries(LABELS).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
  await sh("docker", ["volume", "create", ...labels, `${uuid}-data`]);
  const names = [`${uuid}-web`, `${uuid}-worker`];
  for (const name of names) {
    await sh("docker", [
      "run", "-d", "--name", name, ...labels, "--label", "capstan.managed=true", "--label", `capstan.resource.uuid=${uuid}`,
      // A shell that exits on SIGTERM (busybox sleep as PID 1 ignores it: every stop would wait its full timeout).
      "-v", `${uuid}-data:/data`, "capstan-test/busybox", "sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done",
    ]);
  }
  // Random data: incompressible, so the archive takes a while (bounded: mb MiB).
  await sh("docker", ["exec", names[0]!, "sh", "-c", `head -c ${mb * 1024 * 1024} /dev/urandom > /data/random.bin && echo hello > /data/hello.txt`]);
  return names;
}

const state = async (name: string) => sh("docker", ["inspect", "-f", "{{.State.Status}} {{.State.StartedAt}}", name]);

function payload(uuid: string): ResourceBackupPayload {
  const execution = randomUUID();
  return {
    resource: { kind: "application", uuid, name: `app ${uuid.slice(0, 8)}` },
    volumes: [{ name: "data", mount_path: "/data" }],
    schedule_uuid: "schedule-1",
    execution_uuid: execution,
    filename: `volume-20260301T030000Z-${execution.slice(0, 8)}.tar.gz`,
    keep_locally: 1,
    s3: null,
    passphrase: null,
    stop_during_backup: true,
    backup_type: "volume",
    configuration: null,
  };
}

/** The agent's resource.backup in a process of its own; resolves with its exit (code, signal). */
function backupProcess(p: ResourceBackupPayload): { child: ChildProcess; exit: Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }> } {
  const child = spawn(process.execPath, ["--import", "tsx", join(repo, "test/support/agent-job.ts")], { stdio: ["pipe", "pipe", "pipe"], cwd: repo });
  children.push(child);
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  child.stdin!.end(JSON.stringify({ stateDir, type: "resource.backup", payload: p, labels: LABELS }));
  return { child, exit: new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal, out }))) };
}

const journalEntries = async () => (existsSync(join(stateDir, JOURNAL_DIR)) ? (await readdir(join(stateDir, JOURNAL_DIR))).filter((n) => n.endsWith(".json")) : []);

/** A loopback port nothing listens on (the agent's control plane, which it never reaches here). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "capstan-agent-state-"));
}, 60_000);

afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  await removeLabelled(RUN);
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
}, 120_000);

describe("resource.backup with stop_during_backup", () => {
  it("stops both containers for the archive and starts them again when it is done", async () => {
    const uuid = randomUUID();
    const names = await app(uuid, 1);
    const before = await Promise.all(names.map(state));
    const run = backupProcess(payload(uuid));
    const { code, out } = await run.exit;
    expect(code, out).toBe(0);
    expect(JSON.parse(out).result.size).toBeGreaterThan(1024 * 1024);
    const after = await Promise.all(names.map(state));
    for (let i = 0; i < names.length; i++) {
      expect(after[i]!.split(" ")[0]).toBe("running");
      // Started again: a newer StartedAt than before the backup.
      expect(after[i]!.split(" ")[1]! > before[i]!.split(" ")[1]!).toBe(true);
    }
    expect(await journalEntries()).toEqual([]);
  }, 180_000);

  it("an agent killed mid-backup leaves them stopped; the agent's next start starts them again and clears its journal", async () => {
    const uuid = randomUUID();
    const names = await app(uuid, 400);
    const run = backupProcess(payload(uuid));
    // Mid-backup: the journal entry is written and both containers are stopped.
    await until(
      "the backup to stop the containers",
      async () => (await journalEntries()).length === 1 && (await Promise.all(names.map(state))).every((s) => s.startsWith("exited")),
      120_000,
      50,
    );
    run.child.kill("SIGKILL");
    const ended = await run.exit;
    expect(ended.signal, `the backup finished before it could be killed: ${ended.out}`).toBe("SIGKILL");
    // The crash left them down, and the entry says so.
    expect((await Promise.all(names.map(state))).map((s) => s.split(" ")[0])).toEqual(["exited", "exited"]);
    expect(await journalEntries()).toHaveLength(1);

    const agent = spawnLocalAgent({
      url: `http://127.0.0.1:${await closedPort()}`,
      token: randomBytes(24).toString("base64url"),
      stateDir,
      labels: Object.entries(LABELS).map(([k, v]) => `${k}=${v}`).join(","),
    });
    children.push(agent);
    try {
      await until("the agent to start the containers again", async () => (await Promise.all(names.map(state))).every((s) => s.startsWith("running")), 60_000);
      await until("the agent to clear its journal", async () => (await journalEntries()).length === 0, 30_000);
    } finally {
      await stopLocalAgent(agent, "SIGTERM");
    }
    expect(await sh("docker", ["exec", names[0]!, "cat", "/data/hello.txt"])).toBe("hello");
  }, 300_000);
});
