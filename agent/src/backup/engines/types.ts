import type { Readable } from "node:stream";
import type { DatabaseEngine, DbCredentials } from "@capstan/shared";
import type { Engine } from "../../docker/engine.js";
import type { DumpSource } from "../exec.js";

/** The database a dump or restore works on: its running container and credentials. */
export interface DbTarget {
  engine: Engine;
  /** container id */
  container: string;
  /** container name (the db uuid) */
  name: string;
  kind: DatabaseEngine;
  credentials: DbCredentials;
  signal: AbortSignal;
  progress(line: string): void;
  /** A private directory of the agent for temporary files (same filesystem as the backups). */
  workDir: string;
  /** How often a restarted container's health is polled. */
  pollMs: number;
}

/**
 * One engine's backup tool chain. `dump` streams the backup's plain bytes (before gzip);
 * `restore` consumes the plain bytes of a backup and must fail (throw) unless the database took
 * all of them. `abortInput`: bytes a restore appends when its input fails midway, so that the
 * tool rolls back instead of committing what it got (a clean EOF would look like success).
 */
export interface BackupDriver {
  dump(t: DbTarget): Promise<DumpSource>;
  restore(t: DbTarget, plain: Readable): Promise<void>;
  abortInput?: Buffer;
}
