import { applicationListDto } from "../mappers/applications.js";
import { databaseListDto } from "../mappers/databases.js";
import {
  CreateEnvironmentBody,
  CreatedProject,
  CreateProjectBody,
  EnvironmentDetail,
  EnvironmentList,
  EnvironmentParams,
  MessageBody,
  PaginationQuery,
  ProjectDetail,
  ProjectList,
  ProjectParams,
  UpdateProjectBody,
} from "@capstan/shared";
import { z } from "zod";
import { paginate, paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { environmentDto, projectDto, projectDetailDto } from "../mappers/projects.js";

const CreatedEnvironment = z.object({ message: z.string(), data: z.object({ id: z.number().int(), name: z.string() }) });
const UpdatedProject = z.object({ message: z.string(), data: ProjectDetail });

export const projectRoutes = [
  route({
    method: "get",
    path: "/projects",
    teamVersioned: true,
    tag: "Projects",
    summary: "List projects",
    query: PaginationQuery,
    responses: { 200: { description: "Projects", schema: ProjectList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return {
        body: await paginate(
          query,
          () => services.projects.count(scope),
          async (w) => (await services.projects.list(scope, w)).map(projectDto),
        ),
      };
    },
  }),
  route({
    method: "post",
    path: "/projects",
    tag: "Projects",
    summary: "Create a project (with its production environment)",
    body: CreateProjectBody,
    responses: { 201: { description: "Created", schema: CreatedProject }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const p = await services.projects.create(scope, body);
      return {
        status: 201,
        body: {
          uuid: p.uuid,
          name: p.name,
          description: p.description,
          environments: p.environments.map((e) => ({ id: e.id, name: e.name })),
        },
      };
    },
  }),
  route({
    method: "get",
    path: "/projects/{uuid}",
    teamVersioned: true,
    tag: "Projects",
    summary: "Get a project with its environments and resource counts",
    description:
      "`resource_counts` `{applications, databases, services, total}` per environment and for the project (the sum over the environments the caller sees; " +
      "services count 0 until they exist). Served from the response cache: the counts change only with writes the team version follows (a resource created, " +
      "deleted or moved), so a cached body is never stale.",
    params: ProjectParams,
    responses: { 200: { description: "Project", schema: ProjectDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: projectDetailDto(await services.projects.detail(scope, params.uuid)) };
    },
  }),
  route({
    method: "patch",
    path: "/projects/{uuid}",
    tag: "Projects",
    summary: "Update a project's name or description",
    params: ProjectParams,
    body: UpdateProjectBody,
    responses: { 200: { description: "Updated", schema: UpdatedProject }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const p = await services.projects.update(scope, params.uuid, body);
      return { body: { message: "Project updated.", data: projectDetailDto(p) } };
    },
  }),
  route({
    method: "delete",
    path: "/projects/{uuid}",
    tag: "Projects",
    summary: "Delete a project with all its environments and resources",
    params: ProjectParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "A deployment of one of its applications is queued or running" } },
    async handler({ scope, services, params }) {
      await services.projects.remove(scope, params.uuid);
      return { body: { message: "Project deleted." } };
    },
  }),
  route({
    method: "get",
    path: "/projects/{uuid}/environments",
    tag: "Projects",
    summary: "List a project's environments",
    params: ProjectParams,
    query: PaginationQuery,
    responses: { 200: { description: "Environments", schema: EnvironmentList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params, query }) {
      const p = await services.projects.view(scope, params.uuid);
      return { body: await paginateArray(query, p.environments.map(environmentDto)) };
    },
  }),
  route({
    method: "post",
    path: "/projects/{uuid}/environments",
    tag: "Projects",
    summary: "Create an environment",
    params: ProjectParams,
    body: CreateEnvironmentBody,
    responses: {
      201: { description: "Created", schema: CreatedEnvironment },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: ERR[409],
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const e = await services.projects.createEnvironment(scope, params.uuid, body.name);
      return { status: 201, body: { message: "Environment created.", data: { id: e.id, name: e.name } } };
    },
  }),
  route({
    method: "get",
    path: "/projects/{uuid}/{environment_name_or_uuid}",
    tag: "Projects",
    summary: "Get an environment by name or uuid, with its applications and databases",
    description:
      "Not served from the response cache: its applications and databases change without a project write (status reports, deploys), " +
      "so it is read fresh each time, one statement per kind of resource.",
    params: EnvironmentParams,
    responses: { 200: { description: "Environment", schema: EnvironmentDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const { project, environment } = await services.projects.findEnvironment(scope, params.uuid, params.environment_name_or_uuid);
      const applications = await services.applications.list(scope, {}, { environmentId: environment.id });
      const databases = await services.databases.list(scope, {}, { environmentId: environment.id });
      return {
        body: {
          ...environmentDto(environment),
          project_uuid: project.uuid,
          project_name: project.name,
          applications: applications.map(applicationListDto),
          databases: databases.map(databaseListDto),
        },
      };
    },
  }),
  route({
    method: "delete",
    path: "/projects/{uuid}/environments/{environment_name_or_uuid}",
    tag: "Projects",
    summary: "Delete an environment with all its resources",
    params: EnvironmentParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "A deployment of one of its applications is queued or running" } },
    async handler({ scope, services, params }) {
      await services.projects.removeEnvironment(scope, params.uuid, params.environment_name_or_uuid);
      return { body: { message: "Environment deleted." } };
    },
  }),
];
