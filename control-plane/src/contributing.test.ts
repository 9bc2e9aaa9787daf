import { existsSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { repoPath } from "./lib/paths.js";

/**
 * CONTRIBUTING.md names files (the deploy path, the checklists): each must exist, so a rename
 * or a split that leaves the guide behind fails here and says which name to update.
 */

const TEXT = readFileSync(repoPath("CONTRIBUTING.md"), "utf8");
const TOP = ["control-plane/", "agent/", "shared/", "test/", "docs/", "prisma/", "bench/", "deploy/"];

/** A `path` of the guide as a repository path: top-level folders as written, others inside control-plane/src. */
function resolved(path: string): string {
  return TOP.some((t) => path.startsWith(t)) ? path : `control-plane/src/${path}`;
}

/** Backticked tokens that name a file or folder (placeholders like <resource> and commands aside). */
function pathsIn(text: string): string[] {
  return [...text.matchAll(/`([^`\s<>]+)`/g)].map((m) => m[1]!).filter((p) => p.includes("/") && (/\.(ts|md|prisma)$/.test(p) || p.endsWith("/")) && !p.startsWith("/"));
}

describe("CONTRIBUTING.md names only files that exist", () => {
  it("every file and folder the guide names", () => {
    const named = pathsIn(TEXT);
    expect(named.length).toBeGreaterThan(30);
    expect(named.filter((p) => !existsSync(repoPath(resolved(p))))).toEqual([]);
  });

  it("each step of the deploy path names an existing file, route to dockerode", () => {
    const section = TEXT.split("## The path of a deployment")[1]!.split("\n## ")[0]!;
    const steps = [...section.matchAll(/^\d+\. `([^`]+)`/gm)].map((m) => m[1]!);
    expect(steps[0]).toBe("control-plane/src/http/app.ts");
    expect(steps.at(-1)).toBe("agent/src/docker/engine.ts");
    expect(steps.length).toBe([...section.matchAll(/^\d+\. /gm)].length);
    expect(steps.filter((p) => !existsSync(repoPath(resolved(p))))).toEqual([]);
    // The last step is where dockerode is reached: the engine interface's folder holds its implementation.
    expect(readFileSync(repoPath("agent/package.json"), "utf8")).toContain('"dockerode"');
  });
});
