import { ServiceTemplateList, ServiceTemplateQuery } from "@capstan/shared";
import { paginateArray } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { serviceTemplateDto } from "../mappers/service-templates.js";

export const serviceTemplateRoutes = [
  route({
    method: "get",
    path: "/services/templates",
    tag: "Services",
    summary: "List the templates services can be created from",
    description:
      "Beyond the spec (docs/templates.md): the built-in catalog and the templates of the team's enabled template sources (as of their last sync), " +
      "in name order, filtered by category, tag or words of the name, slogan and tags. A source's template whose name another template has is named slug/name.",
    query: ServiceTemplateQuery,
    responses: { 200: { description: "Templates", schema: ServiceTemplateList }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, query }) {
      const { page, per_page, ...filter } = query;
      return { body: await paginateArray({ page, per_page }, (await services.serviceTemplates.list(scope, filter)).map(serviceTemplateDto)) };
    },
  }),
];
