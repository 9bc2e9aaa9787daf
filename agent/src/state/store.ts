import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { JobOutcome, VolumeName } from "@capstan/shared";
import { errorMessage, type Logger, silentLogger } from "../log.js";
import { TMP_SUFFIX, writeFileAtomic } from "./atomic.js";

/**
 * What survives an agent restart, in CAPSTAN_AGENT_STATE_DIR:
 *
 *   outcomes/<key>.json   one file per finished job: {v:1, outcome, acked, finished_at, acked_at}
 *                         <key> is the job id when it is [A-Za-z0-9_-]{1,64}, else "~" + sha256(id).
 *                         Unacked ones are re-sent after a restart; acked ones are kept (the
 *                         newest KEEP_ACKED) so a redelivered job is answered without rerunning.
 *   stood-down.json       {v:1, token_sha256, reason, at}: the control plane told this agent to
 *                         stop; it refuses to start again with the same token.
 *   proxy.json            {v:1, name}: the proxy container the last sync was told to use, so a
 *                         restarted agent reports that proxy before its first sync, even on an
 *                         engine that holds other platform-labelled proxies.
 *
 * Every write is atomic (temp file + fsync + rename); files are mode 0600, directories 0700.
 */
export const StoredOutcome = z.object({
  v: z.literal(1),
  outcome: JobOutcome,
  acked: z.boolean(),
  finished_at: z.string(),
  acked_at: z.string().nullable(),
});
export type StoredOutcome = z.infer<typeof StoredOutcome>;

export const StandDownMarker = z.object({
  v: z.literal(1),
  token_sha256: z.string(),
  reason: z.string(),
  at: z.string(),
});
export type StandDownMarker = z.infer<typeof StandDownMarker>;

export const KnownProxy = z.object({ v: z.literal(1), name: VolumeName });
export type KnownProxy = z.infer<typeof KnownProxy>;

export const KEEP_ACKED = 500;
const SAFE_ID = /^[A-Za-z0-9_-]{1,64}$/;

export function outcomeFileKey(jobId: string): string {
  return SAFE_ID.test(jobId) ? jobId : "~" + sha256(jobId);
}

export function sha256(s: string): string {
  return createHash("sha256").update(s).digest("hex");
}

export interface StateStoreOptions {
  keepAcked?: number;
  log?: Logger;
  now?: () => Date;
}

export class StateStore {
  private readonly outcomes = new Map<string, StoredOutcome>();
  /** Per-file write chains: two writes of one file land in the order they were made. */
  private readonly writes = new Map<string, Promise<void>>();
  private readonly keepAcked: number;
  private readonly log: Logger;
  private readonly now: () => Date;
  private marker: StandDownMarker | null = null;
  private knownProxy: string | null = null;

  private constructor(
    readonly dir: string,
    opts: StateStoreOptions,
  ) {
    this.keepAcked = opts.keepAcked ?? KEEP_ACKED;
    this.log = opts.log ?? silentLogger;
    this.now = opts.now ?? (() => new Date());
  }

  /** Creates the directory layout if needed and loads what a previous run left. */
  static async open(dir: string, opts: StateStoreOptions = {}): Promise<StateStore> {
    const store = new StateStore(dir, opts);
    await mkdir(store.outcomesDir, { recursive: true, mode: 0o700 });
    await store.load();
    return store;
  }

  private get outcomesDir(): string {
    return join(this.dir, "outcomes");
  }
  private get markerFile(): string {
    return join(this.dir, "stood-down.json");
  }
  private get proxyFile(): string {
    return join(this.dir, "proxy.json");
  }
  private outcomeFile(jobId: string): string {
    return join(this.outcomesDir, outcomeFileKey(jobId) + ".json");
  }

  private async load(): Promise<void> {
    for (const name of await readdir(this.outcomesDir)) {
      const file = join(this.outcomesDir, name);
      if (name.endsWith(TMP_SUFFIX)) {
        await rm(file, { force: true }); // left by a crash mid-write; the target is intact
        continue;
      }
      if (!name.endsWith(".json")) continue;
      try {
        const stored = StoredOutcome.parse(JSON.parse(await readFile(file, "utf8")));
        if (outcomeFileKey(stored.outcome.id) + ".json" !== name) throw new Error("file name does not match job id");
        this.outcomes.set(stored.outcome.id, stored);
      } catch (err) {
        this.log.warn("ignoring unreadable outcome file", { file, err: errorMessage(err) });
      }
    }
    try {
      this.marker = StandDownMarker.parse(JSON.parse(await readFile(this.markerFile, "utf8")));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.log.warn("ignoring unreadable stand-down marker", { file: this.markerFile, err: errorMessage(err) });
      }
      this.marker = null;
    }
    try {
      this.knownProxy = KnownProxy.parse(JSON.parse(await readFile(this.proxyFile, "utf8"))).name;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
        this.log.warn("ignoring unreadable proxy name file", { file: this.proxyFile, err: errorMessage(err) });
      }
    }
    await this.prune();
  }

  getOutcome(jobId: string): StoredOutcome | undefined {
    return this.outcomes.get(jobId);
  }

  /** Outcomes the control plane has not acknowledged yet, oldest first. */
  pending(): StoredOutcome[] {
    return [...this.outcomes.values()]
      .filter((o) => !o.acked)
      .sort((a, b) => a.finished_at.localeCompare(b.finished_at));
  }

  size(): number {
    return this.outcomes.size;
  }

  /**
   * Records an outcome as not yet acknowledged (new, or re-sent for a redelivery with a new
   * attempt). The in-memory index changes synchronously, so a redelivery arriving while the
   * file is being written already finds it; the returned promise resolves once it is on disk.
   */
  putOutcome(outcome: JobOutcome): Promise<void> {
    const previous = this.outcomes.get(outcome.id);
    const stored: StoredOutcome = {
      v: 1,
      outcome,
      acked: false,
      finished_at: previous?.finished_at ?? this.now().toISOString(),
      acked_at: null,
    };
    this.outcomes.set(outcome.id, stored);
    return this.persist(outcome.id);
  }

  /**
   * Marks an outcome acknowledged, but only if the acknowledged send is still the current one
   * (same attempt): an ack for attempt 1 must not silence the re-send for attempt 2.
   */
  async markAcked(jobId: string, attempt: number): Promise<boolean> {
    const stored = this.outcomes.get(jobId);
    if (!stored || stored.acked || stored.outcome.attempt !== attempt) return false;
    stored.acked = true;
    stored.acked_at = this.now().toISOString();
    await this.persist(jobId);
    await this.prune();
    return true;
  }

  /** Drops the oldest acknowledged outcomes beyond keepAcked. */
  private async prune(): Promise<void> {
    const acked = [...this.outcomes.values()].filter((o) => o.acked);
    if (acked.length <= this.keepAcked) return;
    acked.sort((a, b) => (a.acked_at ?? a.finished_at).localeCompare(b.acked_at ?? b.finished_at));
    for (const old of acked.slice(0, acked.length - this.keepAcked)) {
      const id = old.outcome.id;
      this.outcomes.delete(id);
      await this.chain(this.outcomeFile(id), () => rm(this.outcomeFile(id), { force: true }));
    }
  }

  private persist(jobId: string): Promise<void> {
    return this.chain(this.outcomeFile(jobId), async () => {
      const current = this.outcomes.get(jobId);
      if (!current) return; // pruned meanwhile
      await writeFileAtomic(this.outcomeFile(jobId), JSON.stringify(current));
    });
  }

  private chain(file: string, op: () => Promise<void>): Promise<void> {
    const prev = this.writes.get(file) ?? Promise.resolve();
    const next = prev.catch(() => {}).then(op);
    this.writes.set(file, next);
    const cleanup = () => {
      if (this.writes.get(file) === next) this.writes.delete(file);
    };
    next.then(cleanup, cleanup);
    return next;
  }

  /** Waits for every write started so far. */
  async flush(): Promise<void> {
    await Promise.allSettled([...this.writes.values()]);
  }

  standDownMarker(): StandDownMarker | null {
    return this.marker;
  }

  /** True when the marker was written for this very token (a new token clears it). */
  isStoodDown(token: string): boolean {
    return this.marker !== null && this.marker.token_sha256 === sha256(token);
  }

  async writeStandDown(token: string, reason: string): Promise<void> {
    const marker: StandDownMarker = { v: 1, token_sha256: sha256(token), reason, at: this.now().toISOString() };
    await writeFileAtomic(this.markerFile, JSON.stringify(marker));
    this.marker = marker;
  }

  async clearStandDown(): Promise<void> {
    await rm(this.markerFile, { force: true });
    this.marker = null;
  }

  /** The proxy container name the last sync used (proxy.json), or null before any. */
  proxyName(): string | null {
    return this.knownProxy;
  }

  /** Records the proxy name a sync was given; the same name again writes nothing. */
  writeProxyName(name: string): Promise<void> {
    if (name === this.knownProxy) return Promise.resolve();
    const parsed = KnownProxy.safeParse({ v: 1, name });
    if (!parsed.success) return Promise.reject(new Error(`not a container name: ${JSON.stringify(name).slice(0, 80)}`));
    const record: KnownProxy = parsed.data;
    this.knownProxy = name;
    return this.chain(this.proxyFile, () => writeFileAtomic(this.proxyFile, JSON.stringify(record)));
  }
}
