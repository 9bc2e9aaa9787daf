import { Readable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import type { Engine, ExecOutcome, ExecSpec } from "../../docker/engine.js";
import { readTar } from "../tar.js";
import { mongodbDriver } from "./mongodb.js";
import type { DbTarget } from "./types.js";

/**
 * MongoDB has no image on these machines (not in Debian 12), so the driver is checked against a
 * recording engine: which tools it runs, with which argv, where the password goes, and that the
 * password file is removed again on success and on failure. (The same secret-file helper runs
 * against real containers in secret-file.test.ts and for every other engine end to end.)
 */
const PASSWORD = 'pa"ss word\\with: yaml';

interface Call {
  cmd: string[];
  env: Record<string, string> | undefined;
  user: string | undefined;
  stdin: string | null;
}

function recordingEngine(outcomes: Record<string, ExecOutcome>, stdout: Record<string, string> = {}) {
  const calls: Call[] = [];
  const files: { dir: string; name: string; content: string; mode: number; uid: number }[] = [];
  const engine = {
    async putArchive(_id: string, dir: string, tar: NodeJS.ReadableStream) {
      for await (const e of readTar(tar as AsyncIterable<Buffer>)) {
        const chunks: Buffer[] = [];
        for await (const b of e.body) chunks.push(b);
        files.push({ dir, name: e.header.name, content: Buffer.concat(chunks).toString("utf8"), mode: e.header.mode, uid: e.header.uid });
      }
    },
    async execStream(_id: string, spec: ExecSpec) {
      let stdin: string | null = null;
      if (spec.stdin) {
        const chunks: Buffer[] = [];
        for await (const c of spec.stdin as AsyncIterable<Buffer>) chunks.push(Buffer.from(c));
        stdin = Buffer.concat(chunks).toString("utf8");
      }
      calls.push({ cmd: spec.cmd, env: spec.env, user: spec.user, stdin });
      const tool = spec.cmd[0]!;
      const out = tool === "id" ? "uid=999(mongodb) gid=999(mongodb) groups=999(mongodb)\n" : (stdout[tool] ?? "");
      return { stdout: Readable.from([Buffer.from(out)]), done: Promise.resolve(outcomes[tool] ?? { exitCode: 0, stderr: "" }) };
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
  it("dumps every database with mongodump --archive; the password is in a 0600 config file of the tool's user, never argv or env, removed afterwards", async () => {
    const { engine, calls, files } = recordingEngine({}, { mongodump: "ARCHIVE-BYTES" });
    const src = await mongodbDriver.dump(target(engine));
    expect(await drain(src.stream)).toBe("ARCHIVE-BYTES");
    await src.finished();
    // the file is removed once the dump's output ended, without holding up the caller
    await vi.waitFor(() => expect(calls.at(-1)!.cmd[0]).toBe("rm"));

    expect(files).toHaveLength(1);
    expect(files[0]).toMatchObject({ dir: "/tmp", mode: 0o600, uid: 999 });
    const path = `/tmp/${files[0]!.name}`;
    expect(path).toMatch(/^\/tmp\/capstan-[0-9a-f]{8}-[0-9a-f]{16}\/mongo\.yaml$/);
    // A JSON string is a YAML double-quoted scalar: the password round-trips as one value.
    expect(JSON.parse(files[0]!.content.replace(/^password: /, "").trim())).toBe(PASSWORD);

    const dump = calls.find((c) => c.cmd[0] === "mongodump")!;
    expect(dump.cmd).toEqual(expect.arrayContaining(["--archive", "--username=root", "--authenticationDatabase=admin", `--config=${path}`]));
    for (const c of calls) expect([...c.cmd, ...Object.values(c.env ?? {})].join("\n")).not.toContain("pa\"ss");
    expect(calls.at(-1)).toMatchObject({ cmd: ["rm", "-rf", "--", path.slice(0, path.lastIndexOf("/"))], user: "0" });
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
    const dir = `/tmp/${failing.files[0]!.name.split("/")[0]}`;
    expect(failing.calls.at(-1)!.cmd).toEqual(["rm", "-rf", "--", dir]);
  });
});
