import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { RateLimiterMemory } from "rate-limiter-flexible";
import { TOKEN_SCOPES, TeamRole, type TokenScope } from "@capstan/shared";
import type { Db } from "../db/client.js";
import { generateApiToken, hashApiToken } from "../crypto/api-token.js";
import { hashPassword, needsRehash, passwordProblem, verifyPassword } from "../crypto/password.js";
import { Busy, Invalid, NotFound, Unauthenticated } from "../domain/errors.js";

/**
 * Dashboard sign-in (issue 22, docs/dashboard.md, docs/decisions.md "Dashboard sessions").
 * A session is an HTTP-only cookie holding a random secret (only its sha256 is stored). The
 * dashboard never calls the API with the cookie: it asks the session for a short-lived API
 * token (POST /session/token, CSRF-checked) and calls /api/v1 and /fleet with that, so the
 * API keeps accepting bearer tokens only.
 */
export const SESSION_TTL_MS = 12 * 60 * 60 * 1000;
/** What a minted token lives: the dashboard asks for a new one well before this. */
export const SESSION_TOKEN_TTL_MS = 15 * 60 * 1000;
export const SIGN_IN_LINK_TTL_MS = 15 * 60 * 1000;
export const SESSION_TOKEN_NAME = "dashboard session";

/** Sign-in throttles: failed attempts per email and per client address, in a 15-minute window. */
export const FAILURES_PER_EMAIL = 10;
export const FAILURES_PER_ADDRESS = 50;
const THROTTLE_WINDOW_S = 15 * 60;

const sha256 = (v: string) => createHash("sha256").update(v).digest("hex");
const secret = () => randomBytes(32).toString("base64url");
const SECRET = /^[A-Za-z0-9_-]{43}$/;

export interface SessionTeam {
  id: number;
  name: string;
  role: TeamRole;
}

export interface SessionView {
  user: { id: number; name: string; email: string };
  team: SessionTeam;
  teams: SessionTeam[];
}

export interface ActiveSession extends SessionView {
  id: number;
  tokenIds: number[];
}

/** The scopes a session's token carries: what the user's role may ever use (a viewer reads). */
export function scopesForRole(role: TeamRole): TokenScope[] {
  return role === "viewer" ? ["read"] : [...TOKEN_SCOPES];
}

const TOKEN_ROW = { id: true, name: true, scopes: true, createdAt: true, lastUsedAt: true } as const;
export interface TokenRow {
  id: number;
  name: string;
  scopes: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

/** A hash to verify against when the email is unknown: the answer takes as long either way. */
let decoy: Promise<string> | undefined;

export class Sessions {
  private readonly byEmail = new RateLimiterMemory({ points: FAILURES_PER_EMAIL, duration: THROTTLE_WINDOW_S });
  private readonly byAddress = new RateLimiterMemory({ points: FAILURES_PER_ADDRESS, duration: THROTTLE_WINDOW_S });

  constructor(private readonly db: Db) {}

  /** The CSRF token of a session: an HMAC of the cookie's secret, so nothing more is stored. */
  csrfOf(cookieSecret: string): string {
    return createHmac("sha256", cookieSecret).update("capstan csrf").digest("base64url");
  }

  csrfMatches(cookieSecret: string, given: string | undefined): boolean {
    if (!given) return false;
    const a = Buffer.from(this.csrfOf(cookieSecret));
    const b = Buffer.from(given);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  private async teamsOf(userId: number): Promise<SessionTeam[]> {
    const rows = await this.db.membership.findMany({ where: { userId }, include: { team: { select: { id: true, name: true } } }, orderBy: { teamId: "asc" } });
    return rows.map((m) => ({ id: m.team.id, name: m.team.name, role: TeamRole.parse(m.role) }));
  }

  private async throttled(email: string, address: string): Promise<void> {
    const [e, a] = await Promise.all([this.byEmail.get(email), this.byAddress.get(address)]);
    const blocked = [e && e.consumedPoints >= FAILURES_PER_EMAIL ? e : null, a && a.consumedPoints >= FAILURES_PER_ADDRESS ? a : null].filter((x) => x !== null);
    if (blocked.length) {
      const wait = Math.max(...blocked.map((b) => Math.ceil(b.msBeforeNext / 1000)));
      throw new Busy(wait, "Too many failed sign-in attempts; try again later.");
    }
  }

  private async failed(email: string, address: string): Promise<never> {
    await Promise.all([this.byEmail.penalty(email, 1), this.byAddress.penalty(address, 1)]);
    throw new Unauthenticated("Wrong email or password.");
  }

  /** Email and password; returns the new session's cookie secret. */
  async signIn(emailRaw: string, password: string, address: string): Promise<string> {
    const email = emailRaw.trim().toLowerCase();
    await this.throttled(email, address);
    const user = await this.db.user.findUnique({ where: { email }, include: { password: true } });
    const stored = user?.password?.hash;
    const ok = await verifyPassword(password, stored ?? (await (decoy ??= hashPassword(secret()))));
    if (!user || !stored || !ok) return this.failed(email, address);
    if (needsRehash(stored)) await this.db.userPassword.update({ where: { userId: user.id }, data: { hash: await hashPassword(password) } });
    await this.byEmail.delete(email);
    return this.open(user.id);
  }

  /** A one-time link's secret; returns the new session's cookie secret. */
  async signInWithLink(linkSecret: string, address: string): Promise<string> {
    await this.throttled("", address);
    if (!SECRET.test(linkSecret)) return this.failedLink(address);
    const now = new Date();
    // One statement marks it used: two tabs opening the same link get one session.
    const used = await this.db.signInLink.updateMany({ where: { secretHash: sha256(linkSecret), usedAt: null, expiresAt: { gt: now } }, data: { usedAt: now } });
    if (used.count !== 1) return this.failedLink(address);
    const link = await this.db.signInLink.findUniqueOrThrow({ where: { secretHash: sha256(linkSecret) } });
    return this.open(link.userId);
  }

  private async failedLink(address: string): Promise<never> {
    await this.byAddress.penalty(address, 1);
    throw new Unauthenticated("This sign-in link is not valid: it was used, or it expired. Ask for a new one (capstan user sign-in-link).");
  }

  private async open(userId: number): Promise<string> {
    const teams = await this.teamsOf(userId);
    if (!teams.length) throw new Unauthenticated("This user is not a member of any team.");
    const s = secret();
    await this.db.dashboardSession.create({ data: { userId, teamId: teams[0]!.id, secretHash: sha256(s), expiresAt: new Date(Date.now() + SESSION_TTL_MS) } });
    return s;
  }

  /** The session behind a cookie secret as it stands now, or null (none, expired, signed out, no team left). */
  async resolve(cookieSecret: string | undefined): Promise<ActiveSession | null> {
    if (!cookieSecret || !SECRET.test(cookieSecret)) return null;
    const row = await this.db.dashboardSession.findUnique({ where: { secretHash: sha256(cookieSecret) }, include: { user: { select: { id: true, name: true, email: true } } } });
    if (!row || row.revokedAt || row.expiresAt.getTime() <= Date.now()) return null;
    const teams = await this.teamsOf(row.userId);
    // Removed from the session's team meanwhile: it falls back to another team of the user.
    const team = teams.find((t) => t.id === row.teamId) ?? teams[0];
    if (!team) return null;
    if (team.id !== row.teamId) await this.db.dashboardSession.update({ where: { id: row.id }, data: { teamId: team.id } });
    return { id: row.id, user: row.user, team, teams, tokenIds: JSON.parse(row.tokenIds) as number[] };
  }

  async switchTeam(session: ActiveSession, teamId: number): Promise<void> {
    if (!session.teams.some((t) => t.id === teamId)) throw new NotFound("Team");
    // The tokens of the old team stop working: the page reloads its data with a new one.
    await this.revokeTokens(session);
    await this.db.dashboardSession.update({ where: { id: session.id }, data: { teamId, tokenIds: "[]" } });
  }

  /** A short-lived API token of the session's user in the session's team. */
  async mintToken(session: ActiveSession): Promise<{ token: string; expiresAt: Date }> {
    const token = generateApiToken();
    const expiresAt = new Date(Date.now() + SESSION_TOKEN_TTL_MS);
    const row = await this.db.apiToken.create({
      data: { teamId: session.team.id, userId: session.user.id, name: SESSION_TOKEN_NAME, secretHash: hashApiToken(token), scopes: scopesForRole(session.team.role).join(","), expiresAt },
    });
    // Ids of tokens that expired anyway are dropped: the list stays a handful long.
    const live = await this.db.apiToken.findMany({ where: { id: { in: session.tokenIds }, expiresAt: { gt: new Date() } }, select: { id: true } });
    await this.db.dashboardSession.update({ where: { id: session.id }, data: { tokenIds: JSON.stringify([...live.map((t) => t.id), row.id]) } });
    return { token, expiresAt };
  }

  async signOut(session: ActiveSession): Promise<void> {
    await this.revokeTokens(session);
    await this.db.dashboardSession.update({ where: { id: session.id }, data: { revokedAt: new Date() } });
  }

  private async revokeTokens(session: ActiveSession): Promise<void> {
    if (session.tokenIds.length) await this.db.apiToken.updateMany({ where: { id: { in: session.tokenIds }, revokedAt: null }, data: { revokedAt: new Date() } });
  }

  // ---- the API Tokens page: the signed-in user's own tokens in the session's team ----

  private ownTokens(session: ActiveSession) {
    return { teamId: session.team.id, userId: session.user.id, revokedAt: null, name: { not: SESSION_TOKEN_NAME } };
  }

  async listTokens(session: ActiveSession): Promise<TokenRow[]> {
    return this.db.apiToken.findMany({ where: this.ownTokens(session), orderBy: { id: "desc" }, select: TOKEN_ROW });
  }

  /** A user token with the chosen scopes, which must be ones the user's role may use. Returns the value (shown once). */
  async createToken(session: ActiveSession, name: string, scopes: TokenScope[]): Promise<{ token: string; row: TokenRow }> {
    const allowed = scopesForRole(session.team.role);
    const refused = scopes.filter((s) => !allowed.includes(s));
    if (refused.length) throw new Invalid({ scopes: [`Your role (${session.team.role}) cannot give a token ${refused.join(", ")}.`] });
    if (name === SESSION_TOKEN_NAME) throw new Invalid({ name: [`"${SESSION_TOKEN_NAME}" is the name of the dashboard's own tokens; choose another.`] });
    const token = generateApiToken();
    const row = await this.db.apiToken.create({
      data: { teamId: session.team.id, userId: session.user.id, name, secretHash: hashApiToken(token), scopes: TOKEN_SCOPES.filter((s) => scopes.includes(s)).join(",") },
      select: TOKEN_ROW,
    });
    return { token, row };
  }

  async revokeToken(session: ActiveSession, id: number): Promise<void> {
    const done = await this.db.apiToken.updateMany({ where: { id, ...this.ownTokens(session) }, data: { revokedAt: new Date() } });
    if (done.count !== 1) throw new NotFound("API token");
  }

  // ---- for the CLI (capstan user password, capstan user sign-in-link) ----

  async setPassword(userId: number, password: string): Promise<void> {
    const problem = passwordProblem(password);
    if (problem) throw new Invalid({ password: [problem] });
    if (!(await this.db.user.findUnique({ where: { id: userId } }))) throw new NotFound("User");
    const hash = await hashPassword(password);
    await this.db.userPassword.upsert({ where: { userId }, create: { userId, hash }, update: { hash } });
  }

  /** Returns the link's secret (printed once). */
  async createSignInLink(userId: number): Promise<string> {
    if (!(await this.db.user.findUnique({ where: { id: userId } }))) throw new NotFound("User");
    const s = secret();
    await this.db.signInLink.create({ data: { userId, secretHash: sha256(s), expiresAt: new Date(Date.now() + SIGN_IN_LINK_TTL_MS) } });
    return s;
  }
}
