import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { repoPath } from "../lib/paths.js";
import { ERR } from "./dto.js";
import { routes } from "./routes/index.js";

/**
 * Issue 15: every status a route declares outside the spec's error table (section 7), every 409
 * that means more than "already exists" and every 429 (a route declares it only for its deploy
 * queue) is listed in docs/decisions.md with that route, and the list names no route that does
 * not declare it. A new status on a route, or a route that stops using one, fails here until
 * the decisions say so.
 */
const SPEC_TABLE = new Set([200, 201, 400, 401, 402, 403, 404, 409, 422, 429, 500]);

const key = (method: string, path: string) => `${method.toUpperCase()} ${path}`;

function declared(): Record<number, string[]> {
  const out: Record<number, Set<string>> = {};
  for (const r of routes) {
    for (const [status, spec] of Object.entries(r.responses)) {
      const s = Number(status);
      const beyond = !SPEC_TABLE.has(s) || (s === 409 && spec.description !== ERR[409].description) || s === 429;
      if (beyond) (out[s] ??= new Set()).add(key(r.method, r.path));
    }
  }
  return Object.fromEntries(Object.entries(out).map(([s, set]) => [s, [...set].sort()]));
}

function listed(): Record<number, string[]> {
  const doc = readFileSync(repoPath("docs/decisions.md"), "utf8");
  const start = doc.indexOf("### Statuses of particular routes");
  expect(start, "docs/decisions.md has no section 'Statuses of particular routes'").toBeGreaterThan(0);
  const end = doc.indexOf("\n## ", start);
  const section = doc.slice(start, end < 0 ? undefined : end);
  const out: Record<number, Set<string>> = {};
  for (const part of section.split(/\n#### /).slice(1)) {
    const status = Number(/^(\d{3})/.exec(part)?.[1]);
    expect(Number.isInteger(status), `a heading without a status: ${part.slice(0, 40)}`).toBe(true);
    // The routes are the list items of the status's part; its prose may name others.
    const items = part.split("\n").filter((l) => l.startsWith("- ")).join("\n");
    for (const m of items.matchAll(/`(GET|POST|PATCH|PUT|DELETE) (\/[^`\s]*)`/g)) (out[status] ??= new Set()).add(key(m[1]!, m[2]!));
  }
  return Object.fromEntries(Object.entries(out).map(([s, set]) => [s, [...set].sort()]));
}

describe("status codes beyond the spec's table", () => {
  it("are each listed in docs/decisions.md with exactly the routes that declare them", () => {
    const want = declared();
    expect(Object.keys(want).length).toBeGreaterThan(0);
    expect(listed()).toEqual(want);
  });
});
