import { CurrentTeam, MemberList, PaginationQuery, TeamDetail, TeamIdParams, TeamList, storedFeatures, type TeamRole } from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR, iso } from "../dto.js";
import type { Services } from "../../services/index.js";
import type { AuthContext } from "../auth.js";

const teamDto = (t: { id: number; name: string; description: string; createdAt: Date }) => ({
  id: t.id,
  name: t.name,
  description: t.description,
  created_at: iso(t.createdAt),
});

async function teamDetail(services: Services, auth: AuthContext, id: number) {
  const t = await services.teams.get(auth, id);
  return { ...teamDto(t), members_count: t._count.memberships };
}

async function currentTeam(services: Services, auth: AuthContext) {
  const t = await services.teams.get(auth, auth.teamId);
  return { ...teamDto(t), members_count: t._count.memberships, features: storedFeatures(t.features) };
}

async function members(services: Services, auth: AuthContext, teamId: number, query: PaginationQuery) {
  await services.teams.get(auth, teamId);
  return paginate(
    query,
    () => services.teams.countMembers(teamId),
    async (w) =>
      (await services.teams.members(auth, teamId, w)).map((m) => ({
        id: m.user.id,
        name: m.user.name,
        email: m.user.email,
        role: m.role as TeamRole,
      })),
  );
}

export const teamRoutes = [
  route({
    method: "get",
    path: "/teams",
    tag: "Teams",
    summary: "List teams (the token's own team)",
    query: PaginationQuery,
    responses: { 200: { description: "Teams", schema: TeamList }, 401: ERR[401], 403: ERR[403] },
    async handler({ auth, services, query }) {
      return {
        body: await paginate(
          query,
          async () => 1,
          async (w) => ((w.skip ?? 0) > 0 ? [] : [teamDto(await services.teams.get(auth, auth.teamId))]),
        ),
      };
    },
  }),
  route({
    method: "get",
    path: "/teams/current",
    tag: "Teams",
    summary: "The team of the token",
    description: "With the team's paid features (`features`), which instance administrators set with the `capstan` CLI.",
    responses: { 200: { description: "Team", schema: CurrentTeam }, 401: ERR[401], 403: ERR[403] },
    async handler({ auth, services }) {
      return { body: await currentTeam(services, auth) };
    },
  }),
  route({
    method: "get",
    path: "/teams/current/members",
    tag: "Teams",
    summary: "Members of the token's team",
    query: PaginationQuery,
    responses: { 200: { description: "Members", schema: MemberList }, 401: ERR[401], 403: ERR[403] },
    async handler({ auth, services, query }) {
      return { body: await members(services, auth, auth.teamId, query) };
    },
  }),
  route({
    method: "get",
    path: "/teams/{id}",
    tag: "Teams",
    summary: "Get a team by id",
    params: TeamIdParams,
    responses: { 200: { description: "Team", schema: TeamDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ auth, services, params }) {
      return { body: await teamDetail(services, auth, params.id) };
    },
  }),
  route({
    method: "get",
    path: "/teams/{id}/members",
    tag: "Teams",
    summary: "Members of a team",
    params: TeamIdParams,
    query: PaginationQuery,
    responses: { 200: { description: "Members", schema: MemberList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ auth, services, params, query }) {
      return { body: await members(services, auth, params.id, query) };
    },
  }),
];
