import { Readable } from "node:stream";
import type { DbCredentials } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import type { Engine, ExecSpec } from "../../docker/engine.js";
import { readTar } from "../tar.js";
import { clickhouseDriver, ensureDatabase } from "./clickhouse.js";
import type { DbTarget } from "./types.js";

/**
 * Which database the ClickHouse driver dumps and restores into, against a recording engine (the
 * whole path runs on ClickHouse 18.16 in test/e2e/agent-backups.test.ts and, through the API with
 * a clickhouse_db of its own, in test/e2e/databases.test.ts).
 */
const NATIVE = Buffer.from("NATIVE-BLOCK-BYTES");

interface Call {
  query: string | null;
  stdin: Buffer | null;
}

function recordingEngine() {
  const calls: Call[] = [];
  const engine = {
    async putArchive(_id: string, _dir: string, tar: NodeJS.ReadableStream) {
      for await (const e of readTar(tar as AsyncIterable<Buffer>)) for await (const _ of e.body) void _;
    },
    async execStream(_id: string, spec: ExecSpec) {
      let stdin: Buffer | null = null;
      if (spec.stdin) {
        const chunks: Buffer[] = [];
        for await (const c of spec.stdin as AsyncIterable<Buffer>) chunks.push(Buffer.from(c));
        stdin = Buffer.concat(chunks);
      }
      const query = spec.cmd[0] === "clickhouse-client" ? spec.cmd.find((a) => a.startsWith("--query="))!.slice("--query=".length) : null;
      calls.push({ query, stdin });
      let out: Buffer = Buffer.alloc(0);
      if (spec.cmd[0] === "id") out = Buffer.from("uid=101(clickhouse) gid=101(clickhouse)\n");
      else if (query?.includes("FROM system.tables")) out = Buffer.from('{"name":"notes","engine":"MergeTree"}\n');
      else if (query?.startsWith("SHOW CREATE TABLE")) out = Buffer.from(`CREATE TABLE ${query.split(" ")[3]} (id UInt32) ENGINE = MergeTree ORDER BY id\n`);
      else if (query?.startsWith("SELECT * FROM")) out = NATIVE;
      return { stdout: Readable.from([out]), done: Promise.resolve({ exitCode: 0, stderr: "" }) };
    },
  } as unknown as Engine;
  return { engine, queries: () => calls.filter((c) => c.query !== null) };
}

const target = (engine: Engine, database: string | null): DbTarget => ({
  engine,
  container: "c0ffee",
  name: "db-uuid",
  kind: "clickhouse",
  credentials: { user: "app", password: "secret-password-1", database, root_password: null } satisfies DbCredentials,
  signal: AbortSignal.timeout(10_000),
  progress: () => {},
  workDir: "/tmp",
  pollMs: 10,
});

async function dumpOf(database: string | null): Promise<{ bytes: Buffer; queries: string[] }> {
  const { engine, queries } = recordingEngine();
  const src = await clickhouseDriver.dump(target(engine, database));
  const chunks: Buffer[] = [];
  for await (const c of src.stream as AsyncIterable<Buffer>) chunks.push(Buffer.from(c));
  await src.finished();
  return { bytes: Buffer.concat(chunks), queries: queries().map((c) => c.query!) };
}

describe("clickhouse backup driver", () => {
  it("dumps the database of the credentials (clickhouse_db), named in the manifest", async () => {
    const { bytes, queries } = await dumpOf("analytics");
    expect(queries).toEqual([
      "SELECT name, engine FROM system.tables WHERE database = 'analytics' ORDER BY name FORMAT JSONEachRow",
      "SHOW CREATE TABLE `analytics`.`notes` FORMAT TSVRaw",
      "SELECT * FROM `analytics`.`notes` FORMAT Native",
    ]);
    const entries: Record<string, string> = {};
    for await (const e of readTar(Readable.from([bytes]) as AsyncIterable<Buffer>)) {
      const chunks: Buffer[] = [];
      for await (const c of e.body) chunks.push(c);
      entries[e.header.name] = Buffer.concat(chunks).toString("utf8");
    }
    expect(JSON.parse(entries["manifest.json"]!)).toMatchObject({ database: "analytics", tables: [{ name: "notes", engine: "MergeTree", data: true }] });
    expect(entries["tables/0001/data-000001.native"]).toBe(NATIVE.toString("utf8"));
  });

  it("a database stored without a name is ClickHouse's default", async () => {
    const { queries } = await dumpOf(null);
    expect(queries[0]).toContain("WHERE database = 'default'");
  });

  it("restores into that database, and refuses a backup of another one before touching anything", async () => {
    const { bytes } = await dumpOf("analytics");

    const ok = recordingEngine();
    await clickhouseDriver.restore(target(ok.engine, "analytics"), Readable.from([bytes]));
    const restored = ok.queries();
    expect(restored.map((c) => c.query)).toEqual([
      "CREATE DATABASE IF NOT EXISTS `analytics`",
      "DROP TABLE IF EXISTS `analytics`.`notes`",
      "CREATE TABLE `analytics`.`notes` (id UInt32) ENGINE = MergeTree ORDER BY id",
      "INSERT INTO `analytics`.`notes` FORMAT Native",
    ]);
    expect(restored.at(-1)!.stdin).toEqual(NATIVE);

    const other = recordingEngine();
    await expect(clickhouseDriver.restore(target(other.engine, "default"), Readable.from([bytes]))).rejects.toThrow("the backup is of database analytics, not default");
    expect(other.queries()).toEqual([]);
  });
});

describe("clickhouse: the database of clickhouse_db at deploy", () => {
  it("is created by the agent, quoted, with the credentials in a config file and not in argv", async () => {
    const { engine, queries } = recordingEngine();
    const argv: string[][] = [];
    const recording = {
      ...engine,
      putArchive: (engine as unknown as { putArchive: Engine["putArchive"] }).putArchive,
      execStream: (id: string, spec: ExecSpec, signal: AbortSignal) => {
        argv.push(spec.cmd);
        return engine.execStream(id, spec, signal);
      },
    } as unknown as Engine;
    await ensureDatabase(target(recording, "an`alytics"));
    expect(queries().map((c) => c.query)).toEqual(["CREATE DATABASE IF NOT EXISTS `an\\`alytics`"]);
    const client = argv.find((a) => a[0] === "clickhouse-client")!;
    expect(client.some((a) => a.startsWith("--config-file=/tmp/capstan-"))).toBe(true);
    expect(JSON.stringify(argv)).not.toContain("secret-password-1");
  });

  it("does nothing for default, which always exists", async () => {
    const { engine, queries } = recordingEngine();
    await ensureDatabase(target(engine, "default"));
    await ensureDatabase(target(engine, null));
    expect(queries()).toEqual([]);
  });
});
