import type { Db } from "../db/client.js";
import type { Caller } from "../domain/caller.js";
import { NotFound } from "../domain/errors.js";

/** Read-only team views (spec 4.1). A token sees exactly one team: its own. */
export class TeamService {
  constructor(private readonly db: Db) {}

  async get(auth: Caller, teamId: number) {
    if (teamId !== auth.teamId) throw new NotFound("Team");
    const team = await this.db.team.findUnique({
      where: { id: teamId },
      include: { _count: { select: { memberships: true } } },
    });
    if (!team) throw new NotFound("Team");
    return team;
  }

  async members(auth: Caller, teamId: number, window: { skip?: number; take?: number }) {
    if (teamId !== auth.teamId) throw new NotFound("Team");
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
}
