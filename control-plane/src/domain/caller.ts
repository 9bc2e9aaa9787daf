import type { Feature, TeamRole, TokenScope } from "@capstan/shared";

/**
 * Who is asking: the identity behind a request's API token, as http/auth.ts resolved it. Every
 * rule below http/ that depends on the caller reads it from here (through the team scope,
 * domain/scope.ts, for anything that concerns objects of the team).
 */
export interface Caller {
  tokenId: number;
  teamId: number;
  /** null for a team automation token (created without --user): full access inside its team */
  userId: number | null;
  role: TeamRole;
  scopes: ReadonlySet<TokenScope>;
  /** The team's paid features, read with the token (the feature gate, domain/features.ts). */
  features: ReadonlySet<Feature>;
}
