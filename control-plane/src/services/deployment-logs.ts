import type { SqlReader } from "../db/reader.js";
import { toInt } from "../db/reader.js";
import type { JobQueue } from "../jobs/queue.js";

/**
 * The last characters sent, looked for in the log once it is at its cap (and trimmed at the
 * front as output arrives) to tell where new output starts.
 */
const ANCHOR = 1024;
/** At the cap, the anchor is first looked for in this much of the log's end. */
const TAIL_WINDOW = 64 * 1024;
const POLL_MS = 1000;

export interface FollowOptions {
  reader: SqlReader;
  jobs: JobQueue;
  /** Status and job of the deployment, read fresh. */
  state(): Promise<{ status: string; jobId: string | null } | null>;
  /** New output, whole lines ending in "\n". */
  send(text: string): void;
  /** Output was dropped between two reads (the log reached its cap faster than it was read). */
  gap(): void;
  signal: AbortSignal;
  maxMs: number;
  /** The log's cap (jobs/queue.ts): below it the log only grows, so a position in it is exact. */
  capChars: number;
  pollMs?: number;
}

export type FollowEnd = { ended: true; status: string } | { ended: false; reason: "timeout" | "aborted" | "gone" };

/**
 * Follows a deployment's log: what is stored first, then new output until the deployment
 * ends. The job row is polled (so output stored by another replica arrives too); progress
 * stored by this replica wakes the poll at once.
 *
 * Below its cap a log only grows, so each poll reads exactly what follows the last position.
 * At the cap every append drops as much from the front, so the length no longer moves: the
 * follower then finds the end of what it sent (its last 1 KiB) in the log's last 64 KiB, or in
 * the whole log, and sends what follows. When that end was dropped too, it says so (gap) and
 * sends the whole log.
 */
export async function followDeploymentLog(o: FollowOptions): Promise<FollowEnd> {
  const deadline = Date.now() + o.maxMs;
  let sent = 0;
  let anchor = "";
  let subscribed: string | null = null;
  let unsubscribe: (() => void) | null = null;
  let wake: (() => void) | null = null;

  const tailFrom = async (jobId: string, from: number) => {
    const [row] = await o.reader.all<{ n: unknown; tail: string | null }>(
      `SELECT length("log") AS "n", substr("log", ?) AS "tail" FROM "Job" WHERE "id" = ?`,
      [from, jobId],
    );
    return row ? { n: toInt(row.n), tail: row.tail ?? "" } : null;
  };

  const emit = (n: number, fresh: string) => {
    sent = n;
    // The log now ends with what was sent: its last characters (never more than the log holds).
    anchor = n > 0 ? (anchor + fresh).slice(-Math.min(ANCHOR, n)) : "";
    if (fresh) o.send(fresh);
  };

  const read = async (jobId: string): Promise<void> => {
    if (sent < o.capChars) {
      const row = await tailFrom(jobId, sent + 1);
      if (!row) return;
      // Below the cap (or nothing sent yet): what follows the position is exactly what is new.
      if (row.n < o.capChars || sent === 0) return emit(row.n, row.tail);
    }
    // At the cap: the front moves as output arrives.
    const after = (text: string) => {
      const at = text.lastIndexOf(anchor);
      return at >= 0 ? text.slice(at + anchor.length) : null;
    };
    const end = await tailFrom(jobId, Math.max(1, o.capChars - TAIL_WINDOW + 1));
    if (!end) return;
    const fresh = after(end.tail);
    if (fresh !== null) return emit(end.n, fresh);
    const whole = await tailFrom(jobId, 1);
    if (!whole) return;
    const found = after(whole.tail);
    if (found !== null) return emit(whole.n, found);
    o.gap();
    emit(whole.n, whole.tail);
  };

  try {
    for (;;) {
      if (o.signal.aborted) return { ended: false, reason: "aborted" };
      const state = await o.state();
      if (!state) return { ended: false, reason: "gone" };
      if (state.jobId && subscribed !== state.jobId) {
        // A deployment built on a build server moves to its deploy job, whose log begins
        // with the build job's: the position carries over.
        unsubscribe?.();
        subscribed = state.jobId;
        unsubscribe = o.jobs.onProgress(state.jobId, () => wake?.());
      }
      if (state.jobId) await read(state.jobId);
      if (state.status !== "queued" && state.status !== "in_progress") return { ended: true, status: state.status };
      const left = deadline - Date.now();
      if (left <= 0) return { ended: false, reason: "timeout" };
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          o.signal.removeEventListener("abort", done);
          wake = null;
          resolve();
        };
        const timer = setTimeout(done, Math.min(o.pollMs ?? POLL_MS, left));
        o.signal.addEventListener("abort", done);
        wake = done;
      });
    }
  } finally {
    unsubscribe?.();
  }
}
