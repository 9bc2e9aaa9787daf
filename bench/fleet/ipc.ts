import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { PerformanceObserver, constants as perfConstants } from "node:perf_hooks";

/**
 * Request/response over Node's IPC channel between the bench runner and its children
 * (control plane, bare socket.io server, load generators). Every call has a timeout, and
 * a child exits as soon as its parent goes away, so nothing outlives the bench.
 */

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

interface Request {
  id: number;
  cmd: string;
  args?: unknown;
}
type Response = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: string };
interface Event {
  event: string;
  data?: unknown;
}

// ---------------------------------------------------------------- child side

export type Handlers = Record<string, (args: any) => unknown>;

/** Serves the parent's commands; the child exits when the parent disconnects. */
export function serveParent(handlers: Handlers): void {
  const send = process.send?.bind(process);
  if (!send) {
    process.stderr.write("this script is a child of bench/fleet/run.ts (it needs an IPC channel); run `node --import tsx bench/fleet/run.ts`\n");
    process.exit(2);
  }
  process.on("message", (raw) => {
    const m = raw as Request;
    const h = handlers[m.cmd];
    Promise.resolve()
      .then(() => {
        if (!h) throw new Error(`unknown command ${m.cmd}`);
        return h(m.args);
      })
      .then(
        (result) => send({ id: m.id, ok: true, result } satisfies Response),
        (err: unknown) => send({ id: m.id, ok: false, error: err instanceof Error ? (err.stack ?? err.message) : String(err) } satisfies Response),
      );
  });
  process.on("disconnect", () => process.exit(0));
}

export function notifyParent(event: string, data?: unknown): Promise<void> {
  return new Promise((resolve) => {
    if (!process.send) return resolve();
    process.send({ event, data } satisfies Event, undefined, {}, () => resolve());
  });
}

// --------------------------------------------------------------- parent side

export interface ChildOptions {
  /** For messages: "control-plane", "loadgen-0", ... */
  name: string;
  script: string;
  env?: Record<string, string>;
  nodeArgs?: string[];
  /** RLIMIT_NOFILE of the child (set by a bash wrapper that then execs node). */
  fdLimit?: number;
  /** Run `script` through tsx (TypeScript); false for plain JS (the compiled server children). */
  tsx?: boolean;
}

export class Child {
  readonly proc: ChildProcess;
  readonly events = new EventEmitter();
  readonly exited: Promise<number | string | null>;
  private seq = 0;
  private readonly pending = new Map<number, { resolve(v: unknown): void; reject(e: Error): void; timer: NodeJS.Timeout }>();
  private exitInfo: string | null = null;

  constructor(readonly opts: ChildOptions) {
    const fd = opts.fdLimit ?? 65536;
    const node = [process.execPath, ...(opts.nodeArgs ?? []), ...(opts.tsx === false ? [] : ["--import", "tsx"]), opts.script];
    // `ulimit -n` raises the soft limit up to the hard one; root may raise the hard one too.
    const wrapper = `ulimit -n ${fd} 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"`;
    this.proc = spawn("bash", ["-c", wrapper, "bash", ...node], {
      cwd: REPO_ROOT,
      env: { ...process.env, ...opts.env },
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    });
    this.events.setMaxListeners(0);
    this.proc.on("message", (raw) => {
      const m = raw as Response | Event;
      if ("event" in m) {
        this.events.emit(m.event, m.data);
        return;
      }
      const p = this.pending.get(m.id);
      if (!p) return;
      this.pending.delete(m.id);
      clearTimeout(p.timer);
      if (m.ok) p.resolve(m.result);
      else p.reject(new Error(`${opts.name}: ${m.error}`));
    });
    this.exited = new Promise((resolve) => {
      this.proc.once("exit", (code, signal) => {
        this.exitInfo = signal ? `signal ${signal}` : `code ${code}`;
        for (const [id, p] of this.pending) {
          clearTimeout(p.timer);
          p.reject(new Error(`${opts.name} exited (${this.exitInfo}) during a call`));
          this.pending.delete(id);
        }
        this.events.emit("exit", this.exitInfo);
        resolve(signal ?? code);
      });
    });
  }

  get alive(): boolean {
    return this.exitInfo === null;
  }

  call<T = unknown>(cmd: string, args?: unknown, timeoutMs = 30_000): Promise<T> {
    if (!this.alive) return Promise.reject(new Error(`${this.opts.name} is not running (${this.exitInfo})`));
    const id = ++this.seq;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.opts.name}: "${cmd}" got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject, timer });
      this.proc.send({ id, cmd, args } satisfies Request);
    });
  }

  /** Resolves with the data of the next `event`; rejects on timeout or if the child exits first. */
  waitEvent<T = unknown>(event: string, timeoutMs: number): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onEvent = (data: T) => done(() => resolve(data));
      const onExit = (info: string) => done(() => reject(new Error(`${this.opts.name} exited (${info}) before "${event}"`)));
      const timer = setTimeout(() => done(() => reject(new Error(`${this.opts.name}: no "${event}" within ${timeoutMs} ms`))), timeoutMs);
      const done = (f: () => void) => {
        clearTimeout(timer);
        this.events.off(event, onEvent);
        this.events.off("exit", onExit);
        f();
      };
      if (!this.alive) return done(() => reject(new Error(`${this.opts.name} is not running (${this.exitInfo})`)));
      this.events.on(event, onEvent);
      this.events.on("exit", onExit);
    });
  }

  /** Kills this child (by its pid) and waits for it to exit, bounded. */
  async kill(signal: NodeJS.Signals = "SIGKILL", waitMs = 10_000): Promise<void> {
    if (!this.alive) return;
    this.proc.kill(signal);
    const t = new Promise<void>((r) => setTimeout(r, waitMs).unref());
    await Promise.race([this.exited, t]);
    if (this.alive && signal !== "SIGKILL") await this.kill("SIGKILL", waitMs);
  }
}

// ------------------------------------------------------------------ helpers

/** Runs fn `count` times with at most `concurrency` in flight. */
export async function pool(count: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  await poolFor({ min: count, minMs: 0, max: count }, concurrency, fn);
}

/**
 * Like pool, for a measured window: calls start until at least `min` have started and `minMs`
 * has passed, and never more than `max`. Returns how many ran. A window of fixed length gives
 * both servers the same share of their periodic work (engine.io's ping rounds, every 2.5 s);
 * a fixed count gives the slower server a longer window, so more of those rounds.
 */
export async function poolFor(bounds: { min: number; minMs: number; max: number }, concurrency: number, fn: (i: number) => Promise<void>): Promise<number> {
  const end = performance.now() + bounds.minMs;
  let next = 0;
  const more = () => next < bounds.max && (next < bounds.min || performance.now() < end);
  const workers = Array.from({ length: Math.max(1, Math.min(concurrency, bounds.max)) }, async () => {
    while (more()) {
      const i = next++;
      await fn(i);
    }
  });
  await Promise.all(workers);
  return next;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))]!;
}

export interface LatencySummary {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export function summarize(values: number[]): LatencySummary {
  const s = [...values].sort((a, b) => a - b);
  const mean = s.length ? s.reduce((a, b) => a + b, 0) / s.length : NaN;
  return { count: s.length, p50: percentile(s, 50), p90: percentile(s, 90), p99: percentile(s, 99), max: s[s.length - 1] ?? NaN, mean };
}

export interface MemorySample {
  heapUsed: number;
  heapTotal: number;
  external: number;
  arrayBuffers: number;
  rss: number;
}

/** Full GC (the process runs with --expose-gc), then process.memoryUsage(). */
export async function memoryAfterGc(): Promise<MemorySample> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error("run with --expose-gc");
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  const m = process.memoryUsage();
  return { heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, arrayBuffers: m.arrayBuffers, rss: m.rss };
}

/** CPU use of this process over `ms` of doing nothing on purpose (percent of one core), and the event-loop delay meanwhile. */
export async function idleCost(ms: number): Promise<{ cpuPercent: number; eventLoopP99: number; eventLoopMax: number }> {
  const { monitorEventLoopDelay } = await import("node:perf_hooks");
  const h = monitorEventLoopDelay({ resolution: 10 });
  h.enable();
  const c0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, ms));
  const c = process.cpuUsage(c0);
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  h.disable();
  return { cpuPercent: (100 * (c.user + c.system)) / wallUs, eventLoopP99: h.percentile(99) / 1e6, eventLoopMax: h.max / 1e6 };
}

export interface Stall {
  /** Date.now() when the stall ended */
  at: number;
  /** how late a 250 ms timer fired (ms) */
  lateMs: number;
}

/**
 * Records every time this process's event loop was blocked for more than `thresholdMs`
 * (a 250 ms timer firing that much late): which process stalls, when, for how long.
 */
export function watchStalls(thresholdMs = 2000): () => Stall[] {
  const stalls: Stall[] = [];
  let expected = Date.now() + 250;
  const timer = setInterval(() => {
    const now = Date.now();
    const late = now - expected;
    if (late > thresholdMs && stalls.length < 1000) stalls.push({ at: now, lateMs: late });
    expected = now + 250;
  }, 250);
  timer.unref();
  return () => stalls;
}

export interface GcPauses {
  /** By kind (minor = scavenge, major = mark-compact, incremental = marking steps, weakcb): count, total and longest pause. */
  [kind: string]: { count: number; totalMs: number; maxMs: number };
}

/**
 * The garbage collector's pauses in this process from start() to stop(): a round-trip phase's
 * p99 in a process holding N sockets can be one major GC, which the event-loop delay shows
 * only as a pause with no cause.
 */
export function gcPauses(): { start(): void; stop(): GcPauses } {
  const kinds: Record<number, string> = {
    [perfConstants.NODE_PERFORMANCE_GC_MINOR]: "minor",
    [perfConstants.NODE_PERFORMANCE_GC_MAJOR]: "major",
    [perfConstants.NODE_PERFORMANCE_GC_INCREMENTAL]: "incremental",
    [perfConstants.NODE_PERFORMANCE_GC_WEAKCB]: "weakcb",
  };
  let pauses: GcPauses = {};
  const tally = (entries: { duration: number; detail?: unknown }[]) => {
    for (const e of entries) {
      const kind = kinds[(e.detail as { kind?: number } | undefined)?.kind ?? -1] ?? "other";
      const p = (pauses[kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
      p.count++;
      p.totalMs += e.duration;
      p.maxMs = Math.max(p.maxMs, e.duration);
    }
  };
  const observer = new PerformanceObserver((list) => tally(list.getEntries()));
  return {
    start() {
      pauses = {};
      observer.observe({ entryTypes: ["gc"] });
    },
    stop() {
      // Entries are delivered asynchronously: take those still buffered.
      tally(observer.takeRecords());
      observer.disconnect();
      return pauses;
    },
  };
}
