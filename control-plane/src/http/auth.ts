import type { RequestHandler } from "express";
import type { TeamRole, TokenScope } from "@capstan/shared";
import type { Db } from "../db/client.js";
import { hashApiToken, looksLikeApiToken } from "../crypto/api-token.js";
import { AppError } from "./errors.js";
import { requiredScope, type AnyRoute } from "./route.js";

export interface AuthContext {
  tokenId: number;
  teamId: number;
  /** null for a team automation token (created without --user): full access inside its team */
  userId: number | null;
  role: TeamRole;
  scopes: ReadonlySet<TokenScope>;
}

declare module "express-serve-static-core" {
  interface Request {
    auth?: AuthContext;
  }
}

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Resolves the bearer token (if any) into req.auth. It never rejects by itself: the rate
 * limiter runs next (so failed guesses are throttled per address) and requireAuth answers 401.
 */
export function resolveToken(db: Db): RequestHandler {
  const lastUsedWritten = new Map<number, number>();
  return async (req, _res, next) => {
    try {
      const header = req.headers.authorization;
      const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
      const token = match?.[1];
      if (!token || !looksLikeApiToken(token)) return next();
      const row = await db.apiToken.findUnique({
        where: { secretHash: hashApiToken(token) },
        select: {
          id: true,
          teamId: true,
          userId: true,
          scopes: true,
          revokedAt: true,
          expiresAt: true,
          user: { select: { memberships: { select: { teamId: true, role: true } } } },
        },
      });
      const now = Date.now();
      if (!row || row.revokedAt || (row.expiresAt && row.expiresAt.getTime() <= now)) return next();
      let role: TeamRole = "admin";
      if (row.userId !== null) {
        const membership = row.user?.memberships.find((m) => m.teamId === row.teamId);
        if (!membership) return next(); // the user left the team: the token no longer works
        role = membership.role as TeamRole;
      }
      req.auth = {
        tokenId: row.id,
        teamId: row.teamId,
        userId: row.userId,
        role,
        scopes: new Set(row.scopes.split(",").filter(Boolean) as TokenScope[]),
      };
      if (now - (lastUsedWritten.get(row.id) ?? 0) > LAST_USED_RESOLUTION_MS) {
        lastUsedWritten.set(row.id, now);
        void db.apiToken.update({ where: { id: row.id }, data: { lastUsedAt: new Date(now) } }).catch(() => {});
      }
      next();
    } catch (err) {
      next(err);
    }
  };
}

export function requireAuth(req: { auth?: AuthContext }): AuthContext {
  if (!req.auth) throw new AppError(401, "Unauthenticated.");
  return req.auth;
}

export function requireScope(auth: AuthContext, r: AnyRoute): void {
  if (!auth.scopes.has(requiredScope(r))) throw new AppError(403, "Invalid ability provided.");
}
