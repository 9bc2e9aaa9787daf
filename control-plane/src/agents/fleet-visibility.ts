import type { AuthContext } from "../http/auth.js";
import type { AccessService } from "../services/access.js";

/** Where a resource lives, which is what decides who may see it. */
export interface ResourcePlace {
  environmentId: number;
  projectId: number;
}

/** For each place, whether the caller may see resources there. */
export type FleetVisibility = (caller: AuthContext, places: readonly ResourcePlace[]) => Promise<boolean[]>;

/**
 * The one place the fleet stream asks who sees what: the rules of AccessService (owners,
 * admins, automation tokens and viewers see the whole team; members what their project and
 * environment grants give), as the REST API applies them to a resource's reads. Each call gets
 * a fresh caller, so grants are read afresh for every batch of events.
 */
export function accessVisibility(access: AccessService): FleetVisibility {
  return async (caller, places) => {
    const fresh: AuthContext = { ...caller };
    if (access.seesWholeTeam(fresh)) return places.map(() => true);
    return Promise.all(places.map((p) => access.canSeeEnvironment(fresh, { id: p.environmentId, projectId: p.projectId })));
  };
}
