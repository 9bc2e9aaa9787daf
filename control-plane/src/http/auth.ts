import type { RequestHandler } from "express";
import { TeamRole, TokenScope, storedFeatures, type Feature } from "@capstan/shared";
import type { Caller } from "../domain/caller.js";
import type { Db } from "../db/client.js";
import { toDate, toInt, type SqlReader } from "../db/reader.js";
import { hashApiToken, looksLikeApiToken } from "../crypto/api-token.js";
import { Forbidden, Unauthenticated } from "../domain/errors.js";
import { requiredScope, type AnyRoute } from "./route.js";

declare module "express-serve-static-core" {
  interface Request {
    /** The caller behind the bearer token, when it is valid (resolveToken). */
    auth?: Caller;
    /** request id, set by the request logger */
    id?: string;
    /**
     * The version of the token's team's data (TeamVersion, bumped by database triggers) read
     * together with the token, before anything else of the request: the response cache's key.
     */
    teamVersion?: number;
  }
}

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * One query: the token, for a user token the user's membership of the token's team, the
 * version of the team's data (http/response-cache.ts) and the team's paid features (the
 * feature gate: no query of its own).
 */
const TOKEN_SQL = `SELECT t."id", t."teamId", t."userId", t."scopes", t."revokedAt", t."expiresAt", m."role", v."version", tm."features"
  FROM "ApiToken" t
  LEFT JOIN "Membership" m ON m."userId" = t."userId" AND m."teamId" = t."teamId"
  LEFT JOIN "TeamVersion" v ON v."teamId" = t."teamId"
  LEFT JOIN "Team" tm ON tm."id" = t."teamId"
  WHERE t."secretHash" = ?`;

interface TokenRow {
  id: number;
  teamId: number;
  userId: number | null;
  scopes: string;
  revokedAt: unknown;
  expiresAt: unknown;
  role: string | null;
  version: number | string | null;
  features: string | null;
}

/** The same few scope lists on every request: one frozen set per distinct list. */
const scopeSets = new Map<string, ReadonlySet<TokenScope>>();
function scopeSet(list: string): ReadonlySet<TokenScope> {
  let set = scopeSets.get(list);
  if (!set) {
    // Parsed with the shared enum: a name this version does not know grants nothing.
    set = new Set(list.split(",").flatMap((s) => {
      const scope = TokenScope.safeParse(s);
      return scope.success ? [scope.data] : [];
    }));
    if (scopeSets.size < 64) scopeSets.set(list, set);
  }
  return set;
}

/** Likewise for the teams' feature lists. */
const featureSets = new Map<string, ReadonlySet<Feature>>();
function featureSet(list: string): ReadonlySet<Feature> {
  let set = featureSets.get(list);
  if (!set) {
    set = new Set(storedFeatures(list));
    if (featureSets.size < 64) featureSets.set(list, set);
  }
  return set;
}

/**
 * Resolves the bearer token (if any) into req.auth. It never rejects by itself: the rate
 * limiter runs next (so failed guesses are throttled per address) and requireAuth answers 401.
 * Every request reads the token and membership afresh (one indexed join, nothing cached), so a
 * revocation or a member removal done by another process applies to the next request.
 */
export function resolveToken(db: Db, reader: SqlReader): RequestHandler {
  const lastUsedWritten = new Map<number, number>();
  return async (req, _res, next) => {
    try {
      const header = req.headers.authorization;
      const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
      const token = match?.[1];
      if (!token || !looksLikeApiToken(token)) return next();
      const [row] = await reader.all<TokenRow>(TOKEN_SQL, [hashApiToken(token)]);
      const now = Date.now();
      if (!row || row.revokedAt !== null || (row.expiresAt !== null && toDate(row.expiresAt).getTime() <= now)) return next();
      const id = toInt(row.id);
      const userId = row.userId === null ? null : toInt(row.userId);
      let role: TeamRole = "admin";
      if (userId !== null) {
        if (row.role === null) return next(); // the user left the team: the token no longer works
        role = TeamRole.parse(row.role);
      }
      req.auth = {
        tokenId: id,
        teamId: toInt(row.teamId),
        userId,
        role,
        scopes: scopeSet(row.scopes),
        features: featureSet(row.features ?? ""),
      };
      if (row.version !== null) req.teamVersion = toInt(row.version);
      if (now - (lastUsedWritten.get(id) ?? 0) > LAST_USED_RESOLUTION_MS) {
        lastUsedWritten.set(id, now);
        void db.apiToken.update({ where: { id }, data: { lastUsedAt: new Date(now) } }).catch(() => {});
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}

export function requireAuth(req: { auth?: Caller }): Caller {
  if (!req.auth) throw new Unauthenticated("Unauthenticated.");
  return req.auth;
}

export function requireScope(auth: Caller, r: AnyRoute): void {
  requireTokenScope(auth, requiredScope(r));
}

/**
 * A scope a request needs besides its route's: a field that makes a write also trigger a
 * deployment (instant_deploy, docs/compatibility.md) needs deploy too. 403 as the route's check.
 */
export function requireTokenScope(auth: Caller, scope: TokenScope): void {
  if (!auth.scopes.has(scope)) throw new Forbidden("Invalid ability provided.");
}
