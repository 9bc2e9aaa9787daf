import { z } from "zod";
import { BodyId, TeamRole, TokenScope, requestBody } from "./common.js";

/**
 * The dashboard's session endpoints (/session/*, outside /api/v1; docs/dashboard.md). Not part
 * of the public API: the browser signs in here and gets short-lived API tokens to call /api/v1.
 */
export const SignInBody = requestBody({
  email: z.string().trim().min(1).max(320),
  password: z.string().min(1).max(1024),
});
export const SignInLinkBody = requestBody({ link: z.string().min(1).max(128) });
export const SwitchTeamBody = requestBody({ team_id: BodyId });

export const SessionTeamView = z.object({ id: z.number().int(), name: z.string(), role: TeamRole });
export const SessionView = z.object({
  user: z.object({ id: z.number().int(), name: z.string(), email: z.string() }),
  team: SessionTeamView,
  teams: z.array(SessionTeamView),
  /** Send it back as the X-CSRF-Token header on every POST to /session. */
  csrf_token: z.string(),
});
export type SessionView = z.infer<typeof SessionView>;

export const SessionToken = z.object({ token: z.string(), scopes: z.array(TokenScope), expires_at: z.string() });
export type SessionToken = z.infer<typeof SessionToken>;

/** The header carrying the session's CSRF token. */
export const CSRF_HEADER = "X-CSRF-Token";

/** The dashboard's Keys and Tokens → API Tokens page (the spec: tokens are created in the dashboard, no API endpoint creates them). */
export const CreateDashboardTokenBody = requestBody({
  name: z.string().trim().min(1).max(100),
  scopes: z.array(TokenScope).min(1, "Choose at least one scope."),
});
export const DashboardTokenView = z.object({
  id: z.number().int(),
  name: z.string(),
  scopes: z.array(TokenScope),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
});
export type DashboardTokenView = z.infer<typeof DashboardTokenView>;
export const CreatedDashboardToken = z.object({ token: z.string(), data: DashboardTokenView });
export type CreatedDashboardToken = z.infer<typeof CreatedDashboardToken>;
