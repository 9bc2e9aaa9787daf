import express, { type Express, type RequestHandler } from "express";
import { randomUUID } from "node:crypto";
import type { z } from "zod";
import type { Logger } from "pino";
import type { Services } from "../services/index.js";
import { AppError, errorMiddleware, fieldErrorsOf, invalid, unknownRoute, type FieldErrors } from "./errors.js";
import { requireAuth, requireScope, resolveToken } from "./auth.js";
import { expressPath, type AnyRoute } from "./route.js";
import { routes as defaultRoutes } from "./routes/index.js";
import { openApiDocument } from "./openapi.js";
import { docsRouter } from "./docs.js";

export interface AppDeps {
  services: Services;
  log: Logger;
  rateLimit: RequestHandler;
  maxBodyBytes: number;
  trustProxy: boolean;
  /** Readiness probe: resolves when the database answers. */
  ready(): Promise<void>;
  routes?: AnyRoute[];
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/;

function parsePart(schema: z.ZodType | undefined, value: unknown, errors: FieldErrors): unknown {
  if (!schema) return {};
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  Object.assign(errors, fieldErrorsOf(r.error));
  return undefined;
}

function handle(r: AnyRoute, services: Services): RequestHandler {
  return async (req, res, next) => {
    try {
      const auth = requireAuth(req);
      requireScope(auth, r);
      const errors: FieldErrors = {};
      const params = parsePart(r.params, req.params, errors);
      const query = parsePart(r.query, req.query, errors);
      const body = r.body ? parsePart(r.body, req.body ?? {}, errors) : undefined;
      if (Object.keys(errors).length) throw invalid(errors);
      const result = await r.handler({ params, query, body, auth, services, req, res } as never);
      res.status(result.status ?? 200).json(result.body);
    } catch (err) {
      next(err);
    }
  };
}

/** JSON in, JSON out: a body in any other type is refused rather than silently ignored. */
const requireJsonBody: RequestHandler = (req, _res, next) => {
  const hasBody = Number(req.headers["content-length"] ?? 0) > 0 || req.headers["transfer-encoding"] !== undefined;
  if (hasBody && !req.is("application/json") && !req.is("application/*+json")) {
    return next(new AppError(415, "Send the request body as JSON with Content-Type: application/json."));
  }
  next();
};

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

  const document = openApiDocument(routes);
  app.get("/api/v1/openapi.json", (_req, res) => {
    res.json(document);
  });
  app.use("/docs", docsRouter());

  const api = express.Router();
  api.use(resolveToken(deps.services.db, deps.services.reader));
  api.use(deps.rateLimit);
  api.use((req, _res, next) => {
    try {
      requireAuth(req);
      next();
    } catch (err) {
      next(err);
    }
  });
  api.use(requireJsonBody);
  // The same types requireJsonBody admits: a body let through must also be parsed.
  api.use(express.json({ limit: deps.maxBodyBytes, strict: true, type: ["application/json", "application/*+json"] }));
  for (const r of routes) api[r.method](expressPath(r.path), handle(r, deps.services));
  api.use(unknownRoute);
  app.use("/api/v1", api);

  app.use(unknownRoute);
  app.use(errorMiddleware(deps.log));
  return app;
}
