import type { UpdateTeamSettingsBody } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { AuthContext } from "../http/auth.js";
import { forbidden, notFound } from "../http/errors.js";

/**
 * Team views (spec 4.1; a token sees exactly one team: its own) and the team's settings, which
 * its owners change (an extension of the spec: docs/decisions.md).
 */
export class TeamService {
  constructor(private readonly db: Db) {}

  async get(auth: AuthContext, teamId: number) {
    if (teamId !== auth.teamId) throw notFound("Team");
    const team = await this.db.team.findUnique({
      where: { id: teamId },
      include: { _count: { select: { memberships: true } } },
    });
    if (!team) throw notFound("Team");
    return team;
  }

  async members(auth: AuthContext, teamId: number, window: { skip?: number; take?: number }) {
    if (teamId !== auth.teamId) throw notFound("Team");
    return this.db.membership.findMany({
      where: { teamId },
      orderBy: { id: "asc" },
      include: { user: true },
      ...window,
    });
  }

  countMembers(teamId: number) {
    return this.db.membership.count({ where: { teamId } });
  }

  /**
   * Changes the team's settings (allow_member_bind_mounts). Owners only: a setting decides what
   * every member may do on the team's servers, which is the owners' call, not the admins'.
   */
  async updateSettings(auth: AuthContext, input: UpdateTeamSettingsBody) {
    if (auth.userId === null || auth.role !== "owner") throw forbidden("Only team owners can change the team's settings.");
    return this.db.team.update({ where: { id: auth.teamId }, data: { allowMemberBindMounts: input.allow_member_bind_mounts } });
  }
}
