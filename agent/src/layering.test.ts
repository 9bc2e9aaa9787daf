import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The agent's layers: handlers/ (one per job type) sit on top and use docker/, deploy/,
 * databases/, networks/, proxy/, backup/...; nothing below reaches up into handlers/ (labels
 * come from @capstan/shared, the keyed mutex from mutex.ts). Only main.ts wires handlers in.
 * Test files may import anything.
 */
const ROOT = fileURLToPath(new URL(".", import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") ? [p] : [];
  });
}

const IMPORT = /(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)"|import\(\s*"([^"]+)"\s*\)/g;

describe("agent layering", () => {
  it("no module outside handlers/ (but main.ts) imports from handlers/", () => {
    const offenders: string[] = [];
    for (const file of sources(ROOT)) {
      const rel = relative(ROOT, file);
      if (rel.startsWith("handlers/") || rel === "main.ts") continue;
      for (const m of readFileSync(file, "utf8").matchAll(IMPORT)) {
        const spec = m[1] ?? m[2]!;
        if (spec.startsWith(".") && relative(ROOT, join(file, "..", spec)).startsWith("handlers/")) offenders.push(`${rel} -> ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });

  it("docker/engine.ts is the interface only: it imports no implementation", () => {
    const text = readFileSync(join(ROOT, "docker/engine.ts"), "utf8");
    const specs = [...text.matchAll(IMPORT)].map((m) => m[1] ?? m[2]!);
    expect(specs.filter((s) => s.startsWith(".") || s === "dockerode")).toEqual([]);
  });
});
