import type { ContainerDetails, ContainerHealthcheck, Engine } from "../docker/engine.js";

export interface HealthWaitOptions {
  /** How often the container is inspected. */
  pollMs: number;
}

/** A database that did not come up; the message is the job's failure reason. */
export class DbHealthError extends Error {
  override name = "DbHealthError";
}

const FAILURE_LOG_LINES = 20;
const FAILURE_LINE_CHARS = 300;
const OUTPUT_CHARS = 1000;

/**
 * The probe could not even run (the engine's message for a missing executable, or the shell's):
 * waiting for the start period to end would not change that.
 */
const probeMissing = (output: string, probe: string) => output.includes("executable file not found") || output.includes(`${probe}: not found`);

/** Longest the engine can take to call a container healthy or unhealthy, plus slack. */
export function healthWaitMs(h: ContainerHealthcheck): number {
  return (h.startPeriodS + (h.intervalS + h.timeoutS) * (h.retries + 1)) * 1000 + 30_000;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal.addEventListener("abort", onAbort, { once: true });
  });

export async function lastLogLines(engine: Engine, id: string): Promise<string> {
  try {
    const { lines } = await engine.containerLogs(id, { since: 0, tail: FAILURE_LOG_LINES, timestamps: false, maxBytes: 64 * 1024 }, AbortSignal.timeout(10_000));
    const shown = lines.slice(-FAILURE_LOG_LINES).map((l) => (l.length > FAILURE_LINE_CHARS ? `${l.slice(0, FAILURE_LINE_CHARS)}…` : l));
    return shown.length ? `; last log lines:\n${shown.join("\n")}` : "; it wrote no log lines";
  } catch {
    return "";
  }
}

/**
 * Waits until the database's container is healthy by its engine's probe. Fails (DbHealthError)
 * with the probe's output when the engine declares it unhealthy or the probe cannot run, with
 * the exit code and last log lines when the server exits or keeps restarting, and after
 * healthWaitMs. Cancelled by the job's signal.
 */
export async function waitHealthy(
  engine: Engine,
  name: string,
  probe: { healthcheck: ContainerHealthcheck; probe: string },
  opts: HealthWaitOptions,
  ctx: { signal: AbortSignal; progress(line: string): void },
): Promise<ContainerDetails> {
  const { signal, progress } = ctx;
  const limitMs = healthWaitMs(probe.healthcheck);
  const started = Date.now();
  let baseline: number | null = null;
  let lastHealth: string | null | undefined;
  for (;;) {
    signal.throwIfAborted();
    const c = await engine.inspectContainer(name, signal);
    if (!c) throw new DbHealthError(`container ${name} disappeared while starting`);
    baseline ??= c.restartCount ?? 0;
    if (!c.running || c.state === "restarting" || (c.restartCount ?? 0) > baseline) {
      const what = c.running || c.state === "restarting" ? `keeps restarting (last exit code ${c.exitCode ?? "unknown"})` : `exited with code ${c.exitCode ?? "unknown"}`;
      throw new DbHealthError(`database container ${name} ${what}${await lastLogLines(engine, c.id)}`);
    }
    if (c.health !== lastHealth) {
      progress(`container ${name}: health ${c.health ?? "unknown"}`);
      lastHealth = c.health;
    }
    const output = (c.healthOutput ?? "").trim().slice(0, OUTPUT_CHARS);
    if (c.health === "healthy") return c;
    if (c.health === "unhealthy") {
      throw new DbHealthError(`database container ${name} is unhealthy: ${probe.probe} failed ${probe.healthcheck.retries} time(s) in a row${output ? `; last output: ${output}` : ""}`);
    }
    if (c.health === null) throw new DbHealthError(`database container ${name} has no health check (the image or engine dropped it)`);
    if (probeMissing(output, probe.probe)) {
      throw new DbHealthError(`the image of ${name} cannot run the health check: ${probe.probe} is missing from it (${output})`);
    }
    if (Date.now() - started > limitMs) {
      throw new DbHealthError(
        `database container ${name} did not become healthy within ${Math.round(limitMs / 1000)}s (health ${c.health})${output ? `; last probe output: ${output}` : ""}`,
      );
    }
    await sleep(opts.pollMs, signal);
  }
}
