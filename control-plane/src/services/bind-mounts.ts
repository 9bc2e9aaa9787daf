import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { Forbidden } from "../domain/errors.js";

/**
 * Who may add bind mounts of server directories (storages with host_path, compose bind volumes):
 * team owners and admins (and team automation tokens) always; members only when the team's
 * owners turned on allow_member_bind_mounts (default off). Even within the shared host-path rule
 * a bind mount reaches the server's own disk, outside the project a grant covers; named volumes
 * stay open to every member who may manage the application. docs/decisions.md gives the reasons.
 *
 * `added`: the normalised server paths the change adds (empty: nothing to decide).
 */
export async function assertMayAddBindMounts(db: Db, scope: TeamScope, added: readonly string[]): Promise<void> {
  if (added.length === 0) return;
  if (scope.isTeamAdmin()) return;
  const team = await db.team.findUnique({ where: { id: scope.teamId }, select: { allowMemberBindMounts: true } });
  if (team?.allowMemberBindMounts) return;
  throw new Forbidden(
    `Only team owners and admins can add bind mounts of server directories (${added.slice(0, 5).join(", ")}); ` +
      `a team owner can let members add them with PATCH /api/v1/teams/current/settings {"allow_member_bind_mounts": true}.`,
  );
}
