import express, { type Request, type RequestHandler, type Response, type Router } from "express";
import type { z } from "zod";
import { CSRF_HEADER, CreateDashboardTokenBody, SignInBody, SignInLinkBody, SwitchTeamBody, TokenScope, type CreatedDashboardToken, type DashboardTokenView, type SessionToken, type SessionView } from "@capstan/shared";
import { Invalid, Unauthenticated, Forbidden } from "../domain/errors.js";
import { bodyReadError, fieldErrorsOf, HttpError } from "./errors.js";
import { SESSION_TTL_MS, scopesForRole, type ActiveSession, type Sessions, type TokenRow } from "../services/sessions.js";

const tokenView = (t: TokenRow): DashboardTokenView => ({
  id: t.id,
  name: t.name,
  scopes: t.scopes.split(",").flatMap((s) => {
    const p = TokenScope.safeParse(s);
    return p.success ? [p.data] : [];
  }),
  created_at: t.createdAt.toISOString(),
  last_used_at: t.lastUsedAt?.toISOString() ?? null,
});

export const SESSION_COOKIE = "capstan_session";

export interface SessionRouterDeps {
  sessions: Sessions;
  /** PLATFORM_PUBLIC_URL: its origin is accepted besides the request's own; https there makes the cookie Secure. */
  publicUrl: string;
  clientAddress: (req: Request) => string;
}

function cookieOf(req: Request): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === SESSION_COOKIE) return part.slice(i + 1).trim();
  }
  return undefined;
}

/**
 * Requests from another site are refused before anything else (docs/decisions.md "Dashboard
 * sessions"): a browser says where a request comes from (Sec-Fetch-Site, Origin), and the
 * cookie is SameSite=Strict besides. Non-browser clients send neither header and carry no
 * cookie of ours unless they hold the secret anyway.
 */
function sameOrigin(publicUrl: string): RequestHandler {
  const publicOrigin = new URL(publicUrl).origin;
  return (req, _res, next) => {
    const site = req.headers["sec-fetch-site"];
    if (site !== undefined && site !== "same-origin" && site !== "none") return next(new Forbidden("Cross-site request refused."));
    const origin = req.headers.origin;
    if (origin !== undefined && origin !== publicOrigin && origin !== `${req.protocol}://${req.get("host")}`) return next(new Forbidden("Cross-site request refused."));
    next();
  };
}

function parse<T extends z.ZodType>(schema: T, body: unknown): z.infer<T> {
  const r = schema.safeParse(body ?? {});
  if (!r.success) throw new Invalid(fieldErrorsOf(r.error));
  return r.data;
}

/**
 * /session: sign in (password or one-time link), who am I, switch team, a short-lived API
 * token for the page, sign out. Every POST but the sign-ins needs the session's CSRF token in
 * X-CSRF-Token; every request must come from the dashboard's own origin.
 */
export function sessionRouter(deps: SessionRouterDeps): Router {
  const { sessions } = deps;
  const secure = deps.publicUrl.startsWith("https:");
  const r = express.Router();
  r.use((_req, res, next) => {
    res.setHeader("Cache-Control", "no-store");
    next();
  });
  r.use(sameOrigin(deps.publicUrl));
  // JSON only: a cross-site HTML form cannot send application/json without a CORS preflight.
  r.use((req, _res, next) => {
    if (req.method === "POST" && !req.is("application/json")) return next(new HttpError(415, "Send the request body as JSON with Content-Type: application/json."));
    next();
  });
  const json = express.json({ limit: 4096, strict: true });
  r.use((req, res, next) => json(req, res, (err?: unknown) => (err ? next(bodyReadError(err, req.headers["content-encoding"]) ?? err) : next())));

  const setCookie = (res: Response, value: string, maxAgeMs: number) =>
    res.cookie(SESSION_COOKIE, value, { httpOnly: true, sameSite: "strict", secure, path: "/", maxAge: maxAgeMs });

  const view = (s: ActiveSession, secret: string): SessionView => ({ user: s.user, team: s.team, teams: s.teams, csrf_token: sessions.csrfOf(secret) });

  const signedIn = async (res: Response, secret: string) => {
    const s = await sessions.resolve(secret);
    if (!s) throw new Unauthenticated("Unauthenticated.");
    setCookie(res, secret, SESSION_TTL_MS);
    res.json(view(s, secret));
  };

  /** The request's session, with its CSRF token checked when `csrf`. */
  const session = async (req: Request, csrf: boolean): Promise<{ s: ActiveSession; secret: string }> => {
    const secret = cookieOf(req);
    const s = await sessions.resolve(secret);
    if (!s || !secret) throw new Unauthenticated("Unauthenticated.");
    if (csrf && !sessions.csrfMatches(secret, req.get(CSRF_HEADER))) throw new Forbidden("Missing or wrong CSRF token.");
    return { s, secret };
  };

  const route = (fn: (req: Request, res: Response) => Promise<void>): RequestHandler => (req, res, next) => void fn(req, res).catch(next);

  r.get("/", route(async (req, res) => {
    const { s, secret } = await session(req, false);
    res.json(view(s, secret));
  }));
  r.post("/sign-in", route(async (req, res) => {
    const body = parse(SignInBody, req.body);
    await signedIn(res, await sessions.signIn(body.email, body.password, deps.clientAddress(req)));
  }));
  r.post("/link", route(async (req, res) => {
    const body = parse(SignInLinkBody, req.body);
    await signedIn(res, await sessions.signInWithLink(body.link, deps.clientAddress(req)));
  }));
  r.post("/team", route(async (req, res) => {
    const { s, secret } = await session(req, true);
    const body = parse(SwitchTeamBody, req.body);
    await sessions.switchTeam(s, body.team_id);
    await signedIn(res, secret);
  }));
  r.post("/token", route(async (req, res) => {
    const { s } = await session(req, true);
    const minted = await sessions.mintToken(s);
    const out: SessionToken = { token: minted.token, scopes: scopesForRole(s.team.role), expires_at: minted.expiresAt.toISOString() };
    res.json(out);
  }));
  r.post("/sign-out", route(async (req, res) => {
    const { s } = await session(req, true);
    await sessions.signOut(s);
    res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: "strict", secure, path: "/" });
    res.status(204).end();
  }));
  // Keys and Tokens -> API Tokens: the user's own tokens in the session's team.
  r.get("/api-tokens", route(async (req, res) => {
    const { s } = await session(req, false);
    res.json({ data: (await sessions.listTokens(s)).map(tokenView) });
  }));
  r.post("/api-tokens", route(async (req, res) => {
    const { s } = await session(req, true);
    const body = parse(CreateDashboardTokenBody, req.body);
    const created = await sessions.createToken(s, body.name, body.scopes);
    const out: CreatedDashboardToken = { token: created.token, data: tokenView(created.row) };
    res.status(201).json(out);
  }));
  r.delete("/api-tokens/:id", route(async (req, res) => {
    const { s } = await session(req, true);
    const id = /^[1-9][0-9]{0,9}$/.test(String(req.params.id)) ? Number(req.params.id) : 0;
    if (!id || id > 2 ** 31 - 1) throw new Invalid({ id: ["Use a token id (a positive integer)."] });
    await sessions.revokeToken(s, id);
    res.json({ message: "Token revoked." });
  }));
  return r;
}
