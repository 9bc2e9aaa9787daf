import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { open, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { dirOwner, type FileOwner, releaseArchive } from "../../databases/container-files.js";
import { engineRuntime } from "../../databases/engines.js";
import { waitHealthy } from "../../databases/health.js";
import { isRedisLike, REDIS_CLI, type RedisLike, redisCommand, waitDatasetLoaded } from "../../databases/redis-cli.js";
import { DB_STOP_TIMEOUT_S } from "../../databases/spec.js";
import { isNotFound } from "../../docker/engine.js";
import { sleep } from "../../sleep.js";
import { BackupToolError, type DumpSource } from "../exec.js";
import { firstFile, singleFileTarStream } from "../tar.js";
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
 * then the container is stopped, its current RDB (the one written at shutdown) is kept in a
 * second temp file, the new file is put in place of `<dir>/<dbfilename>` (owned like the data
 * directory, mode 600), and the container is started and waited for until healthy and loaded:
 * the server loads the RDB at start. The engine's archive API replaces the file in place, so a
 * copy cut short would leave a truncated RDB the server refuses to start with: once the copy
 * began it is no longer stopped by a cancel or the job's deadline (it has its own bound), and
 * when it fails the kept RDB is put back, so the database comes back with its old data.
 * A server with appendonly on would load its AOF instead, so the restore refuses it.
 *
 * Commands reach the server through redis-cli / keydb-cli with AUTH on stdin (redis-cli.ts).
 * Dragonfly behaves the same when it writes RDB files under a fixed name (its flags
 * `--df_snapshot_format=false --dbfilename=dump`, e.g. DFLY_df_snapshot_format / DFLY_dbfilename);
 * with its default `dump-{timestamp}` names the backup fails and says so.
 */
const SAVE_WAIT_POLL_MS = 200;

function kindOf(t: DbTarget): RedisLike {
  if (!isRedisLike(t.kind)) throw new BackupToolError(`${t.kind} is not a Redis-like engine`);
  return t.kind;
}

const cliOf = (t: DbTarget) => REDIS_CLI[kindOf(t)];

/** One command through the engine's CLI; its reply lines. A server error reply fails with its text. */
const command = (t: DbTarget, ...args: string[]) => redisCommand(t.engine, t.container, kindOf(t), t.credentials.password, args, t.signal);

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
    return rdbSource(t, archive, `${dir}/${name}`);
  }
  throw new BackupToolError(`the RDB file is not in the container after BGSAVE: ${(lastErr as Error)?.message ?? "not found"}`);
}

/**
 * The RDB file out of the engine's archive of it. The archive holds a connection to the engine:
 * it is closed with the returned stream, however that ends. `finished` blames the file only when
 * it ended by itself short of its size; when the consumer tore the stream down (disk full,
 * encryption failed, cancel), the consumer's reason is the one to report.
 */
async function rdbSource(t: DbTarget, archive: NodeJS.ReadableStream, path: string): Promise<DumpSource> {
  let entry: Awaited<ReturnType<typeof firstFile>>;
  try {
    entry = await firstFile(archive as AsyncIterable<Buffer>);
    if (!entry) throw new BackupToolError(`the archive of ${path} holds no file`);
  } catch (err) {
    releaseArchive(archive);
    throw err;
  }
  const body = entry.body;
  const expected = entry.header.size;
  t.progress(`RDB snapshot ${path}: ${expected} bytes`);
  let seen = 0;
  let endedByItself = false;
  const stream = Readable.from(
    (async function* () {
      for await (const chunk of body) {
        seen += chunk.length;
        yield chunk;
      }
      endedByItself = true;
    })(),
  );
  stream.once("close", () => releaseArchive(archive));
  return {
    stream,
    finished: async () => {
      if (!endedByItself || t.signal.aborted) return;
      if (seen !== expected) throw new BackupToolError(`the RDB file ended after ${seen} of ${expected} bytes`);
    },
  };
}

/** A bound on copying `size` bytes into the container (at least 1 MiB/s): the job's signal no longer stops it. */
const copyTimeoutMs = (size: number) => 60_000 + Math.ceil(size / (1024 * 1024)) * 1000;

interface LocalRdb {
  path: string;
  size: number;
  owner: FileOwner;
}

/** `<dir>/<file>` of the stopped container into a private local file; null when there is none. */
async function keepCurrentRdb(t: DbTarget, dir: string, file: string, path: string): Promise<LocalRdb | null> {
  let archive: NodeJS.ReadableStream;
  try {
    archive = await t.engine.getArchive(t.container, `${dir}/${file}`, t.signal);
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
  try {
    const entry = await firstFile(archive as AsyncIterable<Buffer>);
    if (!entry) return null;
    await pipeline(entry.body, createWriteStream(path, { mode: 0o600, flags: "wx" }), { signal: t.signal });
    return { path, size: entry.header.size, owner: { uid: entry.header.uid, gid: entry.header.gid } };
  } finally {
    releaseArchive(archive);
  }
}

/** Puts a local RDB file in place of `<dir>/<file>` with its own deadline, never the job's signal. */
async function putRdb(t: DbTarget, dir: string, file: string, rdb: LocalRdb): Promise<void> {
  const tar = Readable.from(singleFileTarStream(file, rdb.size, createReadStream(rdb.path), { mode: 0o600, ...rdb.owner }));
  await t.engine.putArchive(t.container, dir, tar, AbortSignal.timeout(copyTimeoutMs(rdb.size)));
}

/** The new RDB in place; when that fails, the kept one back in place (the reason says which happened). */
async function replaceRdb(t: DbTarget, dir: string, file: string, next: LocalRdb, previous: LocalRdb | null): Promise<void> {
  try {
    await putRdb(t, dir, file, next);
    return;
  } catch (err) {
    const why = (err as Error).message;
    if (!previous) throw new BackupToolError(`copying the RDB file into the container failed (${why}); the server had no RDB file before, so nothing was put back`);
    try {
      await putRdb(t, dir, file, previous);
    } catch (backErr) {
      throw new BackupToolError(`copying the RDB file into the container failed (${why}), and putting the previous RDB file back failed too (${(backErr as Error).message})`);
    }
    throw new BackupToolError(`copying the RDB file into the container failed (${why}); the previous RDB file was put back`);
  }
}

async function restore(t: DbTarget, plain: Readable): Promise<void> {
  const kind = kindOf(t);
  const { dir, file } = await rdbLocation(t);
  if ((await configValue(t, "appendonly")) === "yes") {
    throw new BackupToolError("the server runs with appendonly yes: at start it would load its AOF, not the restored RDB; turn appendonly off to restore");
  }
  const owner = await dirOwner(t.engine, t.container, dir, t.signal);
  const id = randomBytes(6).toString("hex");
  const tmp = join(t.workDir, `.restore-${id}.rdb`);
  const kept = join(t.workDir, `.previous-${id}.rdb`);
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
    let failed = false;
    try {
      await t.engine.stopContainer(t.container, DB_STOP_TIMEOUT_S, t.signal);
      const previous = await keepCurrentRdb(t, dir, file, kept);
      // The last moment a cancel or the deadline stops the restore with nothing changed.
      t.signal.throwIfAborted();
      await replaceRdb(t, dir, file, { path: tmp, size, owner }, previous);
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      // Started again whatever happened (also when the stop was cut short: the engine may have
      // stopped it anyway): a failed restore must not leave the database down.
      await t.engine.startContainer(t.container, AbortSignal.timeout(60_000)).catch((err: unknown) => {
        if (!failed) throw err;
        t.progress(`could not start ${t.name} again: ${(err as Error).message}`);
      });
    }
    const runtime = engineRuntime(t.kind, t.credentials);
    await waitHealthy(t.engine, t.name, runtime, { pollMs: t.pollMs }, t);
    await waitDatasetLoaded(t.engine, t.container, kind, t.credentials.password, { pollMs: t.pollMs }, t);
    t.progress(`${t.name} is healthy with the restored data`);
  } finally {
    await unlink(tmp).catch(() => undefined);
    await unlink(kept).catch(() => undefined);
  }
}

export const redisDriver: BackupDriver = { dump, restore };
