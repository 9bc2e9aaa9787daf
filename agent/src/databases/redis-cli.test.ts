/**
 * The redis-like CLI helper against a REAL Redis 7 (capstan-test/redis from test/kit/images.sh;
 * skipped with the reason when there is no engine or image): AUTH over stdin carries any
 * password, a wrong one fails with the server's words, and a server loading its dataset is told
 * apart from a ready one (which the password-less health probe cannot). Containers are labelled
 * capstan.test=1 and removed afterwards.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerodeEngine } from "../docker/dockerode-engine.js";
import { dirOwner, putPrivateFile } from "./container-files.js";
import { engineRuntime } from "./engines.js";
import { parseRedisCliOutput, redisCliInput, redisCommand, redisReply, waitDatasetLoaded } from "./redis-cli.js";
import { engineSkipReason } from "../testing/engine-prerequisites.js";

const IMAGE = "capstan-test/redis:latest";
const NAME = `capstan-rediscli-it-${randomBytes(3).toString("hex")}`;
const engine = new DockerodeEngine();
const run = promisify(execFile);
const docker = async (...args: string[]) => (await run("docker", args, { timeout: 120_000, maxBuffer: 16 * 1024 * 1024 })).stdout.trim();

const skipReason = await engineSkipReason(engine, "redis", "agent/src/databases/redis-cli.test.ts");

/** Quotes, backslashes, spaces, a `#`, a non-ASCII letter: all must survive redis.conf and the CLI's line splitting. */
const PASSWORD = `pw"'\\ #$x-ü-${randomBytes(8).toString("hex")}`;
const signal = () => AbortSignal.timeout(60_000);

describe("redis-cli input and output", () => {
  it("sends AUTH first and every argument quoted; the password is only on stdin", () => {
    expect(redisCliInput('a"b', ["CONFIG", "GET", "dir"]).toString()).toBe('AUTH "a\\"b"\n"CONFIG" "GET" "dir"\n');
  });

  it("splits the AUTH reply from the command's; an error reply is kept, a failed AUTH fails", () => {
    expect(parseRedisCliOutput("redis-cli", "CONFIG", "OK\ndir\n/data\n")).toEqual({ lines: ["dir", "/data"], error: null });
    expect(parseRedisCliOutput("redis-cli", "GET", "OK\n\n")).toEqual({ lines: [""], error: null });
    expect(parseRedisCliOutput("redis-cli", "PING", "OK\nLOADING Redis is loading the dataset in memory\n\n").error).toMatch(/^LOADING/);
    expect(() => parseRedisCliOutput("redis-cli", "CONFIG", "WRONGPASS invalid username-password pair or user is disabled.\n\nNOAUTH Authentication required.\n\n")).toThrow(
      "redis-cli CONFIG: AUTH failed: WRONGPASS invalid username-password pair or user is disabled.",
    );
  });
});

describe.skipIf(skipReason !== null)("redis-cli helper (real Redis 7)", { timeout: 120_000 }, () => {
  beforeAll(async () => {
    // As the agent deploys it: the image's entrypoint, our config file put in before the start.
    const runtime = engineRuntime("redis", { user: null, password: PASSWORD, database: null, root_password: null });
    await docker("create", "--label", "capstan.test=1", "--name", NAME, IMAGE, ...runtime.cmd!);
    for (const f of runtime.files) await putPrivateFile(engine, NAME, f.dir, f.name, Buffer.from(f.content), await dirOwner(engine, NAME, f.dir, signal()), signal());
    await docker("start", NAME);
    for (let i = 0; i < 300 && !/NOAUTH/.test(await docker("exec", NAME, "redis-cli", "ping").catch(() => "")); i++) await new Promise((r) => setTimeout(r, 100));
  });

  afterAll(async () => {
    await docker("rm", "-f", NAME).catch(() => undefined);
  });

  it("runs commands authenticated with any password; the config file is the server user's, mode 600", async () => {
    expect(await redisCommand(engine, NAME, "redis", PASSWORD, ["SET", "k", 'v "x"'], signal())).toEqual(["OK"]);
    expect(await redisCommand(engine, NAME, "redis", PASSWORD, ["GET", "k"], signal())).toEqual(['v "x"']);
    expect(await redisCommand(engine, NAME, "redis", PASSWORD, ["CONFIG", "GET", "dir"], signal())).toEqual(["dir", "/data"]);
    expect(await docker("exec", NAME, "stat", "-c", "%a %U", "/data/capstan-redis.conf")).toBe("600 redis");
  });

  it("a wrong password fails with the server's reason; an error reply fails with its text", async () => {
    await expect(redisCommand(engine, NAME, "redis", "not-the-password", ["GET", "k"], signal())).rejects.toThrow(/redis-cli GET: AUTH failed: WRONGPASS/);
    await expect(redisCommand(engine, NAME, "redis", PASSWORD, ["LPUSH", "k", "x"], signal())).rejects.toThrow(/redis-cli LPUSH: WRONGTYPE/);
  });

  it("tells a loading server from a ready one, which the password-less probe cannot", async () => {
    // About 60 MB of RDB: loading it takes long enough to be seen.
    await redisCommand(engine, NAME, "redis", PASSWORD, ["EVAL", "for i=1,2500000 do redis.call('SET','k'..i,string.rep('x',100)) end", "0"], signal());
    await redisCommand(engine, NAME, "redis", PASSWORD, ["SAVE"], signal());
    await docker("restart", "-t", "30", NAME);
    const probe = engineRuntime("redis", { user: null, password: PASSWORD, database: null, root_password: null }).healthcheck.test[1]!;
    let loadingSeen = false;
    let probeWhileLoading: number | null = null;
    for (let i = 0; i < 200 && !loadingSeen; i++) {
      const r = await redisReply(engine, NAME, "redis", PASSWORD, ["PING"], signal()).catch(() => null);
      if (r?.error?.startsWith("LOADING")) {
        loadingSeen = true;
        probeWhileLoading = await run("docker", ["exec", NAME, "sh", "-c", probe]).then(() => 0, (e: { code?: number }) => e.code ?? -1);
      }
    }
    expect(loadingSeen).toBe(true);
    // The documented limit: NOAUTH comes before LOADING, so the probe says "up".
    expect(probeWhileLoading).toBe(0);
    await waitDatasetLoaded(engine, NAME, "redis", PASSWORD, { pollMs: 100 }, { signal: signal(), progress: () => {} });
    expect(await redisCommand(engine, NAME, "redis", PASSWORD, ["DBSIZE"], signal())).toEqual(["2500001"]);
  });
});
