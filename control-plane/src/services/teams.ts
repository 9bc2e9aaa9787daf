import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound } from "../domain/errors.js";

/** Read-only team views (spec 4.1). A token sees exactly one team: its own. */
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
}
