import {
  CreateTemplateSourceBody,
  MessageBody,
  PaginationQuery,
  TemplateSourceCreated,
  TemplateSourceDetail,
  TemplateSourceList,
  TemplateSourceMutation,
  TemplateSourceParams,
  TemplateSyncAllResult,
  UpdateTemplateSourceBody,
} from "@capstan/shared";
import { templateSourceDetailDto as detailDto, templateSourceDto as sourceDto } from "../mappers/template-sources.js";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";

const TAG = "Template sources";
const ADMIN_ONLY = "Team owners and admins only.";

export const templateSourceRoutes = [
  route({
    method: "get",
    path: "/template-sources",
    tag: TAG,
    summary: "List template sources",
    query: PaginationQuery,
    responses: { 200: { description: "Template sources", schema: TemplateSourceList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return { body: await paginate(query, () => services.templateSources.count(scope), async (w) => (await services.templateSources.list(scope, w)).map(sourceDto)) };
    },
  }),
  route({
    method: "post",
    path: "/template-sources/sync-all",
    tag: TAG,
    summary: "Sync every enabled template source of the team",
    description: `${ADMIN_ONLY} Dispatches a sync of each enabled source (disabled ones are skipped); a source already waiting or syncing is not synced twice. count: syncs dispatched.`,
    responses: { 200: { description: "Dispatched", schema: TemplateSyncAllResult }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services }) {
      const r = await services.templateSources.syncAll(scope);
      const running = r.already > 0 ? ` ${r.already} more already had a sync waiting or running.` : "";
      return { body: { message: `Sync dispatched for ${r.dispatched} template source(s).${running}`, count: r.dispatched } };
    },
  }),
  route({
    method: "get",
    path: "/template-sources/{uuid}",
    tag: TAG,
    summary: "Get a template source with its templates",
    description:
      "templates: what the last successful sync found (name, slogan, tags, and lint ok); beyond the spec, broken_templates lists each file that failed the checks with its reason, ignored_templates the drafts (ignore: true). Read from the database: never clones.",
    params: TemplateSourceParams,
    responses: { 200: { description: "Template source", schema: TemplateSourceDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: detailDto(await services.templateSources.get(scope, params.uuid)) };
    },
  }),
  route({
    method: "post",
    path: "/template-sources",
    tag: TAG,
    summary: "Add a template source",
    description: `${ADMIN_ONLY} A git repository (https, http or git://) of compose templates; a sync is dispatched at once (sync_status pending, then syncing, synced or failed with sync_error). auth_token is stored encrypted and never returned. Hosts that are loopback, link-local or metadata addresses are refused unless the instance allows private endpoints. SSH URLs are refused (422).`,
    body: CreateTemplateSourceBody,
    responses: { 201: { description: "Created", schema: TemplateSourceCreated }, 401: ERR[401], 403: ERR[403], 409: ERR[409], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const s = await services.templateSources.create(scope, body);
      return { status: 201, body: { message: "Template source created; its sync has been dispatched.", data: sourceDto(s) } };
    },
  }),
  route({
    method: "put",
    path: "/template-sources/{uuid}",
    tag: TAG,
    summary: "Change a template source",
    description: `${ADMIN_ONLY} Only the fields given change; answers the changed source. A new repository_url, branch, folder_path or auth_token (null removes it) makes the source pending and dispatches a sync. is_enabled false keeps it out of sync-all; services already created from its templates are unaffected.`,
    params: TemplateSourceParams,
    body: UpdateTemplateSourceBody,
    responses: { 200: { description: "Updated", schema: TemplateSourceMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const s = await services.templateSources.update(scope, params.uuid, body);
      return { body: { message: "Template source updated.", data: sourceDto(s) } };
    },
  }),
  route({
    method: "delete",
    path: "/template-sources/{uuid}",
    tag: TAG,
    summary: "Delete a template source",
    description: `${ADMIN_ONLY} Removes the source and the templates it listed. Services already created from its templates are unaffected: each keeps its own copy of the compose file.`,
    params: TemplateSourceParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      await services.templateSources.remove(scope, params.uuid);
      return { body: { message: "Template source deleted. Services created from its templates are unaffected." } };
    },
  }),
  route({
    method: "post",
    path: "/template-sources/{uuid}/sync",
    tag: TAG,
    summary: "Sync a template source",
    description: `${ADMIN_ONLY} Asynchronous: watch sync_status. Disabled sources can be synced this way too. When a sync of the source is already waiting or running, no second one starts and the message says so (still 200).`,
    params: TemplateSourceParams,
    responses: { 200: { description: "Dispatched (or already under way)", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const r = await services.templateSources.sync(scope, params.uuid);
      return {
        body: { message: r === "dispatched" ? "Sync dispatched; watch sync_status." : "A sync of this template source is already waiting or running; no second one was started. Watch sync_status." },
      };
    },
  }),
];
