import type { ServiceTemplate } from "@capstan/shared";
import type { OfferedTemplate } from "../../services/service-templates.js";
import type { Out } from "./types.js";

/** A template as GET /services/templates lists it: tags as one comma-separated string, as the spec shows them. */
export const serviceTemplateDto = (o: OfferedTemplate): Out<typeof ServiceTemplate> => ({
  name: o.name,
  slogan: o.template.slogan,
  tags: o.template.tags.join(","),
  logo: o.template.logo,
  documentation: o.template.documentation,
  category: o.template.category,
  port: o.template.port,
  source: o.source,
});
