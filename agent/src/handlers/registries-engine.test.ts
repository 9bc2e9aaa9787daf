/**
 * registry.login / registry.logout against a REAL Docker Engine (/var/run/docker.sock or
 * DOCKER_SOCKET) and a real registry (Debian's docker-registry 2.8.2 with htpasswd, on
 * 127.0.0.1, which the engine treats as an insecure registry: plain http). Skipped with the
 * reason when no engine answers (test/kit/engine.sh up). Run under the shared lock:
 * `flock /tmp/capstan-docker.lock npx vitest run --project unit agent/src/handlers/registries-engine.test.ts`.
 *
 * While a login runs, every process's command line and environment on the machine are read
 * again and again (/proc/<pid>/cmdline, /proc/<pid>/environ): the password must be in none.
 */
import { spawn } from "node:child_process";
import { randomBytes, randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerodeEngine } from "../docker/dockerode-engine.js";
import type { JobContext } from "../dispatch/types.js";
import { engineSkipReason } from "../testing/engine-prerequisites.js";
import { storedLogin } from "../registries/config.js";
import { createHandlers } from "./index.js";
import { startRegistry, type RegistryServer } from "../../../test/support/registry-server.js";
import { scanProcesses } from "../../../test/support/process-scan.js";

const SOCKET = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const engine = new DockerodeEngine(SOCKET);
const docker = new Docker({ socketPath: SOCKET });
const skipReason = await engineSkipReason(engine, "busybox", "agent/src/handlers/registries-engine.test.ts");
const RUN = randomBytes(3).toString("hex");
const PASSWORD = `reg-pw-${randomBytes(12).toString("hex")}`;

let registry: RegistryServer;
let stateDir: string;
let repo: string;
const ctx = (): JobContext & { lines: string[] } => {
  const lines: string[] = [];
  return { signal: AbortSignal.timeout(60_000), progress: (l) => void lines.push(l), job: { id: `job-${randomUUID()}`, attempt: 1 }, lines };
};

beforeAll(async () => {
  if (skipReason) return;
  registry = await startRegistry("basic", { username: "alice", password: PASSWORD });
  stateDir = mkdtempSync(join(tmpdir(), "capstan-agent-registries-"));
  repo = `${registry.host}/capstan-test/busybox-${RUN}`;
  await docker.getImage("capstan-test/busybox:latest").tag({ repo, tag: "v1" });
}, 180_000);
afterAll(async () => {
  if (skipReason) return;
  await engine.removeImage(`${repo}:v1`).catch(() => {});
  await registry?.stop();
  if (stateDir) rmSync(stateDir, { recursive: true, force: true });
});

describe("the process scan", () => {
  it("finds a secret in a child's command line and in a child's environment (so its silence below means something)", async () => {
    const secret = `probe-${randomBytes(8).toString("hex")}`;
    const children = [spawn("/bin/sh", ["-c", "sleep 5", "sh", secret]), spawn("/bin/sleep", ["5"], { env: { ...process.env, PROBE: secret } })];
    await new Promise((r) => setTimeout(r, 200));
    const { hits } = scanProcesses(secret).stop();
    for (const c of children) c.kill();
    expect(hits.filter((h) => h.includes("cmdline")).length).toBeGreaterThan(0);
    expect(hits.filter((h) => h.includes("environ")).length).toBeGreaterThan(0);
  });
});

describe.skipIf(skipReason !== null)("registry logins on a real engine", () => {
  it("a wrong password fails with the engine's reason (the registry's 401), stores nothing, and shows the password nowhere", async () => {
    const handlers = createHandlers(engine, { stateDir });
    const wrong = `${PASSWORD}-wrong`;
    const err = (await handlers["registry.login"]({ registry: registry.host, username: "alice", password: wrong, fingerprint: "f0" }, ctx()).catch((e: Error) => e)) as Error;
    expect(err).toBeInstanceOf(Error);
    expect(err.message).toMatch(/401|unauthorized/i);
    expect(err.message).not.toContain(wrong);
    expect(await storedLogin(stateDir, registry.host)).toBeNull();
  });

  it("logs in through the engine with the password in no process's argv or environment; the stored login pushes and pulls; logout makes the pull fail with the registry's reason", async () => {
    const handlers = createHandlers(engine, { stateDir });
    // Without a login the registry refuses the push.
    await expect(engine.pushImage(repo, "v1", null, () => {})).rejects.toThrow(/no basic auth credentials|unauthorized|authentication required/i);

    const scan = scanProcesses(PASSWORD);
    const c = ctx();
    const result = await handlers["registry.login"]({ registry: registry.host, username: "alice", password: PASSWORD, fingerprint: "f1" }, c);
    const { hits, processesSeen, passes } = scan.stop();
    expect(result).toEqual({ registry: registry.host, fingerprint: "f1", status: expect.stringMatching(/Login Succeeded/) });
    expect(hits).toEqual([]);
    expect(processesSeen).toBeGreaterThan(3); // the engine, the registry, this test, ...
    expect(passes).toBeGreaterThan(0);
    expect(c.lines.join("\n")).not.toContain(PASSWORD);
    expect(statSync(join(stateDir, "docker", "config.json")).mode & 0o777).toBe(0o600);

    // The stored login is what the agent's pulls send (X-Registry-Auth).
    const login = await storedLogin(stateDir, registry.host);
    expect(login).toEqual({ username: "alice", password: PASSWORD });
    const auth = { ...login!, serveraddress: registry.host };
    await engine.pushImage(repo, "v1", auth, () => {});
    await engine.removeImage(`${repo}:v1`);
    await engine.pullImage(`${repo}:v1`, () => {}, undefined, auth);
    expect(await engine.imageExists(`${repo}:v1`)).toBe(true);

    expect(await handlers["registry.logout"]({ registry: registry.host }, ctx())).toEqual({ removed: true });
    expect(await storedLogin(stateDir, registry.host)).toBeNull();
    await engine.removeImage(`${repo}:v1`);
    await expect(engine.pullImage(`${repo}:v1`, () => {}, undefined, null)).rejects.toThrow(/no basic auth credentials|unauthorized|authentication required/i);
  });
});
