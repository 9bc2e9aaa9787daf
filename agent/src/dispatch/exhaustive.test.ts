import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { JOB_TYPES } from "@capstan/shared";
import { createHandlers } from "../handlers/index.js";
import type { Engine } from "../docker/engine.js";

const typesModule = fileURLToPath(new URL("./types.ts", import.meta.url));
const sharedSrc = fileURLToPath(new URL("../../../shared/src/index.ts", import.meta.url));

/** Type-checks a snippet that imports HandlerMap, with the repo's strict compiler options. */
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
  dir = await mkdtemp(join(tmpdir(), "capstan-agent-exhaustive-"));
  await writeFile(join(dir, "package.json"), '{"type":"module"}');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const header = `import type { HandlerMap } from ${JSON.stringify(typesModule.replace(/\.ts$/, ".js"))};
const h = async () => { throw new Error(); };
`;

describe("handler map exhaustiveness", () => {
  it("createHandlers has exactly one handler per job type in JOBS", () => {
    const map = createHandlers({} as Engine);
    expect(Object.keys(map).sort()).toEqual([...JOB_TYPES].sort());
    for (const type of JOB_TYPES) expect(typeof map[type]).toBe("function");
  });

  it("a map missing a job type does not compile; a complete one does", { timeout: 60_000 }, async () => {
    const keys = JOB_TYPES.map((t) => `  ${JSON.stringify(t)}: h,`);
    const complete = join(dir, "complete.ts");
    const missing = join(dir, "missing.ts");
    await writeFile(complete, `${header}export const map: HandlerMap = {\n${keys.join("\n")}\n};\n`);
    await writeFile(missing, `${header}export const map: HandlerMap = {\n${keys.slice(1).join("\n")}\n};\n`);

    // One program for both files: the compiler loads zod's types once.
    const diagnostics = typecheck([complete, missing]);
    const ok = diagnostics.filter((d) => d.file?.fileName !== missing);
    expect(ok.map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"))).toEqual([]);

    const bad = diagnostics.filter((d) => d.file?.fileName === missing);
    expect(bad).toHaveLength(1);
    expect(bad[0]?.code).toBe(2741); // Property '...' is missing in type ...
    expect(ts.flattenDiagnosticMessageText(bad[0]!.messageText, "\n")).toContain(JOB_TYPES[0]);
  });
});
