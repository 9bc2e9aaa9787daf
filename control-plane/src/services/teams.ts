import type { UpdateTeamSettingsBody } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { Forbidden, NotFound } from "../domain/errors.js";

/**
 * Team views (spec 4.1; a token sees exactly one team: its own) and the team's settings, which
 * its owners change (an extension of the spec: docs/decisions.md).
 */
export class TeamService {
  constructor(private readonly db: Db) {}

  async get(scope: TeamScope, teamId: number) {
    const team = await this.db.team.findUnique({
      where: { id: scope.ownTeam(teamId) },
      include: { _count: { select: { memberships: true } } },
    });
    if (!team) throw new NotFound("Team");
    return team;
  }

  async members(scope: TeamScope, teamId: number, window: { skip?: number; take?: number }) {
    return this.db.membership.findMany({
      where: { teamId: scope.ownTeam(teamId) },
      orderBy: { id: "asc" },
      include: { user: true },
      ...window,
    });
  }

  countMembers(scope: TeamScope, teamId: number) {
    return this.db.membership.count({ where: { teamId: scope.ownTeam(teamId) } });
  }

  /**
   * Changes the team's settings (allow_member_bind_mounts). Owners only: a setting decides what
   * every member may do on the team's servers, which is the owners' call, not the admins'.
   */
  async updateSettings(scope: TeamScope, input: UpdateTeamSettingsBody) {
    if (scope.caller.userId === null || scope.caller.role !== "owner") throw new Forbidden("Only team owners can change the team's settings.");
    return this.db.team.update({ where: { id: scope.teamId }, data: { allowMemberBindMounts: input.allow_member_bind_mounts } });
  }
}
