import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

/**
 * Proof that a map typed over every job type (the control plane's OutcomeMap, the agent's
 * HandlerMap) cannot leave one out: two snippets are compiled with the repo's strict options,
 * one with every entry and one without the first, and their diagnostics come back for the
 * test to judge. Used by control-plane/src/jobs/outcomes.test.ts and
 * agent/src/dispatch/exhaustive.test.ts.
 */

const sharedSrc = fileURLToPath(new URL("../../shared/src/index.ts", import.meta.url));

/** Type-checks files with the repo's strict compiler options (@capstan/shared from source). */
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

export interface MapSnippets {
  /** Messages of the diagnostics outside the snippet missing an entry (the complete one, and what both import). */
  elsewhere: string[];
  /** Diagnostics of the snippet without the first entry. */
  missing: readonly ts.Diagnostic[];
}

/**
 * Compiles `export const map: <typeName> = {...}` twice, with all `entries` ("key: value" lines)
 * and without the first, in one program (the compiler loads zod's types once). `module` is the
 * .ts file that exports the type; `prelude` declares what the entries use.
 */
export async function compileMapSnippets(opts: { module: string; typeName: string; prelude: string; entries: string[] }): Promise<MapSnippets> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-exhaustive-map-"));
  try {
    await writeFile(join(dir, "package.json"), '{"type":"module"}');
    const header = `import type { ${opts.typeName} } from ${JSON.stringify(opts.module.replace(/\.ts$/, ".js"))};\n${opts.prelude}\n`;
    const body = (entries: string[]) => `${header}export const map: ${opts.typeName} = {\n${entries.map((e) => `  ${e},`).join("\n")}\n};\n`;
    const complete = join(dir, "complete.ts");
    const missing = join(dir, "missing.ts");
    await writeFile(complete, body(opts.entries));
    await writeFile(missing, body(opts.entries.slice(1)));
    const diagnostics = typecheck([complete, missing]);
    return {
      elsewhere: diagnostics.filter((d) => d.file?.fileName !== missing).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")),
      missing: diagnostics.filter((d) => d.file?.fileName === missing),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The text of a diagnostic, its chain flattened. */
export const messageOf = (d: ts.Diagnostic): string => ts.flattenDiagnosticMessageText(d.messageText, "\n");
