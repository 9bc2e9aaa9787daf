/**
 * execStream against a REAL Docker Engine (DOCKER_SOCKET or /var/run/docker.sock) with the local
 * image capstan-test/busybox:latest: how a session that ends early (abort, a failing stdin, an
 * output given up) ends the process in the container, and that none of it escapes as an
 * uncaught exception. Skipped, with the reason, when no engine or image is there (start them with
 * `bash test/kit/engine.sh up && bash test/kit/images.sh busybox`). The container is labelled
 * capstan.test=1 and removed afterwards.
 */
import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import Docker from "dockerode";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import type { ExecSession } from "./engine.js";
import { DockerodeEngine } from "./dockerode-engine.js";
import { engineSkipReason } from "../testing/engine-prerequisites.js";

const SOCKET = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const IMAGE = "capstan-test/busybox:latest";
const engine = new DockerodeEngine(SOCKET);
const docker = new Docker({ socketPath: SOCKET });

const skipReason = await engineSkipReason(engine, "busybox", "agent/src/docker/engine-exec.test.ts");

/** The command lines of the container's processes, as the engine sees them (`docker top`). */
async function processes(id: string): Promise<string[]> {
  const top = (await docker.getContainer(id).top({ ps_args: "-eo pid,args" })) as { Titles: string[]; Processes: string[][] };
  const argsAt = top.Titles.findIndex((t) => /^(COMMAND|ARGS|CMD)$/.test(t));
  return top.Processes.map((p) => p[argsAt]!);
}

/** Reads stdout until it has seen `text`. */
async function waitFor(s: ExecSession, text: string): Promise<void> {
  let seen = "";
  for await (const chunk of s.stdout as AsyncIterable<Buffer>) {
    seen += chunk.toString();
    if (seen.includes(text)) return;
  }
  throw new Error(`stdout ended without ${JSON.stringify(text)}: ${JSON.stringify(seen)}`);
}

describe.skipIf(skipReason !== null)("execStream on a real engine: sessions that end early", { timeout: 60_000 }, () => {
  let id: string;
  const uncaught = vi.fn();
  beforeAll(async () => {
    const c = await docker.createContainer({
      Image: IMAGE,
      name: `capstan-exec-it-${randomBytes(3).toString("hex")}`,
      Cmd: ["sleep", "3600"],
      Labels: { "capstan.test": "1" },
      HostConfig: { Init: true },
    });
    await c.start();
    id = c.id;
  });
  afterAll(async () => {
    if (id) await docker.getContainer(id).remove({ force: true }).catch(() => {});
  });
  beforeEach(() => {
    uncaught.mockClear();
    process.on("uncaughtException", uncaught);
  });
  afterEach(() => {
    process.off("uncaughtException", uncaught);
  });

  it("aborting mid-stream fails stdout and done with the abort, and raises no uncaught exception", async () => {
    const ac = new AbortController();
    const s = await engine.execStream(id, { cmd: ["sh", "-c", "while :; do echo tick; sleep 0.05; done"] }, ac.signal);
    await waitFor(s, "tick");
    const stdoutError = new Promise<Error>((resolve) => s.stdout.once("error", resolve));
    ac.abort();
    await expect(s.done).rejects.toThrow(/aborted/);
    expect((await stdoutError).message).toMatch(/aborted/);
    await new Promise((r) => setTimeout(r, 200));
    expect(uncaught).not.toHaveBeenCalled();
    expect((await processes(id)).filter((p) => p.includes("while"))).toEqual([]);
  });

  it("a failing stdin fails the session without an uncaught exception, and the process gets no clean end of input", async () => {
    const input = new Readable({ read() {} });
    input.push("first line\n");
    // `cat` would see EOF if the connection closed before it was stopped, and the shell then
    // marks that it got a clean end of input.
    const s = await engine.execStream(id, { cmd: ["sh", "-c", "cat >/tmp/in-$$ && echo clean-eof >/tmp/eof-$$; echo $$ >/tmp/last-stdin-pid"], stdin: input });
    s.stdout.resume();
    await new Promise((r) => setTimeout(r, 500));
    input.destroy(new Error("the backup could not be read"));
    await expect(s.done).rejects.toThrow(/the backup could not be read/);
    await new Promise((r) => setTimeout(r, 200));
    expect(uncaught).not.toHaveBeenCalled();
    const ls = await engine.execStream(id, { cmd: ["sh", "-c", "ls /tmp; cat /tmp/eof-* 2>/dev/null || true"] });
    let out = "";
    for await (const c of ls.stdout as AsyncIterable<Buffer>) out += c.toString();
    expect((await ls.done).exitCode).toBe(0);
    expect(out).toMatch(/in-\d+/);
    expect(out).not.toContain("clean-eof");
    expect((await processes(id)).filter((p) => p.startsWith("cat") || p.includes("clean-eof"))).toEqual([]);
  });

  it("aborting stops a process that writes nothing (Docker alone would let it run on)", async () => {
    const ac = new AbortController();
    const s = await engine.execStream(id, { cmd: ["sleep", "301"] }, ac.signal);
    s.stdout.resume();
    await new Promise((r) => setTimeout(r, 300));
    expect(await processes(id)).toContain("sleep 301");
    ac.abort();
    await expect(s.done).rejects.toThrow(/aborted/);
    expect(await processes(id)).not.toContain("sleep 301");
  });

  it("a process that ignores SIGTERM, and its children, are killed after the grace period", async () => {
    const ac = new AbortController();
    const s = await engine.execStream(id, { cmd: ["sh", "-c", "trap '' TERM; sleep 302; echo never"] }, ac.signal);
    s.stdout.resume();
    await new Promise((r) => setTimeout(r, 300));
    const started = Date.now();
    ac.abort();
    await expect(s.done).rejects.toThrow(/aborted/);
    expect(Date.now() - started).toBeLessThan(20_000);
    expect((await processes(id)).filter((p) => p.includes("302"))).toEqual([]);
  });

  it("giving up stdout before its end stops the process", async () => {
    const s = await engine.execStream(id, { cmd: ["sh", "-c", "echo ready; exec sleep 303"] });
    await waitFor(s, "ready");
    s.stdout.destroy();
    await expect(s.done).rejects.toThrow(/output closed before the process ended/);
    expect(await processes(id)).not.toContain("sleep 303");
    expect(uncaught).not.toHaveBeenCalled();
  });

  it("a session that ends normally still reports the exit code and stderr", async () => {
    const s = await engine.execStream(id, { cmd: ["sh", "-c", "echo out; echo err >&2; exit 3"] });
    let out = "";
    for await (const c of s.stdout as AsyncIterable<Buffer>) out += c.toString();
    expect(out).toBe("out\n");
    expect(await s.done).toEqual({ exitCode: 3, stderr: "err\n" });
  });
});
