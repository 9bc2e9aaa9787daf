import express, { type Express, type RequestHandler } from "express";
import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { controlCharacterIssues, looseObjects, requestBody } from "@capstan/shared";
import type { Logger } from "pino";
import type { Services } from "../services/index.js";
import { Invalid, type FieldErrors } from "../domain/errors.js";
import { requireFeature } from "../domain/features.js";
import { HttpError, addFieldError, bodyReadError, errorMiddleware, fieldErrorsOf, unknownRoute } from "./errors.js";
import { requireAuth, requireScope, resolveToken } from "./auth.js";
import { visibilityKey } from "../domain/permissions.js";
import { expressPath, requiredScope, type AnyRoute } from "./route.js";
import { routes as defaultRoutes } from "./routes/index.js";
import { openApiDocument } from "./openapi.js";
import { docsRouter } from "./docs.js";
import { ResponseCache, sendJsonBytes } from "./response-cache.js";
import { dashboardRouter } from "./dashboard.js";
import { sessionRouter, type SessionRouterDeps } from "./session.js";

export interface AppDeps {
  services: Services;
  log: Logger;
  rateLimit: RequestHandler;
  maxBodyBytes: number;
  trustProxy: boolean;
  /** Readiness probe: resolves when the database answers. */
  ready(): Promise<void>;
  routes?: AnyRoute[];
  /** Memory for cached GET /projects bodies (http/response-cache.ts); 0 turns the cache off. Default 32 MiB. */
  responseCacheBytes?: number;
  /** The dashboard's session endpoints (/session); without them the dashboard cannot sign in. */
  session?: SessionRouterDeps;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

/**
 * Parses one part of the request (path parameters, query, body) with its schema, and applies
 * the control-character rule (shared validation/text.ts) to every string of it, including
 * fields the schema does not know: a part with either kind of problem adds its field errors.
 */
function parsePart(schema: z.ZodType | undefined, value: unknown, errors: FieldErrors, parsed = value): unknown {
  const text = controlCharacterIssues(schema, value);
  for (const issue of text) addFieldError(errors, issue.path.length ? issue.path.join(".") : "body", issue.message);
  if (!schema) return {};
  const r = schema.safeParse(parsed);
  if (r.success) return text.length ? undefined : r.data;
  for (const [key, messages] of Object.entries(fieldErrorsOf(r.error))) for (const m of messages) addFieldError(errors, key, m);
  return undefined;
}

/** The body of a route that declares none: no fields at all (an empty object, or no body). */
const NO_BODY = requestBody({});

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Where a compatibility field sits in the body: `name` (top level), `list[].name` (in every
 * object of the array `list`) or `outer.name` (in the object `outer`). Returns the segments.
 */
export function compatiblePath(field: string): { key: string; each: boolean }[] {
  return field.split(".").map((seg) => (seg.endsWith("[]") ? { key: seg.slice(0, -2), each: true } : { key: seg, each: false }));
}

/** The value without the field at the path (a new object; absent parts are left as they are). */
function withoutField(value: unknown, path: { key: string; each: boolean }[]): unknown {
  if (!isPlainObject(value) || path.length === 0) return value;
  const [head, ...rest] = path as [{ key: string; each: boolean }, ...{ key: string; each: boolean }[]];
  // Object.fromEntries defines own properties: a "__proto__" key of the client stays plain data.
  if (rest.length === 0) return Object.fromEntries(Object.entries(value).filter(([k]) => k !== head.key));
  if (!Object.hasOwn(value, head.key)) return value;
  const child = value[head.key];
  const next = head.each ? (Array.isArray(child) ? child.map((c) => withoutField(c, rest)) : child) : withoutField(child, rest);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === head.key ? next : v]));
}

/**
 * The request body as the route's schema is to see it: without the compatibility fields the
 * route accepts and ignores (RouteSpec.compatibleFields, docs/compatibility.md).
 */
function withoutCompatibleFields(r: AnyRoute, body: unknown): unknown {
  if (!r.compatibleFields || !isPlainObject(body)) return body;
  let out: unknown = body;
  for (const field of Object.keys(r.compatibleFields)) out = withoutField(out, compatiblePath(field));
  return out;
}

/**
 * Whether the body schema already takes a compatibility field, or has no object where its path
 * points: parses a body holding only that field and looks for the strict object refusing it
 * there (an unknown-field issue at the field's parent).
 */
function compatibleFieldFits(body: z.ZodType, field: string): boolean {
  const path = compatiblePath(field);
  const build = (i: number): unknown => {
    const seg = path[i]!;
    const inner = i === path.length - 1 ? null : build(i + 1);
    return { [seg.key]: seg.each && i < path.length - 1 ? [inner] : inner };
  };
  const parent: (string | number)[] = [];
  path.slice(0, -1).forEach((seg) => parent.push(...(seg.each ? [seg.key, 0] : [seg.key])));
  const last = path[path.length - 1]!.key;
  const issues = body.safeParse(build(0)).error?.issues ?? [];
  return issues.some(
    (i) => i.code === "unrecognized_keys" && (i as { keys?: string[] }).keys?.includes(last) === true && JSON.stringify(i.path) === JSON.stringify(parent),
  );
}

/**
 * The checks of the route table itself, once when the app is built: every object of a request
 * body is strict (built with requestBody, one rule for unknown fields), and a compatibility
 * field is not also a field of the body (and points at an object of it). A route breaking them
 * stops the start.
 */
function checkRouteTable(routes: AnyRoute[]): void {
  const problems: string[] = [];
  for (const r of routes) {
    const where = `${r.method.toUpperCase()} ${r.path}`;
    if (r.body) {
      const loose = looseObjects(r.body);
      if (loose.length) problems.push(`${where}: body objects not built with requestBody() (shared/src/api/common.ts) at ${loose.map((p) => p || "(top)").join(", ")}`);
    }
    if (r.feature !== undefined && r.auth === "none") problems.push(`${where}: a route without a token cannot need a feature`);
    if (r.adminOnly !== undefined && r.auth === "none") problems.push(`${where}: a route without a token cannot be for team admins only`);
    for (const field of Object.keys(r.compatibleFields ?? {})) {
      if (!r.body && field.includes(".")) problems.push(`${where}: compatibility field ${field} is nested, but the route takes no body`);
      else if (r.body && !compatibleFieldFits(r.body, field)) problems.push(`${where}: compatibility field ${field} is a field of the body, or not inside one of its objects`);
    }
  }
  if (problems.length) throw new Error(`route table:\n  ${problems.join("\n  ")}`);
}

/**
 * cache: only for routes marked teamVersioned. A request uses it after the same checks as any other
 * (token, scope, parameters), with the version read with its token (req.teamVersion).
 */
function handle(r: AnyRoute, services: Services, cache?: ResponseCache): RequestHandler {
  const feature = r.feature;
  return async (req, res, next) => {
    try {
      // Routes without token (webhooks) authenticate the request in their handler.
      const auth = r.auth === "none" ? undefined : requireAuth(req);
      if (auth) requireScope(auth, r);
      // Express answers HEAD with the GET route. A GET that changes state (Coolify's GET forms of
      // start, stop, restart and deploy: docs/compatibility.md) must not act on a HEAD, which
      // clients, proxies and link checkers send believing it safe.
      if (req.method === "HEAD" && requiredScope(r) !== "read") throw new HttpError(400, "HEAD does not run this action: send GET or POST.");
      // The feature gate (domain/features.ts): the team's features came with the token
      // (http/auth.ts), so this costs a set lookup on gated routes and nothing on the others.
      if (feature !== undefined) requireFeature(auth!, feature);
      const errors: FieldErrors = {};
      const params = parsePart(r.params, req.params, errors);
      const query = parsePart(r.query, req.query, errors);
      let body: unknown;
      if (r.body) body = parsePart(r.body, req.body ?? {}, errors, withoutCompatibleFields(r, req.body ?? {}));
      else if (!r.rawBody && req.body !== undefined) parsePart(NO_BODY, req.body, errors, withoutCompatibleFields(r, req.body));
      if (Object.keys(errors).length) throw new Invalid(errors);
      const scope = auth === undefined ? undefined : services.scope(auth);
      // Team owners and admins only (RouteSpec.adminOnly): refused before anything is read.
      if (r.adminOnly !== undefined) scope!.requireTeamAdmin(r.adminOnly);
      const version = req.teamVersion;
      let key: string | undefined;
      if (cache !== undefined && auth !== undefined && version !== undefined && cache.active) {
        key = `${auth.teamId} ${visibilityKey(auth)} ${req.originalUrl}`;
        const hit = cache.get(key, version);
        if (hit !== undefined) return sendJsonBytes(res, hit.body, hit.etag);
      }
      const result = await r.handler({ params, query, body, caller: auth, scope, services, req, res } as never);
      if (result.handled || res.headersSent) return;
      const status = result.status ?? 200;
      if (key !== undefined && status === 200 && result.body !== undefined) {
        const bytes = Buffer.from(JSON.stringify(result.body));
        const etagFn = req.app.get("etag fn") as ((body: Buffer) => string) | undefined;
        const etag = etagFn?.(bytes);
        cache!.set(key, version!, bytes, etag);
        return sendJsonBytes(res, bytes, etag);
      }
      res.status(status).json(result.body);
    } catch (err) {
      next(err);
    }
  };
}

/** A body reader (express.json / express.raw) whose client errors become 4xx HttpErrors. */
function bodyReader(parser: RequestHandler): RequestHandler {
  return (req, res, next) =>
    parser(req, res, (err?: unknown) => {
      if (err === undefined || err === null) return next();
      next(bodyReadError(err, req.headers["content-encoding"]) ?? err);
    });
}

/**
 * The gate of every token route, as one step (it runs on every request): 401 without a valid
 * token; then JSON in, JSON out: a body in any other type is refused rather than silently
 * ignored, and the JSON parser runs only when there is a body.
 */
function tokenGate(maxBodyBytes: number): RequestHandler {
  // The same types the check admits: a body let through must also be parsed.
  // Compressed bodies (gzip, deflate, br) are inflated; the limit applies to the inflated bytes.
  const json = bodyReader(express.json({ limit: maxBodyBytes, strict: true, type: ["application/json", "application/*+json"] }));
  return (req, res, next) => {
    if (req.auth === undefined) {
      try {
        requireAuth(req);
      } catch (err) {
        return next(err);
      }
    }
    const length = req.headers["content-length"];
    const hasBody = (length !== undefined && Number(length) > 0) || req.headers["transfer-encoding"] !== undefined;
    if (!hasBody) return next();
    if (!req.is("application/json") && !req.is("application/*+json")) {
      return next(new HttpError(415, "Send the request body as JSON with Content-Type: application/json."));
    }
    json(req, res, next);
  };
}

/**
 * Request id (a valid incoming X-Request-Id is kept) and one log line per request on
 * completion: method, path (never the query string or headers: they may carry secrets),
 * status and duration. No per-request child logger: this runs on every call.
 */
function requestLog(log: Logger): RequestHandler {
  return (req, res, next) => {
    const given = req.headers["x-request-id"];
    const id = typeof given === "string" && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader("X-Request-Id", id);
    req.id = id;
    if (!log.isLevelEnabled("info") || req.url === "/healthz" || req.url === "/readyz") return next();
    const started = performance.now();
    res.once("finish", () => {
      const line = {
        req: { id, method: req.method, path: req.originalUrl.split("?")[0] },
        res: { statusCode: res.statusCode },
        responseTime: Math.round(performance.now() - started),
      };
      if (res.statusCode >= 500) log.error(line, "request failed");
      else log.info(line, "request completed");
    });
    next();
  };
}

/** Builds the HTTP app without listening, so tests and the server share one construction. */
export function createApp(deps: AppDeps): Express {
  const routes = deps.routes ?? defaultRoutes;
  checkRouteTable(routes);
  const app = express();
  app.disable("x-powered-by");
  app.set("trust proxy", deps.trustProxy);
  app.set("query parser", "simple");

  app.use(requestLog(deps.log));

  app.get("/healthz", (_req, res) => {
    res.json({ status: "ok" });
  });
  app.get("/readyz", async (_req, res) => {
    try {
      await deps.ready();
      res.json({ status: "ready" });
    } catch {
      res.status(503).json({ status: "unavailable", message: "Database is not reachable." });
    }
  });

  // Built on first request, not at start: it is a tenth of a restart's work, and most
  // restarts (a fleet reconnecting) never serve it.
  let document: ReturnType<typeof openApiDocument> | undefined;
  app.get("/api/v1/openapi.json", (_req, res) => {
    res.json((document ??= openApiDocument(routes)));
  });
  app.use("/docs", docsRouter());

  const api = express.Router();
  api.use(resolveToken(deps.services.db, deps.services.reader));
  api.use(deps.rateLimit);
  // Routes without a token come before the token gate; a raw body is read only for them.
  for (const r of routes.filter((x) => x.auth === "none")) {
    const raw = bodyReader(express.raw({ type: () => true, limit: deps.maxBodyBytes }));
    api[r.method](expressPath(r.path), ...(r.rawBody ? [raw] : []), handle(r, deps.services));
  }
  api.use(tokenGate(deps.maxBodyBytes));
  const cacheBytes = deps.responseCacheBytes ?? 32 * 1024 * 1024;
  const cache = cacheBytes > 0 ? new ResponseCache(deps.services.reader, deps.log, cacheBytes) : undefined;
  app.locals.responseCache = cache;
  for (const r of routes.filter((x) => x.auth !== "none")) {
    const cached = r.teamVersioned && r.method === "get" ? cache : undefined;
    api[r.method](expressPath(r.path), handle(r, deps.services, cached));
  }
  api.use(unknownRoute);
  app.use("/api/v1", api);

  // The dashboard (issue 22): its session endpoints, outside the API, and its files at /.
  if (deps.session) app.use("/session", deps.rateLimit, sessionRouter(deps.session));
  app.use(dashboardRouter());

  app.use(unknownRoute);
  app.use(errorMiddleware(deps.log));
  return app;
}
