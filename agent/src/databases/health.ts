import type { ContainerDetails, ContainerHealthcheck, Engine } from "../docker/engine.js";
import { waitContainerReady } from "../docker/readiness.js";

export interface HealthWaitOptions {
  /** How often the container is inspected. */
  pollMs: number;
}

/**
 * Waits until the database's container is healthy by its engine's probe (which is also the
 * executable named when an image lacks it). Fails with the reason the job reports.
 */
export function waitHealthy(
  engine: Engine,
  name: string,
  probe: { healthcheck: ContainerHealthcheck; probe: string },
  opts: HealthWaitOptions,
  ctx: { signal: AbortSignal; progress(line: string): void },
): Promise<ContainerDetails> {
  const rule = { subject: `database container ${name}`, health: { check: probe.healthcheck, probe: probe.probe, executable: probe.probe }, stableMs: 0, pollMs: opts.pollMs };
  return waitContainerReady(engine, name, rule, ctx);
}
