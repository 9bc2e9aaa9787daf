import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

/**
 * The layering rules of the control plane (CONTRIBUTING.md, "Code map"), checked on the import
 * graph as the TypeScript compiler reads it: every import and re-export, `import type` included
 * (a type-only import still ties two modules' designs together), and dynamic `import()`.
 * Relative imports only: packages are outside the graph.
 */

const SRC = dirname(fileURLToPath(import.meta.url));

/** Folders below http/: none of their (non-test) files may import http/. */
const BELOW_HTTP = ["services", "domain", "jobs", "db", "agents", "compose", "backups", "templates"];

const isTest = (file: string) => file.endsWith(".test.ts");

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    // Prisma's generated client is not ours to lay out.
    if (name === "generated" || name === "node_modules") continue;
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith(".ts") && !name.endsWith(".d.ts")) out.push(path);
  }
  return out;
}

/** The relative module specifiers a file imports, found by the compiler's parser. */
function specifiers(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const out: string[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteral(node.arguments[0])) {
      out.push(node.arguments[0].text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push(node.argument.literal.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out.filter((s) => s.startsWith("."));
}

/** A relative specifier (ESM style, `./x.js`) resolved to the .ts file it names. */
function resolveSpecifier(from: string, spec: string, files: Set<string>): string | null {
  const base = resolve(dirname(from), spec);
  for (const candidate of [base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")]) if (files.has(candidate)) return candidate;
  return null;
}

function importGraph(root: string): Map<string, string[]> {
  const files = sourceFiles(root);
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const edges = specifiers(file)
      .map((s) => resolveSpecifier(file, s, known))
      .filter((f): f is string => f !== null);
    graph.set(file, [...new Set(edges)]);
  }
  return graph;
}

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const connect = (v: string) => {
    indices.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        connect(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v)!, indices.get(w)!));
      }
    }
    if (low.get(v) === indices.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) out.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!indices.has(v)) connect(v);
  return out;
}

const rel = (file: string) => relative(SRC, file).split(sep).join("/");

describe("architecture: the import graph of control-plane/src", () => {
  const graph = importGraph(SRC);

  it("finds the files and their imports (the check below has something to check)", () => {
    expect(graph.size).toBeGreaterThan(50);
    const app = [...graph.entries()].find(([f]) => rel(f) === "http/app.ts");
    expect(app && app[1].map(rel)).toContain("http/errors.ts");
  });

  it("no file below http/ (services, domain, jobs, db, agents, compose, backups, templates) imports http/", () => {
    const offenders: string[] = [];
    for (const [file, imports] of graph) {
      const path = rel(file);
      if (isTest(file) || !BELOW_HTTP.some((d) => path.startsWith(`${d}/`))) continue;
      for (const target of imports) if (rel(target).startsWith("http/")) offenders.push(`${path} -> ${rel(target)}`);
    }
    expect(offenders).toEqual([]);
  });

  /**
   * What the layers of the rules may import (CONTRIBUTING.md): services stand on the domain
   * (caller, errors, team scope), the database, the job queue, the compose-file rules, the
   * template engine, crypto, small libraries and the instance's configuration types; the domain
   * on the database only.
   */
  const MAY_IMPORT: Record<string, string[]> = {
    services: ["services/", "domain/", "db/", "jobs/", "lib/", "crypto/", "compose/", "templates/", "config.ts"],
    domain: ["domain/", "db/", "lib/"],
    compose: ["compose/", "domain/", "lib/"],
    // Templates stand on the compose-file rules (one YAML loader, one checker) and nothing stateful.
    templates: ["templates/", "compose/", "domain/", "lib/"],
  };
  for (const [layer, allowed] of Object.entries(MAY_IMPORT)) {
    it(`${layer}/ imports only ${allowed.join(", ")}`, () => {
      const offenders: string[] = [];
      for (const [file, imports] of graph) {
        const path = rel(file);
        if (isTest(file) || !path.startsWith(`${layer}/`)) continue;
        for (const target of imports) if (!allowed.some((a) => rel(target).startsWith(a))) offenders.push(`${path} -> ${rel(target)}`);
      }
      expect(offenders).toEqual([]);
    });
  }

  /**
   * The job queue stands below the services: of jobs/, only the files that say what a job's end
   * means (outcome-map.ts) and start deployments (deploy-scheduler.ts) reach into services/.
   */
  it("jobs/ imports services/ only in outcome-map.ts and deploy-scheduler.ts", () => {
    const REACH = ["jobs/outcome-map.ts", "jobs/deploy-scheduler.ts"];
    const offenders: string[] = [];
    for (const [file, imports] of graph) {
      const path = rel(file);
      if (isTest(file) || !path.startsWith("jobs/") || REACH.includes(path)) continue;
      for (const target of imports) if (rel(target).startsWith("services/")) offenders.push(`${path} -> ${rel(target)}`);
    }
    expect(offenders).toEqual([]);
  });

  it("has no import cycle", () => {
    expect(cycles(graph).map((c) => c.map(rel))).toEqual([]);
  });
});

describe("architecture: the cycle finder itself", () => {
  it("finds a cycle, a self-import, and nothing in a DAG", () => {
    const g = new Map<string, string[]>([
      ["a", ["b"]],
      ["b", ["c"]],
      ["c", ["a", "d"]],
      ["d", []],
      ["e", ["e"]],
      ["f", ["d"]],
    ]);
    expect(cycles(g)).toEqual([["a", "b", "c"], ["e"]]);
    expect(cycles(new Map([["x", ["y"]], ["y", []]]))).toEqual([]);
  });
});
