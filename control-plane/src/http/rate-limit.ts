import type { RequestHandler } from "express";
import pg from "pg";
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from "rate-limiter-flexible";
import type { DatabaseConfig } from "../config.js";
import { Busy } from "../domain/errors.js";

const WINDOW_SECONDS = 60;
const TABLE = "rate_limits";

export interface RateLimiter {
  middleware: RequestHandler;
  close(): Promise<void>;
}

/**
 * Fixed one-minute window per API token (per client address for requests without a valid
 * token). On PostgreSQL the counts are kept in the database so every control-plane replica
 * shares them; on SQLite (a single process by design) they are kept in memory.
 */
export async function createRateLimiter(db: DatabaseConfig, pointsPerMinute: number): Promise<RateLimiter> {
  let limiter: RateLimiterAbstract;
  let close: () => Promise<void>;
  if (db.kind === "sqlite") {
    // One control-plane process per SQLite file (docs/limits.md): the counts live in its
    // memory, which spares a database write per request. A restart starts a fresh window.
    limiter = new RateLimiterMemory({ points: pointsPerMinute, duration: WINDOW_SECONDS });
    close = async () => {};
  } else {
    const pool = new pg.Pool({ connectionString: db.url, max: 5 });
    // An idle client that died (database restarted): the pool replaces it. Without a listener
    // the error event would end the process.
    pool.on("error", () => {});
    limiter = await new Promise<RateLimiterAbstract>((resolve, reject) => {
      const l: RateLimiterAbstract = new RateLimiterPostgres(
        { storeClient: pool, tableName: TABLE, points: pointsPerMinute, duration: WINDOW_SECONDS, clearExpiredByTimeout: true },
        (err?: unknown) => (err ? reject(err) : resolve(l)),
      );
    });
    close = () => pool.end();
  }

  const limit = String(pointsPerMinute);
  const remaining = (r: RateLimiterRes) => String(Math.max(0, r.remainingPoints));
  const reset = (r: RateLimiterRes) => String(Math.ceil((Date.now() + r.msBeforeNext) / 1000));
  const headers = (r: RateLimiterRes) => ({ "X-RateLimit-Limit": limit, "X-RateLimit-Remaining": remaining(r), "X-RateLimit-Reset": reset(r) });

  const middleware: RequestHandler = async (req, res, next) => {
    const key = req.auth ? `t:${req.auth.tokenId}` : `ip:${req.ip}`;
    try {
      const result = await limiter.consume(key);
      // Straight to node's setHeader (express's res.set(object) costs more), on every request.
      res.setHeader("X-RateLimit-Limit", limit);
      res.setHeader("X-RateLimit-Remaining", remaining(result));
      res.setHeader("X-RateLimit-Reset", reset(result));
      next();
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        // The limit's own headers here; Retry-After comes with the error (http/errors.ts).
        for (const [name, value] of Object.entries(headers(err))) res.setHeader(name, value);
        next(new Busy(Math.ceil(err.msBeforeNext / 1000), "Too many requests."));
      } else {
        next(err);
      }
    }
  };
  return { middleware, close };
}
