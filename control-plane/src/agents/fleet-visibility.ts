import type { TeamRole, TokenScope } from "@capstan/shared";
import type { AccessService } from "../services/access.js";

/**
 * Who holds a /fleet socket, read afresh from its API token: the shape of the HTTP layer's
 * AuthContext (and of the domain layer's Caller), declared here so agents/ imports nothing
 * from http/.
 */
export interface FleetCaller {
  tokenId: number;
  teamId: number;
  /** null for a team automation token */
  userId: number | null;
  role: TeamRole;
  scopes: ReadonlySet<TokenScope>;
}

/** Where a resource lives, which is what decides who may see it. */
export interface ResourcePlace {
  environmentId: number;
  projectId: number;
}

/** For each place, whether the caller may see resources there. */
export type FleetVisibility = (caller: FleetCaller, places: readonly ResourcePlace[]) => Promise<boolean[]>;

/**
 * The one place the fleet stream asks who sees what: the rules of AccessService (owners,
 * admins, automation tokens and viewers see the whole team; members what their project and
 * environment grants give), as the REST API applies them to a resource's reads. Each call gets
 * a fresh caller, so grants are read afresh for every batch of events.
 */
export function accessVisibility(access: AccessService): FleetVisibility {
  return async (caller, places) => {
    const fresh: FleetCaller = { ...caller };
    if (access.seesWholeTeam(fresh)) return places.map(() => true);
    return Promise.all(places.map((p) => access.canSeeEnvironment(fresh, { id: p.environmentId, projectId: p.projectId })));
  };
}
