import { sleep } from "../sleep.js";
import type { ContainerDetails, ContainerHealthcheck, Engine } from "./engine.js";

/** A container that did not come up; the message is the job's failure reason. */
export class ContainerNotReadyError extends Error {
  override name = "ContainerNotReadyError";
}

/** How a freshly started container proves it is ready. */
export interface ReadinessRule {
  /** Names the container in failure reasons: "new container web-1", "database container orders". */
  subject: string;
  /**
   * The engine health check it was created with and what that check runs, as a reason names it
   * ("pg_isready", "the health check http://127.0.0.1:8080/health"). `executable`: a probe
   * binary the image may lack, which fails at once instead of after the start period.
   * null: ready once it has run `stableMs` without a restart.
   */
  health: { check: ContainerHealthcheck; probe: string; executable?: string } | null;
  stableMs: number;
  /** How often the container is inspected. */
  pollMs: number;
}

/** Lines of the container's log quoted in a failure reason, and the longest quoted line. */
const FAILURE_LOG_LINES = 20;
const FAILURE_LINE_CHARS = 300;
const PROBE_OUTPUT_CHARS = 1000;
/** Without a health check the engine never declares a verdict: how long past stableMs to wait. */
const SETTLE_SLACK_MS = 60_000;

/** Longest the engine can take to declare a container healthy or unhealthy, plus slack. */
export function healthWaitMs(h: ContainerHealthcheck): number {
  return (h.startPeriodS + (h.intervalS + h.timeoutS) * (h.retries + 1)) * 1000 + 30_000;
}

/** "; last log lines:\n..." for a failure reason; empty when the logs cannot be read. */
export async function lastLogLines(engine: Engine, id: string): Promise<string> {
  try {
    const { lines } = await engine.containerLogs(id, { since: 0, tail: FAILURE_LOG_LINES, timestamps: false, maxBytes: 64 * 1024 }, AbortSignal.timeout(10_000));
    const shown = lines.slice(-FAILURE_LOG_LINES).map((l) => (l.length > FAILURE_LINE_CHARS ? `${l.slice(0, FAILURE_LINE_CHARS)}…` : l));
    return shown.length ? `; last log lines:\n${shown.join("\n")}` : "; it wrote no log lines";
  } catch {
    return "";
  }
}

/** The probe could not even run (the engine's message for a missing executable, or the shell's). */
const probeMissing = (output: string, executable: string) => output.includes("executable file not found") || output.includes(`${executable}: not found`);

/**
 * Waits until the container is ready: healthy by its engine health check, or running for
 * `stableMs` without a restart when it has none. Fails (ContainerNotReadyError) with the probe's
 * output when the engine declares it unhealthy or the probe cannot run, with the exit code and
 * last log lines when it exits or restarts, and when the engine gives no verdict in time.
 * Cancelled by the signal.
 */
export async function waitContainerReady(
  engine: Engine,
  name: string,
  rule: ReadinessRule,
  { signal, progress }: { signal: AbortSignal; progress(line: string): void },
): Promise<ContainerDetails> {
  const { subject, health } = rule;
  const limitMs = health ? healthWaitMs(health.check) : rule.stableMs + SETTLE_SLACK_MS;
  const started = Date.now();
  let baselineRestarts: number | null = null;
  let upSince: number | null = null;
  let lastHealth: string | null | undefined;
  for (;;) {
    signal.throwIfAborted();
    const c = await engine.inspectContainer(name, signal);
    if (!c) throw new ContainerNotReadyError(`${subject} disappeared before it was ready`);
    baselineRestarts ??= c.restartCount ?? 0;
    if (!c.running || c.state === "restarting" || (c.restartCount ?? 0) > baselineRestarts) {
      const code = c.exitCode ?? "unknown";
      // A container the engine already restarted reports exit code 0 while running again.
      const what =
        c.state === "restarting"
          ? `keeps restarting (last exit code ${code})`
          : c.running
            ? `exited and was restarted by the engine (${c.restartCount ?? 1} restart(s))`
            : `exited with code ${code}`;
      throw new ContainerNotReadyError(`${subject} ${what}${await lastLogLines(engine, c.id)}`);
    }
    const output = (c.healthOutput ?? "").trim().slice(0, PROBE_OUTPUT_CHARS);
    if (health) {
      if (c.health !== lastHealth) {
        progress(`container ${name}: health ${c.health ?? "unknown"}`);
        lastHealth = c.health;
      }
      if (c.health === "healthy") return c;
      if (c.health === "unhealthy") {
        throw new ContainerNotReadyError(`${subject} is unhealthy: ${health.probe} failed ${health.check.retries} time(s) in a row${output ? `; last output: ${output}` : ""}`);
      }
      if (c.health === null) throw new ContainerNotReadyError(`${subject} has no health check (the image or engine dropped it)`);
      if (health.executable && probeMissing(output, health.executable)) {
        throw new ContainerNotReadyError(`the image of ${name} cannot run the health check: ${health.executable} is missing from it (${output})`);
      }
    } else {
      upSince ??= Date.now();
      if (Date.now() - upSince >= rule.stableMs) return c;
    }
    if (Date.now() - started > limitMs) {
      throw new ContainerNotReadyError(
        health
          ? `${subject} did not become healthy within ${Math.round(limitMs / 1000)}s (health ${c.health ?? "unknown"})${output ? `; last probe output: ${output}` : ""}`
          : `${subject} did not settle within ${Math.round(limitMs / 1000)}s`,
      );
    }
    await sleep(rule.pollMs, signal);
  }
}
