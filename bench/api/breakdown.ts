// Where one request's time goes, phase by phase, measured on the real objects of a running
// instance (one call at a time, no concurrency): the token lookup middleware, the rate
// limiter, the route handler (parameter parsing, service, DTO mapping) and JSON encoding.
// The remainder of a request (HTTP parsing, express routing, pino-http, writing) is what the
// bare express baseline also pays.
import type { Request, RequestHandler, Response } from "express";
import Sqlite from "better-sqlite3";
import type { Config } from "../../control-plane/src/config.js";
import type { Instance } from "../../control-plane/src/instance.js";
import { resolveToken } from "../../control-plane/src/http/auth.js";
import type { Caller } from "../../control-plane/src/domain/caller.js";
import { createRateLimiter } from "../../control-plane/src/http/rate-limit.js";
import { routes } from "../../control-plane/src/http/routes/index.js";
import { hashApiToken } from "../../control-plane/src/crypto/api-token.js";

export interface Phase {
  phase: string;
  us: number;
}

async function time(iterations: number, fn: () => Promise<unknown>): Promise<number> {
  for (let i = 0; i < Math.min(200, iterations); i++) await fn(); // warm-up
  const start = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) await fn();
  return Number(process.hrtime.bigint() - start) / 1000 / iterations;
}

const call = (mw: RequestHandler, req: object) =>
  new Promise<void>((resolve, reject) =>
    mw(req as Request, { set() {}, setHeader() {} } as unknown as Response, (err?: unknown) => (err ? reject(err) : resolve())),
  );

function match(path: string) {
  const url = new URL(path, "http://x");
  const pathname = url.pathname.replace(/^\/api\/v1/, "");
  for (const r of routes) {
    if (r.method !== "get") continue;
    const names: string[] = [];
    const re = new RegExp("^" + r.path.replace(/\{([^}]+)\}/g, (_, n: string) => (names.push(n), "([^/]+)")) + "$");
    const m = re.exec(pathname);
    if (m) return { r, params: Object.fromEntries(names.map((n, i) => [n, m[i + 1]])), query: Object.fromEntries(url.searchParams) };
  }
  throw new Error(`no GET route for ${path}`);
}

export async function breakdown(instance: Instance, config: Config, token: string, path: string, iterations = 1000): Promise<Phase[]> {
  const db = instance.database.prisma;
  const auth = resolveToken(db, instance.database.reader);
  const headers = { authorization: `Bearer ${token}` };
  const probe: { headers: object; auth?: Caller } = { headers };
  await call(auth, probe);
  const ctx = probe.auth!;
  const limiter = await createRateLimiter(config.database, 1_000_000);
  const { r, params, query } = match(path);
  const input = () => ({
    params: r.params ? r.params.parse(params) : {},
    query: r.query ? r.query.parse(query) : {},
    body: undefined,
    caller: ctx,
    // A scope per request, as http/app.ts makes one.
    scope: instance.services.scope(ctx),
    services: instance.services,
    req: {} as Request,
    res: {} as Response,
  });
  const body = (await r.handler(input() as never)).body;

  const phases: Phase[] = [];
  phases.push({ phase: "auth: resolveToken (1 SQL join through the plain read path)", us: await time(iterations, () => call(auth, { headers })) });
  phases.push({ phase: config.database.kind === "sqlite" ? "rate limit: consume (in memory on SQLite)" : "rate limit: consume (rate_limits table)", us: await time(iterations, () => call(limiter.middleware, { auth: ctx, ip: "127.0.0.1" })) });
  phases.push({ phase: `handler ${r.method.toUpperCase()} ${r.path}: zod parse + service + DTO`, us: await time(iterations, () => r.handler(input() as never)) });
  phases.push({ phase: "JSON.stringify of the response body", us: await time(iterations, async () => JSON.stringify(body)) });
  await limiter.close();

  // For comparison (not part of a request): the token lookup as one SQL join through a
  // cached better-sqlite3 statement, which is what a lean auth path would cost.
  if (config.database.kind === "sqlite") {
    const raw = new Sqlite(config.database.file, { readonly: true });
    const stmt = raw.prepare(
      `SELECT t.id, t.teamId, t.userId, t.scopes, t.revokedAt, t.expiresAt, m.role
         FROM ApiToken t LEFT JOIN Membership m ON m.userId = t.userId AND m.teamId = t.teamId
        WHERE t.secretHash = ?`,
    );
    const hash = hashApiToken(token);
    phases.push({ phase: "(for comparison) same token lookup: 1 SQL join, cached statement, no Prisma", us: await time(iterations, async () => stmt.get(hash)) });
    phases.push({ phase: "(for comparison) Prisma $queryRawUnsafe('SELECT 1'): the floor of one Prisma call", us: await time(iterations, () => db.$queryRawUnsafe("SELECT 1")) });
    const lean = leanProjects(raw, ctx.teamId, r.path, params, query);
    if (lean) {
      const same = JSON.stringify(lean()) === JSON.stringify(body);
      phases.push({
        phase: `(for comparison) the handler's rows via cached better-sqlite3 statements, same DTO${same ? "" : " (BODY DIFFERS)"}`,
        us: await time(iterations, async () => lean()),
      });
    }
    raw.close();
  }
  return phases;
}

type Row = Record<string, unknown>;
const isoOf = (v: unknown) => new Date(typeof v === "number" ? v : String(v)).toISOString();

/**
 * The project reads of GET /projects and GET /projects/{uuid} for an owner, written as plain
 * SQL with statements prepared once: what the handler costs without Prisma's per-query and
 * per-row work. Returns null for other routes.
 */
function leanProjects(raw: Sqlite.Database, teamId: number, path: string, params: Record<string, string | undefined>, query: Record<string, string>) {
  const envs = raw.prepare(`SELECT id, uuid, name, createdAt, projectId FROM Environment WHERE projectId IN (SELECT value FROM json_each(?)) ORDER BY id`);
  const dto = (projects: Row[]) => {
    const byProject = new Map<unknown, Row[]>();
    for (const e of envs.all(JSON.stringify(projects.map((p) => p.id))) as Row[]) {
      (byProject.get(e.projectId) ?? byProject.set(e.projectId, []).get(e.projectId)!).push(e);
    }
    return projects.map((p) => ({
      uuid: p.uuid,
      name: p.name,
      description: p.description,
      environments: (byProject.get(p.id) ?? []).map((e) => ({ id: e.id, uuid: e.uuid, name: e.name, created_at: isoOf(e.createdAt) })),
      created_at: isoOf(p.createdAt),
    }));
  };
  if (path === "/projects") {
    const page = raw.prepare(`SELECT id, uuid, name, description, createdAt FROM Project WHERE teamId = ? ORDER BY id LIMIT ? OFFSET ?`);
    const count = raw.prepare(`SELECT COUNT(*) AS n FROM Project WHERE teamId = ?`);
    const perPage = query.per_page ? Number(query.per_page) : query.page ? 15 : -1;
    const pageNo = Number(query.page ?? 1);
    return () => {
      const data = dto(page.all(teamId, perPage, perPage > 0 ? (pageNo - 1) * perPage : 0) as Row[]);
      if (perPage < 0) return { data };
      const total = (count.get(teamId) as { n: number }).n;
      return { data, meta: { current_page: pageNo, per_page: perPage, total, last_page: Math.max(1, Math.ceil(total / perPage)) } };
    };
  }
  if (path === "/projects/{uuid}") {
    const one = raw.prepare(`SELECT id, uuid, name, description, createdAt FROM Project WHERE uuid = ? AND teamId = ?`);
    return () => dto([one.get(params.uuid, teamId) as Row])[0];
  }
  return null;
}
