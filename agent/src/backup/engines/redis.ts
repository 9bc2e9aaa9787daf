import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { open, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { engineRuntime } from "../../databases/engines.js";
import { waitHealthy } from "../../databases/health.js";
import { DB_STOP_TIMEOUT_S } from "../../databases/spec.js";
import { sleep } from "../../sleep.js";
import { BackupToolError, execCollect, type DumpSource } from "../exec.js";
import { firstFile, readTar, singleFileTarStream } from "../tar.js";
import type { BackupDriver, DbTarget } from "./types.js";

/**
 * Redis, KeyDB, Dragonfly: the server's own RDB snapshot.
 *
 * Backup: BGSAVE (the server forks; clients are not blocked), wait until LASTSAVE moves past its
 * value from before and no save runs, check the save's status, then stream `<dir>/<dbfilename>`
 * out of the container (the engine's archive API; a later save replaces the file by rename, so
 * the open file stays one consistent snapshot).
 *
 * Restore: the RDB is decrypted and decompressed into a private temp file on the agent first
 * (checked whole: a wrong passphrase or a damaged file fails before the database is touched),
 * then the container is stopped, the file is put in place of `<dir>/<dbfilename>` (owned like
 * the data directory, mode 600), and the container is started and waited for until healthy:
 * the server loads the RDB at start. A server with appendonly on would load its AOF instead,
 * so the restore refuses it with that reason.
 *
 * The password reaches redis-cli / keydb-cli through REDISCLI_AUTH (the exec's environment).
 * Dragonfly behaves the same when it writes RDB files under a fixed name (its flags
 * `--df_snapshot_format=false --dbfilename=dump`, e.g. DFLY_df_snapshot_format / DFLY_dbfilename);
 * with its default `dump-{timestamp}` names the backup fails and says so.
 */
const CLI = { redis: "redis-cli", keydb: "keydb-cli", dragonfly: "redis-cli" } as const;
type RedisKind = keyof typeof CLI;

const ERROR_REPLY = /^(\(error\) )?(ERR|NOAUTH|WRONGPASS|NOPERM|LOADING|MISCONF|BUSY|READONLY|EXECABORT|WRONGTYPE)\b/;
const SAVE_WAIT_POLL_MS = 200;

function cliOf(t: DbTarget): string {
  if (!(t.kind in CLI)) throw new BackupToolError(`${t.kind} is not a Redis-like engine`);
  return CLI[t.kind as RedisKind];
}

/** One command through the engine's CLI; its reply lines. A server error reply fails with its text. */
async function command(t: DbTarget, ...args: string[]): Promise<string[]> {
  const cli = cliOf(t);
  const out = await execCollect(t.engine, t.container, { cmd: [cli, "-h", "127.0.0.1", "-p", "6379", ...args], env: { REDISCLI_AUTH: t.credentials.password } }, t.signal);
  const lines = out.replace(/\r/g, "").split("\n").filter((l, i, all) => l !== "" || i < all.length - 1);
  if (lines[0] !== undefined && ERROR_REPLY.test(lines[0])) throw new BackupToolError(`${cli} ${args[0]}: ${lines[0]}`);
  return lines;
}

async function integer(t: DbTarget, ...args: string[]): Promise<number> {
  const [first] = await command(t, ...args);
  const n = Number(first?.replace(/^\(integer\) /, ""));
  if (!Number.isFinite(n)) throw new BackupToolError(`${args[0]} answered ${JSON.stringify(first)} instead of a number`);
  return n;
}

async function configValue(t: DbTarget, key: string): Promise<string> {
  const lines = await command(t, "CONFIG", "GET", key);
  const i = lines.indexOf(key);
  const value = i >= 0 ? lines[i + 1] : undefined;
  if (value === undefined) throw new BackupToolError(`CONFIG GET ${key} gave no value`);
  return value;
}

function info(lines: string[]): Record<string, string> {
  return Object.fromEntries(lines.filter((l) => l.includes(":") && !l.startsWith("#")).map((l) => [l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trim()]));
}

/** Where the server keeps its RDB file. */
async function rdbLocation(t: DbTarget): Promise<{ dir: string; file: string }> {
  const dir = await configValue(t, "dir");
  const file = await configValue(t, "dbfilename");
  if (file.includes("{timestamp}")) {
    throw new BackupToolError(
      `the server names its snapshots ${file} (Dragonfly's default); RDB backups need a fixed name: run it with --df_snapshot_format=false --dbfilename=dump`,
    );
  }
  if (!dir.startsWith("/") || file.includes("/") || !file) throw new BackupToolError(`unexpected RDB location ${dir} / ${file}`);
  return { dir, file };
}

/** A fresh snapshot on disk: BGSAVE and wait for it (bounded by the job's deadline through its signal). */
async function snapshot(t: DbTarget): Promise<void> {
  const before = await integer(t, "LASTSAVE");
  // LASTSAVE counts seconds: start the save in a later second than the previous one, by the server's clock.
  const [now] = await command(t, "TIME");
  const wait = before - Number(now) + 1;
  if (wait > 0) await sleep(Math.min(wait, 5) * 1000, t.signal);
  const reply = (await command(t, "BGSAVE")).join(" ");
  t.progress(`${cliOf(t)} BGSAVE: ${reply}`);
  let requested = !/in progress/i.test(reply);
  for (;;) {
    await sleep(SAVE_WAIT_POLL_MS, t.signal);
    const persistence = info(await command(t, "INFO", "persistence"));
    if (persistence.rdb_bgsave_in_progress === "1") continue;
    if (!requested) {
      // Another save was running when we asked; ask again now that it ended.
      const again = (await command(t, "BGSAVE")).join(" ");
      requested = !/in progress/i.test(again);
      continue;
    }
    if (persistence.rdb_last_bgsave_status && persistence.rdb_last_bgsave_status !== "ok") {
      throw new BackupToolError(`the server's BGSAVE failed (rdb_last_bgsave_status ${persistence.rdb_last_bgsave_status}); see the database's logs`);
    }
    if ((await integer(t, "LASTSAVE")) > before) return;
  }
}

async function dump(t: DbTarget): Promise<DumpSource> {
  const { dir, file } = await rdbLocation(t);
  await snapshot(t);
  const candidates = [file, ...(file.includes(".") ? [] : [`${file}.rdb`])];
  let lastErr: unknown = null;
  for (const name of candidates) {
    let archive: NodeJS.ReadableStream;
    try {
      archive = await t.engine.getArchive(t.container, `${dir}/${name}`, t.signal);
    } catch (err) {
      lastErr = err;
      continue;
    }
    const entry = await firstFile(archive as AsyncIterable<Buffer>);
    if (!entry) throw new BackupToolError(`the archive of ${dir}/${name} holds no file`);
    t.progress(`RDB snapshot ${dir}/${name}: ${entry.header.size} bytes`);
    const expected = entry.header.size;
    let seen = 0;
    const stream = Readable.from(
      (async function* () {
        for await (const chunk of entry.body) {
          seen += chunk.length;
          yield chunk;
        }
      })(),
    );
    return {
      stream,
      finished: async () => {
        if (seen !== expected) throw new BackupToolError(`the RDB file ended after ${seen} of ${expected} bytes`);
      },
    };
  }
  throw new BackupToolError(`the RDB file is not in the container after BGSAVE: ${(lastErr as Error)?.message ?? "not found"}`);
}

/** The owner of the data directory (the server's user): the restored file gets it. */
async function dataDirOwner(t: DbTarget, dir: string): Promise<{ uid: number; gid: number }> {
  const archive = await t.engine.getArchive(t.container, dir, t.signal);
  for await (const entry of readTar(archive as AsyncIterable<Buffer>)) {
    const owner = { uid: entry.header.uid, gid: entry.header.gid };
    (archive as unknown as { destroy?: () => void }).destroy?.();
    return owner;
  }
  throw new BackupToolError(`cannot read the owner of ${dir}`);
}

async function restore(t: DbTarget, plain: Readable): Promise<void> {
  const { dir, file } = await rdbLocation(t);
  if ((await configValue(t, "appendonly")) === "yes") {
    throw new BackupToolError("the server runs with appendonly yes: at start it would load its AOF, not the restored RDB; turn appendonly off to restore");
  }
  const owner = await dataDirOwner(t, dir);
  const tmp = join(t.workDir, `.restore-${randomBytes(6).toString("hex")}.rdb`);
  try {
    await pipeline(plain, createWriteStream(tmp, { mode: 0o600, flags: "wx" }), { signal: t.signal });
    const head = Buffer.alloc(5);
    const fh = await open(tmp, "r");
    try {
      await fh.read(head, 0, 5, 0);
    } finally {
      await fh.close();
    }
    if (head.toString("latin1") !== "REDIS") throw new BackupToolError("the backup is not an RDB file (it does not start with REDIS)");
    const { size } = await stat(tmp);
    t.progress(`RDB file of ${size} bytes ready; stopping ${t.name} to put it in place`);
    await t.engine.stopContainer(t.container, DB_STOP_TIMEOUT_S, t.signal);
    try {
      const tar = Readable.from(singleFileTarStream(file, size, createReadStream(tmp), { mode: 0o600, ...owner }));
      await t.engine.putArchive(t.container, dir, tar, t.signal);
    } finally {
      // Started again whatever happened: a failed restore must not leave the database down.
      await t.engine.startContainer(t.container, AbortSignal.timeout(60_000));
    }
    const runtime = engineRuntime(t.kind, t.credentials);
    await waitHealthy(t.engine, t.name, runtime, { pollMs: t.pollMs }, t);
    t.progress(`${t.name} is healthy with the restored data`);
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

export const redisDriver: BackupDriver = { dump, restore };
