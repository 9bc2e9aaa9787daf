import type { Readable } from "node:stream";
import type { Engine, ExecOutcome, ExecSpec } from "../docker/engine.js";

/** A dump or restore tool that failed; the message carries its exit code and stderr. */
export class BackupToolError extends Error {
  override name = "BackupToolError";
}

const REASON_CHARS = 2000;

/** `pg_dump failed (exit code 1): pg_dump: error: ...` — the tool's own words are the reason. */
export function toolFailure(tool: string, o: ExecOutcome): BackupToolError {
  const text = o.stderr.trim();
  const tail = text.length > REASON_CHARS ? `…${text.slice(-REASON_CHARS)}` : text;
  const code = o.exitCode === null ? "no exit code" : `exit code ${o.exitCode}`;
  return new BackupToolError(`${tool} failed (${code})${tail ? `: ${tail}` : " and wrote nothing to stderr"}`);
}

/** Throws unless the tool exited 0. */
export function assertSuccess(tool: string, o: ExecOutcome): void {
  if (o.exitCode !== 0) throw toolFailure(tool, o);
}

/** A dump's output stream and the check of how its tool ended (call after the stream was read to its end). */
export interface DumpSource {
  stream: Readable;
  finished(): Promise<void>;
}

/** Starts a dump tool whose stdout is the backup. */
export async function execDump(engine: Engine, container: string, spec: ExecSpec, signal: AbortSignal): Promise<DumpSource> {
  const tool = spec.cmd[0]!;
  const s = await engine.execStream(container, spec, signal);
  return {
    stream: s.stdout,
    finished: async () => assertSuccess(tool, await s.done),
  };
}

/** Runs a short command and returns its stdout (bounded); throws with its stderr unless it exited 0. */
export async function execCollect(engine: Engine, container: string, spec: ExecSpec, signal: AbortSignal, maxBytes = 1024 * 1024): Promise<string> {
  const s = await engine.execStream(container, spec, signal);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of s.stdout as AsyncIterable<Buffer>) {
    if (size + chunk.length > maxBytes) {
      s.stdout.destroy();
      throw new BackupToolError(`${spec.cmd[0]} wrote more than ${maxBytes} bytes where a short answer was expected`);
    }
    chunks.push(chunk);
    size += chunk.length;
  }
  assertSuccess(spec.cmd[0]!, await s.done);
  return Buffer.concat(chunks).toString("utf8");
}

/**
 * Feeds `input` into a restore tool's stdin; its stdout is read and dropped (only the newest few
 * KiB are kept, for the reason when it fails without stderr). Throws unless it exited 0.
 */
export async function execFeed(engine: Engine, container: string, spec: ExecSpec, input: Readable, signal: AbortSignal): Promise<void> {
  const tool = spec.cmd[0]!;
  const s = await engine.execStream(container, { ...spec, stdin: input }, signal);
  let tail = "";
  for await (const chunk of s.stdout as AsyncIterable<Buffer>) tail = (tail + chunk.toString("utf8")).slice(-4096);
  const outcome = await s.done;
  if (outcome.exitCode !== 0 && !outcome.stderr.trim() && tail.trim()) throw toolFailure(tool, { ...outcome, stderr: tail });
  assertSuccess(tool, outcome);
}
