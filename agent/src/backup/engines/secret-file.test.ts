/**
 * withSecretFile against a REAL Docker Engine (capstan-test/busybox, built by test/kit/images.sh;
 * skipped with the reason when there is no engine or image): where the file lands, its mode and
 * owner as the engine reports them, who can read it, and that it is gone after success, failure
 * and cancel. Containers are labelled capstan.test=1 and removed afterwards.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerodeEngine } from "../../docker/dockerode-engine.js";
import { execOwner, withSecretFile } from "./secret-file.js";
import type { DbTarget } from "./types.js";
import { engineSkipReason } from "../../testing/engine-prerequisites.js";

const IMAGE = "capstan-test/busybox:latest";
const RUN = `capstan-secret-it-${randomBytes(3).toString("hex")}`;
const engine = new DockerodeEngine();
const run = promisify(execFile);

async function docker(...args: string[]): Promise<string> {
  return (await run("docker", args, { timeout: 60_000 })).stdout.trim();
}

const skipReason = await engineSkipReason(engine, "busybox", "agent/src/backup/engines/secret-file.test.ts");

const SECRET = `s3cret "quoted" \\ ${randomBytes(6).toString("hex")}`;
let asRoot = "";
let asNobody = "";

function target(container: string, signal: AbortSignal = AbortSignal.timeout(30_000), lines: string[] = []): DbTarget {
  return {
    engine,
    container,
    name: container,
    kind: "postgresql",
    credentials: { user: "u", password: SECRET, database: "d", root_password: null },
    signal,
    progress: (l) => void lines.push(l),
    workDir: "/tmp",
    pollMs: 50,
  };
}

/** The private directories the helper left in the container's /tmp. */
const leftovers = async (container: string) => (await docker("exec", container, "ls", "-a", "/tmp")).split("\n").filter((n) => n.startsWith("capstan-"));

describe.skipIf(skipReason !== null)("withSecretFile (real Docker Engine)", { timeout: 60_000 }, () => {
  beforeAll(async () => {
    asRoot = await docker("run", "-d", "--label", "capstan.test=1", "--name", `${RUN}-root`, IMAGE, "sleep", "600");
    asNobody = await docker("run", "-d", "--label", "capstan.test=1", "--name", `${RUN}-nobody`, "--user", "65534:65534", IMAGE, "sleep", "600");
  });

  afterAll(async () => {
    await docker("rm", "-f", `${RUN}-root`, `${RUN}-nobody`).catch(() => undefined);
  });

  it("puts the file, mode 600 and owned by the exec user (root), in a root-owned directory of its own; removes it afterwards", async () => {
    const seen = await withSecretFile(target(asRoot), { name: "pgpass", content: SECRET }, async (path) => {
      expect(path).toMatch(/^\/tmp\/capstan-[0-9a-f]{8}-[0-9a-f]{16}\/pgpass$/);
      const dir = path.slice(0, path.lastIndexOf("/"));
      return {
        path,
        content: await docker("exec", asRoot, "cat", path),
        file: await docker("exec", asRoot, "stat", "-c", "%a %u %g", path),
        dir: await docker("exec", asRoot, "stat", "-c", "%a %u %g", dir),
      };
    });
    expect(seen.content).toBe(SECRET);
    expect(seen.file).toBe("600 0 0");
    expect(seen.dir).toBe("755 0 0");
    expect(await leftovers(asRoot)).toEqual([]);
  });

  it("in a container whose user is not root, the file belongs to that user: the tool reads it, no other user does", async () => {
    expect(await execOwner(engine, asNobody, AbortSignal.timeout(10_000))).toEqual({ uid: 65534, gid: 65534 });
    await withSecretFile(target(asNobody), { name: "client.cnf", content: SECRET }, async (path) => {
      expect(await docker("exec", asNobody, "cat", path)).toBe(SECRET);
      expect(await docker("exec", asNobody, "stat", "-c", "%a %u %g", path)).toBe("600 65534 65534");
      await expect(docker("exec", "--user", "1234", asNobody, "cat", path)).rejects.toThrow(/Permission denied/);
    });
    // Removed as root: the directory is root's, the tool's user could not have.
    expect(await leftovers(asNobody)).toEqual([]);
  });

  it("is removed when the work fails, and when the job's signal aborts it midway", async () => {
    await expect(
      withSecretFile(target(asRoot), { name: "f", content: SECRET }, async () => {
        throw new Error("tool failed");
      }),
    ).rejects.toThrow("tool failed");
    expect(await leftovers(asRoot)).toEqual([]);

    const ac = new AbortController();
    const work = withSecretFile(target(asRoot, ac.signal), { name: "f", content: SECRET }, (path) =>
      // The removal must not depend on the aborted signal.
      new Promise((_, reject) => {
        expect(path).toContain("/tmp/capstan-");
        ac.signal.addEventListener("abort", () => reject(ac.signal.reason), { once: true });
        ac.abort(new Error("cancelled"));
      }),
    );
    await expect(work).rejects.toThrow("cancelled");
    expect(await leftovers(asRoot)).toEqual([]);

    // Aborted before the file was even written: nothing is left either.
    const gone = new AbortController();
    gone.abort(new Error("cancelled before"));
    await expect(withSecretFile(target(asRoot, gone.signal), { name: "f", content: SECRET }, async () => "never")).rejects.toThrow("cancelled before");
    expect(await leftovers(asRoot)).toEqual([]);
  });

  it("removes what an earlier agent process left (a crash mid-job), never this process's own directories in use nor other files", async () => {
    // As a crashed process would have left them: one of another process's mark, one named before marks existed.
    for (const stale of ["capstan-0badc0de-00112233aabbccdd", "capstan-0123456789abcdef"]) {
      await docker("exec", asRoot, "sh", "-c", `mkdir -p /tmp/${stale} && echo old > /tmp/${stale}/pgpass && chmod 600 /tmp/${stale}/pgpass`);
    }
    await docker("exec", asRoot, "touch", "/tmp/not-ours");
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const inUse = await withSecretFile(target(asRoot), { name: "f", content: SECRET }, async (p) => p, { holdUntil: () => held });
    try {
      const lines: string[] = [];
      await withSecretFile(target(asRoot, undefined, lines), { name: "g", content: SECRET }, async () => {
        // This call's directory and the one still in use; the stale ones are gone.
        const left = await leftovers(asRoot);
        expect(left).toHaveLength(2);
        expect(left).toContain(inUse.split("/")[2]);
        for (const d of left) expect(d).toMatch(/^capstan-[0-9a-f]{8}-[0-9a-f]{16}$/);
        expect(await docker("exec", asRoot, "cat", inUse)).toBe(SECRET);
      });
      expect(lines).toEqual([]);
      expect(await docker("exec", asRoot, "ls", "/tmp/not-ours")).toBe("/tmp/not-ours");
    } finally {
      release();
    }
    await expect.poll(() => leftovers(asRoot), { timeout: 10_000 }).toEqual([]);
  });

  it("with holdUntil, stays until that settles (a dump tool still reading it), without holding up the caller", async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const path = await withSecretFile(target(asRoot), { name: "f", content: SECRET }, async (p) => p, { holdUntil: () => held });
    expect(await docker("exec", asRoot, "cat", path)).toBe(SECRET);
    release();
    await expect.poll(() => leftovers(asRoot), { timeout: 10_000 }).toEqual([]);
  });
});
