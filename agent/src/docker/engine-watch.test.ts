import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { Logger } from "../log.js";
import { gatherFacts } from "../facts/facts.js";
import { DockerodeEngine } from "./dockerode-engine.js";
import { EngineWatch, quietWhileDown, type EngineState } from "./engine-watch.js";

/** A machine without a Docker Engine: a socket path where nothing exists (no engine needed for this test). */
const dir = mkdtempSync(join(tmpdir(), "capstan-no-engine-"));
const NOWHERE = join(dir, "docker.sock");

function recorder() {
  const lines: { level: string; msg: string }[] = [];
  const at =
    (level: string) =>
    (msg: string): void => {
      lines.push({ level, msg });
    };
  const log: Logger = { error: at("error"), warn: at("warn"), info: at("info"), debug: at("debug"), child: () => log };
  return { log, lines };
}

let watch: EngineWatch | null = null;
afterEach(() => watch?.stop());
process.on("exit", () => rmSync(dir, { recursive: true, force: true }));

describe("EngineWatch on a machine without a Docker Engine", () => {
  it("says once what is missing and how to get it, then retries quietly with a capped exponential backoff", async () => {
    const { log, lines } = recorder();
    const changes: EngineState[] = [];
    watch = new EngineWatch(new DockerodeEngine(NOWHERE), log, (s) => changes.push(s), { minDelayMs: 1000, maxDelayMs: 8000 });
    for (let i = 0; i < 6; i++) await watch.probe();
    const errors = lines.filter((l) => l.level === "error");
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toContain(`Docker Engine is not reachable at ${NOWHERE} (ENOENT)`);
    expect(errors[0]!.msg).toMatch(/install one and start it/);
    expect(errors[0]!.msg).toMatch(/DOCKER_HOST/);
    expect(lines.filter((l) => l.level === "warn" || l.level === "info")).toEqual([]);
    // 1 s, 2 s, 4 s, then capped at 8 s.
    expect(watch.retryDelays).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
    expect(watch.up).toBe(false);
    expect(changes).toHaveLength(1);
    expect(changes[0]).toMatchObject({ up: false, reason: expect.stringMatching(/ENOENT/) });
  });

  it("says once when the engine answers again and resets the backoff", async () => {
    const { log, lines } = recorder();
    let answer = false;
    const engine = {
      socketPath: NOWHERE,
      version: async () => {
        if (!answer) throw Object.assign(new Error(`Docker Engine is not reachable at ${NOWHERE} (ECONNREFUSED)`), { code: "ECONNREFUSED" });
        return { version: "20.10.24", apiVersion: "1.41" };
      },
    };
    watch = new EngineWatch(engine, log, () => {}, { minDelayMs: 1000, maxDelayMs: 8000 });
    await watch.probe();
    await watch.probe();
    expect(lines.filter((l) => l.level === "error")).toHaveLength(1);
    expect(lines[0]!.msg).toMatch(/start the Docker Engine/);
    answer = true;
    expect(await watch.probe()).toEqual({ up: true, version: "20.10.24" });
    expect(lines.filter((l) => l.level === "info").map((l) => l.msg)).toEqual(["the Docker Engine answers again"]);
    expect(watch.retryDelays).toEqual([]);
  });

  it("keeps what follows from a missing engine out of the warnings while it is down", async () => {
    const { log, lines } = recorder();
    watch = new EngineWatch(new DockerodeEngine(NOWHERE), log);
    const quiet = quietWhileDown(log, watch);
    await watch.probe();
    quiet.warn("the engine's event stream broke; reconnecting");
    expect(lines.filter((l) => l.level === "warn")).toEqual([]);
    expect(lines.filter((l) => l.level === "debug").map((l) => l.msg)).toContain("the engine's event stream broke; reconnecting");
  });

  it("the host facts say the engine is not running, and why", async () => {
    const facts = await gatherFacts(new DockerodeEngine(NOWHERE));
    expect(facts.engine.running).toBe(false);
    expect(facts.engine.error).toContain(`Docker Engine is not reachable at ${NOWHERE} (ENOENT)`);
    expect(facts.engine.error).toMatch(/install one/);
  });
});
