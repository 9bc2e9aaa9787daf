import { CurrentTeam, MemberList, PaginationQuery, TeamDetail, TeamIdParams, TeamList, TeamRole, TeamSettingsMutation, UpdateTeamSettingsBody, storedFeatures } from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import type { Services } from "../../services/index.js";
import type { TeamScope } from "../../domain/scope.js";
import { teamDto, settingsDto, teamDetailDto } from "../mappers/teams.js";

async function teamDetail(services: Services, scope: TeamScope, id: number) {
  return teamDetailDto(await services.teams.get(scope, id));
}

/** The token's own team: the detail and the team's paid features. */
async function currentTeam(services: Services, scope: TeamScope) {
  const t = await services.teams.get(scope, scope.teamId);
  return { ...teamDetailDto(t), features: storedFeatures(t.features) };
}

async function members(services: Services, scope: TeamScope, teamId: number, query: PaginationQuery) {
  await services.teams.get(scope, teamId);
  return paginate(
    query,
    () => services.teams.countMembers(scope, teamId),
    async (w) =>
      (await services.teams.members(scope, teamId, w)).map((m) => ({
        id: m.user.id,
        name: m.user.name,
        email: m.user.email,
        role: TeamRole.parse(m.role),
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
    async handler({ scope, services, query }) {
      return {
        body: await paginate(
          query,
          async () => 1,
          async (w) => ((w.skip ?? 0) > 0 ? [] : [teamDto(await services.teams.get(scope, scope.teamId))]),
        ),
      };
    },
  }),
  route({
    method: "get",
    path: "/teams/current",
    tag: "Teams",
    summary: "The team of the token",
    description: "With the team's settings (`settings`) and paid features (`features`, which instance administrators set with the `capstan` CLI).",
    responses: { 200: { description: "Team", schema: CurrentTeam }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services }) {
      return { body: await currentTeam(services, scope) };
    },
  }),
  route({
    method: "patch",
    path: "/teams/current/settings",
    tag: "Teams",
    summary: "Change the team's settings (owners only)",
    description:
      "allow_member_bind_mounts: members (not only owners and admins) may add bind mounts of server directories (storages with host_path, compose bind volumes). An extension of the spec (docs/decisions.md).",
    body: UpdateTeamSettingsBody,
    responses: { 200: { description: "Updated", schema: TeamSettingsMutation }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const t = await services.teams.updateSettings(scope, body);
      return { body: { message: "Team settings updated.", data: settingsDto(t) } };
    },
  }),
  route({
    method: "get",
    path: "/teams/current/members",
    tag: "Teams",
    summary: "Members of the token's team",
    query: PaginationQuery,
    responses: { 200: { description: "Members", schema: MemberList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return { body: await members(services, scope, scope.teamId, query) };
    },
  }),
  route({
    method: "get",
    path: "/teams/{id}",
    tag: "Teams",
    summary: "Get a team by id",
    params: TeamIdParams,
    responses: { 200: { description: "Team", schema: TeamDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: await teamDetail(services, scope, params.id) };
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
    async handler({ scope, services, params, query }) {
      return { body: await members(services, scope, params.id, query) };
    },
  }),
];
