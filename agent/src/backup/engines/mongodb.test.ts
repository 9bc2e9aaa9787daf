import { Readable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import type { Engine, ExecOutcome, ExecSpec } from "../../docker/engine.js";
import { mongodbDriver } from "./mongodb.js";
import type { DbTarget } from "./types.js";

/**
 * MongoDB has no image on these machines (not in Debian 12), so the driver is checked against a
 * recording engine: which tools it runs, with which argv, where the password goes, and that the
 * password file is removed again on success and on failure.
 */
const PASSWORD = 'pa"ss word\\with: yaml';

interface Call {
  cmd: string[];
  stdin: string | null;
}

function recordingEngine(outcomes: Record<string, ExecOutcome>, stdout: Record<string, string> = {}) {
  const calls: Call[] = [];
  const files: { dir: string; name: string; content: string; mode: number | undefined }[] = [];
  const engine = {
    async putFile(_id: string, dir: string, name: string, content: Buffer, _signal?: AbortSignal, mode?: number) {
      files.push({ dir, name, content: content.toString("utf8"), mode });
    },
    async execStream(_id: string, spec: ExecSpec) {
      let stdin: string | null = null;
      if (spec.stdin) {
        const chunks: Buffer[] = [];
        for await (const c of spec.stdin as AsyncIterable<Buffer>) chunks.push(Buffer.from(c));
        stdin = Buffer.concat(chunks).toString("utf8");
      }
      calls.push({ cmd: spec.cmd, stdin });
      const tool = spec.cmd[0]!;
      return { stdout: Readable.from([Buffer.from(stdout[tool] ?? "")]), done: Promise.resolve(outcomes[tool] ?? { exitCode: 0, stderr: "" }) };
    },
  } as unknown as Engine;
  return { engine, calls, files };
}

const target = (engine: Engine): DbTarget => ({
  engine,
  container: "c0ffee",
  name: "db-uuid",
  kind: "mongodb",
  credentials: { user: "root", password: PASSWORD, database: "appdb", root_password: null },
  signal: AbortSignal.timeout(10_000),
  progress: () => {},
  workDir: "/tmp",
  pollMs: 10,
});

async function drain(r: Readable): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of r as AsyncIterable<Buffer>) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks).toString("utf8");
}

describe("mongodb backup driver", () => {
  it("dumps every database with mongodump --archive; the password is in a 0600 config file, never argv, removed afterwards", async () => {
    const { engine, calls, files } = recordingEngine({}, { mongodump: "ARCHIVE-BYTES" });
    const src = await mongodbDriver.dump(target(engine));
    expect(await drain(src.stream)).toBe("ARCHIVE-BYTES");
    await src.finished();
    // the file is removed once the dump ended, without holding up the caller
    await vi.waitFor(() => expect(calls.at(-1)!.cmd[0]).toBe("rm"));

    expect(files).toHaveLength(1);
    expect(files[0]!.mode).toBe(0o600);
    expect(files[0]!.dir).toBe("/tmp");
    // A JSON string is a YAML double-quoted scalar: the password round-trips as one value.
    expect(JSON.parse(files[0]!.content.replace(/^password: /, "").trim())).toBe(PASSWORD);

    const dump = calls.find((c) => c.cmd[0] === "mongodump")!;
    expect(dump.cmd).toEqual(expect.arrayContaining(["--archive", "--username=root", "--authenticationDatabase=admin", `--config=/tmp/${files[0]!.name}`]));
    for (const c of calls) expect(c.cmd.join(" ")).not.toContain(PASSWORD);
    expect(calls.at(-1)!.cmd).toEqual(["rm", "-f", "--", `/tmp/${files[0]!.name}`]);
  });

  it("restores with mongorestore --archive --drop from stdin, and removes the config file even when the tool fails", async () => {
    const ok = recordingEngine({});
    await mongodbDriver.restore(target(ok.engine), Readable.from([Buffer.from("ARCHIVE")]));
    const restore = ok.calls.find((c) => c.cmd[0] === "mongorestore")!;
    expect(restore.cmd).toEqual(expect.arrayContaining(["--archive", "--drop", "--authenticationDatabase=admin"]));
    expect(restore.stdin).toBe("ARCHIVE");
    expect(ok.calls.at(-1)!.cmd[0]).toBe("rm");

    const failing = recordingEngine({ mongorestore: { exitCode: 1, stderr: "Failed: authentication failed" } });
    await expect(mongodbDriver.restore(target(failing.engine), Readable.from([Buffer.from("ARCHIVE")]))).rejects.toThrow(
      /mongorestore failed \(exit code 1\): Failed: authentication failed/,
    );
    expect(failing.calls.at(-1)!.cmd).toEqual(["rm", "-f", "--", `/tmp/${failing.files[0]!.name}`]);
  });
});
