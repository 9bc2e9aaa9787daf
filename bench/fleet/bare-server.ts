/**
 * Baseline: a bare socket.io server (no auth, no database) with the gateway's engine
 * settings, in its own process. The load generators connect the same N sockets to it, and
 * it times emitWithAck echo round trips the way the control plane's job bench times jobs.
 *
 * Env: FLEET_PORT.
 */
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { Server, type Socket } from "socket.io";
import { AGENTS_NAMESPACE } from "@capstan/shared";
import { PING_INTERVAL_MS, PING_TIMEOUT_MS } from "@capstan/control-plane/dist/agents/door.js";
import { gcPauses, watchStalls, idleCost, memoryAfterGc, notifyParent, pool, poolFor, serveParent, summarize } from "./ipc.js";

const port = Number(process.env.FLEET_PORT);
const http = createServer();
const io = new Server(http, {
  pingInterval: PING_INTERVAL_MS,
  pingTimeout: PING_TIMEOUT_MS,
  maxHttpBufferSize: 4 * 1024 * 1024,
  serveClient: false,
  cors: { origin: false },
});
const sockets = new Map<string, Socket>();
let connections = 0;
const disconnectReasons: Record<string, number> = {};
io.of(AGENTS_NAMESPACE).on("connection", (socket) => {
  connections++;
  sockets.set(socket.id, socket);
  socket.on("disconnect", (reason) => {
    sockets.delete(socket.id);
    disconnectReasons[reason] = (disconnectReasons[reason] ?? 0) + 1;
  });
});
await new Promise<void>((resolve, reject) => {
  http.once("error", reject);
  http.listen(port, "127.0.0.1", () => resolve());
});

const eld = monitorEventLoopDelay({ resolution: 10 });
// GC pauses during the measured round trips (a p99 that is one major GC shows here).
const gc = gcPauses();
eld.enable();
const eldSummary = () => ({ p50: eld.percentile(50) / 1e6, p99: eld.percentile(99) / 1e6, max: eld.max / 1e6, mean: eld.mean / 1e6 });

const stalls = watchStalls();

serveParent({
  stalls: () => stalls(),
  mem: () => memoryAfterGc().then((m) => ({ ...m, connected: sockets.size })),
  status: () => ({ connected: sockets.size }),
  idle: (args: { ms: number }) => idleCost(args.ms),
  cpu: () => ({ ...process.cpuUsage(), at: performance.now() }),
  gatewayStats: (args: { reset?: boolean } | undefined) => {
    const r = {
      connections,
      disconnectReasons: { ...disconnectReasons },
      eventLoop: eldSummary(),
    };
    if (args?.reset) {
      connections = 0;
      for (const k of Object.keys(disconnectReasons)) delete disconnectReasons[k];
      eld.reset();
    }
    return r;
  },
  /** Echo round trips to random sockets for the window (as the control plane's jobs), `concurrency` in flight; payload shaped like a job envelope. */
  echo: async (args: { m: number; minMs: number; max: number; concurrency: number; warmup: number; serial: number }) => {
    const all = [...sockets.values()];
    if (!all.length) throw new Error("no socket connected");
    const latencies: number[] = [];
    const errors: Record<string, number> = {};
    let failed = 0;
    const one = async (record: boolean) => {
      const socket = all[Math.floor(Math.random() * all.length)]!;
      const envelope = { id: randomUUID(), attempt: 1, type: "containers.list", payload: {}, deadline: new Date(Date.now() + 30_000).toISOString() };
      const t = performance.now();
      try {
        await socket.timeout(10_000).emitWithAck("echo", envelope);
        if (record) latencies.push(performance.now() - t);
      } catch (err) {
        failed++;
        const k = err instanceof Error ? err.message : String(err);
        errors[k] = (errors[k] ?? 0) + 1;
      }
    };
    await pool(args.warmup, args.concurrency, () => one(false));
    eld.reset();
    gc.start();
    const t = performance.now();
    const count = await poolFor({ min: args.m, minMs: args.minMs, max: args.max }, args.concurrency, () => one(true));
    const wallMs = performance.now() - t;
    const gcDuring = gc.stop();
    const loaded = latencies.splice(0);
    const loop = eldSummary();
    for (let i = 0; i < args.serial; i++) await one(true);
    const serial = summarize(latencies);
    return {
      serial,
      latency: summarize(loaded),
      failed,
      errors,
      wallMs,
      count,
      perSecond: (count / wallMs) * 1000,
      eventLoop: loop,
      gc: gcDuring,
    };
  },
  shutdown: () => {
    setTimeout(() => process.exit(0), 50);
    return true;
  },
});

void notifyParent("listening", { pid: process.pid, at: Date.now() });
