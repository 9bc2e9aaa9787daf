import {
  abilitiesOf,
  BulkGrantBody,
  BulkProjectParams,
  CountBody,
  EnvironmentPermissionList,
  EnvironmentPermissionParams,
  EnvironmentPermissionQuery,
  EnvironmentPermissionSummary,
  GrantEnvironmentPermissionBody,
  GrantProjectPermissionBody,
  MessageBody,
  PaginationQuery,
  PermissionLevel,
  ProjectPermission,
  ProjectPermissionList,
  ProjectPermissionParams,
  ProjectPermissionQuery,
  ProjectPermissionSummary,
  UpdateProjectPermissionBody,
} from "@capstan/shared";
import { z } from "zod";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { projectPermissionDto, projectPermissionSummary, environmentPermissionDto } from "../mappers/permissions.js";

/** The message of a grant's answer: it says so when the user's role gives it another level than granted. */
const grantMessage = (done: string, p: { level: string; effectiveLevel: string; role: string | null }) =>
  p.effectiveLevel === p.level
    ? `${done}.`
    : `${done}; the user is ${p.role === "admin" || p.role === "owner" ? "an" : "a"} ${p.role}, so it can do what ${p.effectiveLevel} allows (the ${p.level} grant is kept and applies in full if the user becomes a member).`;

const mutation = <T extends z.ZodType>(data: T) => z.object({ message: z.string(), data });
const ProjectListQuery = ProjectPermissionQuery.extend(PaginationQuery.shape);
const EnvironmentListQuery = EnvironmentPermissionQuery.extend(PaginationQuery.shape);

export const permissionRoutes = [
  route({
    method: "get",
    path: "/permissions/project",
    tag: "Permissions",
    summary: "List project permissions (members see only their own)",
    query: ProjectListQuery,
    responses: { 200: { description: "Permissions", schema: ProjectPermissionList }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, query }) {
      const filter = { project_uuid: query.project_uuid, user_id: query.user_id };
      return {
        body: await paginate(
          query,
          () => services.permissions.countProject(scope, filter),
          async (w) => (await services.permissions.listProject(scope, filter, w)).map(projectPermissionDto),
        ),
      };
    },
  }),
  route({
    method: "post",
    path: "/permissions/project/bulk",
    tag: "Permissions",
    summary: "Grant a level on a project to every member and viewer of the team",
    description:
      "Creates missing grants and raises lower ones; a higher grant is kept unless `overwrite` is true. `count` is the number of members and viewers; " +
      "the message says how many grants were created, changed and kept. Owners and admins are left out (they bypass permissions).",
    body: BulkGrantBody,
    responses: { 200: { description: "Granted", schema: CountBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const r = await services.permissions.bulkGrant(scope, body.project_uuid, body.permission_level, body.overwrite ?? false);
      const changed = body.overwrite ? `${r.changed} changed` : `${r.changed} raised`;
      const kept = body.overwrite ? `${r.kept} already at it` : `${r.kept} kept (already at it or higher; send overwrite: true to lower them)`;
      return { body: { message: `Access granted to ${r.members} members: ${r.created} new, ${changed}, ${kept}.`, count: r.members } };
    },
  }),
  route({
    method: "delete",
    path: "/permissions/project/bulk/{project_uuid}",
    tag: "Permissions",
    summary: "Remove all user access (project grants and environment overrides) from a project",
    params: BulkProjectParams,
    responses: { 200: { description: "Revoked", schema: CountBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const count = await services.permissions.bulkRevoke(scope, params.project_uuid);
      return { body: { message: `Removed ${count} permissions.`, count } };
    },
  }),
  route({
    method: "get",
    path: "/permissions/project/{id}",
    tag: "Permissions",
    summary: "Get a project permission",
    params: ProjectPermissionParams,
    responses: { 200: { description: "Permission", schema: ProjectPermission }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: projectPermissionDto(await services.permissions.getProject(scope, params.id)) };
    },
  }),
  route({
    method: "post",
    path: "/permissions/project",
    tag: "Permissions",
    summary: "Grant a member access to a project",
    description:
      "can_* say what the user can really do: the level granted, capped by the user's role (a viewer stays read-only, owners and admins have full access " +
      "whatever the grant); the message says so when they differ. GET shows both, as permission_level (effective) and granted_level.",
    body: GrantProjectPermissionBody,
    responses: {
      201: { description: "Granted", schema: mutation(ProjectPermissionSummary) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: ERR[409],
      422: ERR[422],
    },
    async handler({ scope, services, body }) {
      const p = await services.permissions.grantProject(scope, body);
      return { status: 201, body: { message: grantMessage("Permission granted", p), data: projectPermissionSummary(p) } };
    },
  }),
  route({
    method: "put",
    path: "/permissions/project/{id}",
    tag: "Permissions",
    summary: "Change the level of a project permission",
    description:
      "can_* say what the user can really do: the level granted, capped by the user's role (a viewer stays read-only, owners and admins have full access " +
      "whatever the grant); the message says so when they differ. GET shows both, as permission_level (effective) and granted_level.",
    params: ProjectPermissionParams,
    body: UpdateProjectPermissionBody,
    responses: {
      200: { description: "Updated", schema: mutation(ProjectPermissionSummary) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const p = await services.permissions.updateProject(scope, params.id, body.permission_level);
      return { body: { message: grantMessage("Permission updated", p), data: projectPermissionSummary(p) } };
    },
  }),
  route({
    method: "delete",
    path: "/permissions/project/{id}",
    tag: "Permissions",
    summary: "Revoke a project permission",
    params: ProjectPermissionParams,
    responses: { 200: { description: "Revoked", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      await services.permissions.revokeProject(scope, params.id);
      return { body: { message: "Permission revoked." } };
    },
  }),
  route({
    method: "get",
    path: "/permissions/environment",
    tag: "Permissions",
    summary: "List environment overrides (members see only their own)",
    query: EnvironmentListQuery,
    responses: { 200: { description: "Overrides", schema: EnvironmentPermissionList }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, query }) {
      const filter = { environment_id: query.environment_id, user_id: query.user_id };
      return {
        body: await paginate(
          query,
          () => services.permissions.countEnvironment(scope, filter),
          async (w) => (await services.permissions.listEnvironment(scope, filter, w)).map(environmentPermissionDto),
        ),
      };
    },
  }),
  route({
    method: "post",
    path: "/permissions/environment",
    tag: "Permissions",
    summary: "Override a member's project permission for one environment",
    description:
      "can_* say what the user can really do: the level granted, capped by the user's role (a viewer stays read-only, owners and admins have full access " +
      "whatever the grant); the message says so when they differ. GET shows both, as permission_level (effective) and granted_level.",
    body: GrantEnvironmentPermissionBody,
    responses: {
      201: { description: "Granted", schema: mutation(EnvironmentPermissionSummary) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: ERR[409],
      422: ERR[422],
    },
    async handler({ scope, services, body }) {
      const p = await services.permissions.grantEnvironment(scope, body);
      return {
        status: 201,
        body: {
          message: grantMessage("Environment permission granted", p),
          data: { id: p.id, environment_id: p.environmentId, user_id: p.userId, ...abilitiesOf(PermissionLevel.parse(p.effectiveLevel)) },
        },
      };
    },
  }),
  route({
    method: "delete",
    path: "/permissions/environment/{id}",
    tag: "Permissions",
    summary: "Remove an environment override (the project-level permission applies again)",
    params: EnvironmentPermissionParams,
    responses: { 200: { description: "Removed", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      await services.permissions.revokeEnvironment(scope, params.id);
      return { body: { message: "Environment permission removed; the project-level permission applies." } };
    },
  }),
];
