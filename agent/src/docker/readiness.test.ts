import { describe, expect, it } from "vitest";
import type { ContainerDetails, ContainerHealthcheck, Engine } from "./engine.js";
import { healthWaitMs, type ReadinessRule, waitContainerReady } from "./readiness.js";

const check: ContainerHealthcheck = { test: ["CMD", "true"], intervalS: 2, timeoutS: 3, retries: 4, startPeriodS: 5 };

const state = (over: Partial<ContainerDetails>): ContainerDetails => ({
  id: "c1",
  name: "web",
  image: "img",
  state: "running",
  running: true,
  paused: false,
  health: "starting",
  labels: {},
  restartCount: 0,
  exitCode: null,
  ...over,
});

/** An engine whose container goes through the given states, one per inspection (the last repeats). */
function scripted(states: (ContainerDetails | null)[], logs: string[] = []) {
  let i = 0;
  const inspected = () => i;
  const engine = {
    inspectContainer: async () => states[Math.min(i++, states.length - 1)] ?? null,
    containerLogs: async () => ({ lines: logs, truncated: false }),
  } as unknown as Engine;
  return { engine, inspected };
}

const ctx = () => {
  const lines: string[] = [];
  return { signal: new AbortController().signal, progress: (l: string) => lines.push(l), lines };
};

const withHealth: ReadinessRule = { subject: "database container db", health: { check, probe: "pg_isready", executable: "pg_isready" }, stableMs: 0, pollMs: 1 };
const noHealth: ReadinessRule = { subject: "new container web", health: null, stableMs: 30, pollMs: 5 };

describe("waitContainerReady", () => {
  it("bounds the wait by start period, interval, timeout and retries", () => {
    expect(healthWaitMs(check)).toBe((5 + (2 + 3) * 5) * 1000 + 30_000);
  });

  it("returns once the engine calls it healthy, reporting each health change once", async () => {
    const { engine, inspected } = scripted([state({}), state({}), state({ health: "healthy" })]);
    const c = ctx();
    const got = await waitContainerReady(engine, "db", withHealth, c);
    expect(got.health).toBe("healthy");
    expect(inspected()).toBe(3);
    expect(c.lines).toEqual(["container db: health starting", "container db: health healthy"]);
  });

  it("fails an unhealthy container with the probe and its output", async () => {
    const { engine } = scripted([state({ health: "unhealthy", healthOutput: "no response\n" })]);
    await expect(waitContainerReady(engine, "db", withHealth, ctx())).rejects.toThrow("database container db is unhealthy: pg_isready failed 4 time(s) in a row; last output: no response");
  });

  it("fails at once when the image lacks the probe's executable", async () => {
    const { engine } = scripted([state({ healthOutput: 'exec: "pg_isready": executable file not found in $PATH' })]);
    await expect(waitContainerReady(engine, "db", withHealth, ctx())).rejects.toThrow(/cannot run the health check: pg_isready is missing/);
  });

  it("fails an exited container with its exit code and last log lines", async () => {
    const { engine } = scripted([state({ running: false, state: "exited", exitCode: 3 })], ["booting", "FATAL: bad config"]);
    await expect(waitContainerReady(engine, "web", noHealth, ctx())).rejects.toThrow("new container web exited with code 3; last log lines:\nbooting\nFATAL: bad config");
  });

  it("fails a container the engine restarted, even when it is seen running again", async () => {
    const { engine } = scripted([state({ health: null }), state({ health: null, restartCount: 1, exitCode: 0 })]);
    await expect(waitContainerReady(engine, "web", noHealth, ctx())).rejects.toThrow("new container web exited and was restarted by the engine (1 restart(s)); it wrote no log lines");
  });

  it("without a health check, is ready after running stableMs without a restart", async () => {
    const { engine, inspected } = scripted([state({ health: null })]);
    const t0 = Date.now();
    await waitContainerReady(engine, "web", noHealth, ctx());
    expect(Date.now() - t0).toBeGreaterThanOrEqual(noHealth.stableMs);
    expect(inspected()).toBeGreaterThan(1);
  });

  it("fails when the health check it was created with is gone, and when the container is", async () => {
    await expect(waitContainerReady(scripted([state({ health: null })]).engine, "db", withHealth, ctx())).rejects.toThrow("database container db has no health check");
    await expect(waitContainerReady(scripted([null]).engine, "db", withHealth, ctx())).rejects.toThrow("database container db disappeared before it was ready");
  });

  it("stops with the signal's reason when cancelled", async () => {
    const { engine } = scripted([state({})]);
    const ac = new AbortController();
    const waiting = waitContainerReady(engine, "db", { ...withHealth, pollMs: 50 }, { signal: ac.signal, progress: () => undefined });
    ac.abort(new Error("cancelled by the user"));
    await expect(waiting).rejects.toThrow("cancelled by the user");
  });
});
