import type { Caller } from "../domain/caller.js";
import type { ScopeFactory } from "../domain/scope.js";

/** Where a resource lives, which is what decides who may see it. */
export interface ResourcePlace {
  environmentId: number;
  projectId: number;
}

/** For each place, whether the caller may see resources there. */
export type FleetVisibility = (caller: Caller, places: readonly ResourcePlace[]) => Promise<boolean[]>;

/**
 * The one place the fleet stream asks who sees what: the team scope of the caller
 * (domain/scope.ts), which resolves roles and grants with the same rules (domain/permissions.ts)
 * as the REST API's reads of a resource: owners, admins, automation tokens and viewers see the
 * whole team, members what their project and environment grants give. A scope keeps what it
 * read, so each call takes a fresh one: grants are read afresh for every batch of events.
 */
export function scopeVisibility(scopes: ScopeFactory): FleetVisibility {
  return (caller, places) => scopes(caller).canSeeEnvironments(places.map((p) => ({ id: p.environmentId, projectId: p.projectId })));
}
