import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JOB_TYPES } from "@capstan/shared";
import { inTurn, type EndedJob } from "./outcomes.js";

const outcomesModule = fileURLToPath(new URL("./outcomes.ts", import.meta.url));
const sharedSrc = fileURLToPath(new URL("../../../shared/src/index.ts", import.meta.url));

/** Type-checks snippets that import OutcomeMap, with the repo's strict compiler options. */
function typecheck(files: string[]): readonly ts.Diagnostic[] {
  const program = ts.createProgram(files, {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2023,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    types: [],
    paths: { "@capstan/shared": [sharedSrc] },
  });
  return ts.getPreEmitDiagnostics(program);
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "capstan-outcome-map-"));
  await writeFile(join(dir, "package.json"), '{"type":"module"}');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("the job-outcome map", () => {
  it("a map missing a job type does not compile; one deciding every type (handler or null) does", { timeout: 60_000 }, async () => {
    const header = `import type { OutcomeMap } from ${JSON.stringify(outcomesModule.replace(/\.ts$/, ".js"))};\nconst h = async () => {};\n`;
    const keys = JOB_TYPES.map((t, i) => `  ${JSON.stringify(t)}: ${i % 2 ? "null" : "h"},`);
    const complete = join(dir, "complete.ts");
    const missing = join(dir, "missing.ts");
    await writeFile(complete, `${header}export const map: OutcomeMap = {\n${keys.join("\n")}\n};\n`);
    await writeFile(missing, `${header}export const map: OutcomeMap = {\n${keys.slice(1).join("\n")}\n};\n`);

    const diagnostics = typecheck([complete, missing]);
    expect(diagnostics.filter((d) => d.file?.fileName !== missing).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"))).toEqual([]);
    const bad = diagnostics.filter((d) => d.file?.fileName === missing);
    expect(bad).toHaveLength(1);
    expect(bad[0]?.code).toBe(2741); // Property '...' is missing in type ...
    expect(ts.flattenDiagnosticMessageText(bad[0]!.messageText, "\n")).toContain(JOB_TYPES[0]);
  });

  it("inTurn runs every handler even after one failed, then throws the first failure (the outcome stays unapplied)", async () => {
    const ran: string[] = [];
    const job = { id: "j1" } as EndedJob<"app.deploy">;
    const handler = inTurn<"app.deploy">(
      async () => void ran.push("a"),
      async () => {
        ran.push("b");
        throw new Error("b failed");
      },
      async () => void ran.push("c"),
    );
    await expect(handler(job)).rejects.toThrow("b failed");
    expect(ran).toEqual(["a", "b", "c"]);
  });
});
