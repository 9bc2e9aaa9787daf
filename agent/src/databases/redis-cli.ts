import { Readable } from "node:stream";
import type { DatabaseEngine } from "@capstan/shared";
import { BackupToolError, execCollect } from "../backup/exec.js";
import type { Engine } from "../docker/engine.js";
import { sleep } from "../sleep.js";
import { redisConfValue } from "./redis-conf.js";

/** The client each Redis-like engine's image ships (Dragonfly's has Redis' own redis-cli). */
export const REDIS_CLI = { redis: "redis-cli", keydb: "keydb-cli", dragonfly: "redis-cli" } as const;
export type RedisLike = keyof typeof REDIS_CLI;
export const isRedisLike = (e: DatabaseEngine): e is RedisLike => Object.hasOwn(REDIS_CLI, e);

const ERROR_REPLY = /^(\(error\) )?(ERR|NOAUTH|WRONGPASS|NOPERM|LOADING|MISCONF|BUSY|READONLY|EXECABORT|WRONGTYPE)\b/;
const LOADING_REPLY = /^(\(error\) )?LOADING\b/;

export interface RedisReply {
  /** The reply's lines (the CLI's raw output: one line per element). */
  lines: string[];
  /** The error reply, or null. */
  error: string | null;
}

/**
 * The CLI's stdin for one authenticated command. Given no command arguments and no terminal,
 * redis-cli (and keydb-cli, its fork) reads commands line by line from stdin and splits each
 * line like a redis.conf line (sdssplitargs), so the config file's quoting carries any
 * password and argument. AUTH comes first: the password is never in argv (REDISCLI_AUTH or
 * -a) nor in the CLI's environment.
 */
export function redisCliInput(password: string, args: string[]): Buffer {
  return Buffer.from(`AUTH ${redisConfValue(password)}\n${args.map(redisConfValue).join(" ")}\n`, "utf8");
}

/** Splits the CLI's output into the AUTH reply and the command's reply. */
export function parseRedisCliOutput(cli: string, command: string, out: string): RedisReply {
  const [auth, ...rest] = out.replace(/\r/g, "").split("\n");
  // Not the password's fault only: a server without one answers AUTH with an error as well.
  if (auth !== "OK") throw new BackupToolError(`${cli} ${command}: AUTH failed: ${auth || "no reply"}`);
  // The output ends with a newline; an error reply is followed by an empty line.
  const lines = rest.filter((l, i, all) => l !== "" || i < all.length - 1);
  const error = lines[0] !== undefined && ERROR_REPLY.test(lines[0]) ? lines[0] : null;
  return { lines, error };
}

/** One command through the engine's CLI in its container, authenticated over stdin. */
export async function redisReply(engine: Engine, container: string, kind: RedisLike, password: string, args: string[], signal: AbortSignal): Promise<RedisReply> {
  const cli = REDIS_CLI[kind];
  const stdin = Readable.from([redisCliInput(password, args)]);
  const out = await execCollect(engine, container, { cmd: [cli, "-h", "127.0.0.1", "-p", "6379"], stdin }, signal);
  return parseRedisCliOutput(cli, args[0] ?? "", out);
}

/** As redisReply; an error reply fails with its text. */
export async function redisCommand(engine: Engine, container: string, kind: RedisLike, password: string, args: string[], signal: AbortSignal): Promise<string[]> {
  const r = await redisReply(engine, container, kind, password, args, signal);
  if (r.error) throw new BackupToolError(`${REDIS_CLI[kind]} ${args[0]}: ${r.error}`);
  return r.lines;
}

/**
 * Waits until the server has loaded its dataset (an authenticated PING answers PONG, not
 * LOADING). The health probe cannot tell: it has no password, and Redis checks authentication
 * before it checks loading, so a loading server answers the probe NOAUTH like a ready one.
 * Bounded by the signal (the job's deadline).
 */
export async function waitDatasetLoaded(
  engine: Engine,
  container: string,
  kind: RedisLike,
  password: string,
  opts: { pollMs: number },
  ctx: { signal: AbortSignal; progress(line: string): void },
): Promise<void> {
  let told = false;
  for (;;) {
    const r = await redisReply(engine, container, kind, password, ["PING"], ctx.signal);
    if (!r.error && r.lines[0] === "PONG") return;
    if (!r.error || !LOADING_REPLY.test(r.error)) throw new BackupToolError(`${REDIS_CLI[kind]} PING: ${r.error ?? JSON.stringify(r.lines.join(" "))}`);
    if (!told) ctx.progress(`${container} is loading its dataset; waiting`);
    told = true;
    await sleep(opts.pollMs, ctx.signal);
  }
}
