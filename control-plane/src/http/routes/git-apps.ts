import { CreateGitAppBody, GitApp, GitAppList, GitAppMutation, GitAppParams, MessageBody, PaginationQuery, UpdateGitAppBody } from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { gitAppDto } from "../mappers/git-apps.js";

const TAG = "Git apps";

export const gitAppRoutes = [
  route({
    method: "get",
    path: "/github-apps",
    tag: TAG,
    summary: "List git apps",
    query: PaginationQuery,
    responses: { 200: { description: "Git apps", schema: GitAppList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return { body: await paginate(query, () => services.gitApps.count(scope), async (w) => (await services.gitApps.list(scope, w)).map(gitAppDto)) };
    },
  }),
  route({
    method: "post",
    path: "/github-apps",
    tag: TAG,
    summary: "Register an installed git app (GitHub App)",
    description: "Team owners and admins only. The private key must be the app's RSA key in PEM; it and the webhook secret are stored encrypted and never returned.",
    body: CreateGitAppBody,
    responses: { 201: { description: "Created", schema: GitApp }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      return { status: 201, body: gitAppDto(await services.gitApps.create(scope, body)) };
    },
  }),
  route({
    method: "get",
    path: "/github-apps/{uuid}",
    tag: TAG,
    summary: "Get a git app",
    params: GitAppParams,
    responses: { 200: { description: "Git app", schema: GitApp }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: gitAppDto(await services.gitApps.get(scope, params.uuid)) };
    },
  }),
  route({
    method: "patch",
    path: "/github-apps/{uuid}",
    tag: TAG,
    summary: "Change a git app",
    description: "Team owners and admins only. Only the fields given change; webhook_secret null removes the secret.",
    params: GitAppParams,
    body: UpdateGitAppBody,
    responses: { 200: { description: "Updated", schema: GitAppMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      return { body: { message: "Git app updated.", data: gitAppDto(await services.gitApps.update(scope, params.uuid, body)) } };
    },
  }),
  route({
    method: "delete",
    path: "/github-apps/{uuid}",
    tag: TAG,
    summary: "Delete a git app",
    description: "Team owners and admins only; refused (409) while applications use it.",
    params: GitAppParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "Applications use the git app" } },
    async handler({ scope, services, params }) {
      await services.gitApps.remove(scope, params.uuid);
      return { body: { message: "Git app deleted." } };
    },
  }),
];
