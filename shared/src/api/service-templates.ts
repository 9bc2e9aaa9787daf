import { z } from "zod";
import { PaginationQuery, listOf } from "./common.js";

/**
 * A template users can create a service from (GET /services/templates, beyond the spec). Tags
 * are one comma-separated string, as the spec shows them in a template source's detail: one
 * shape for a template wherever the API lists one.
 */
export const ServiceTemplate = z
  .object({
    name: z.string().meta({ description: "What POST /services takes as type" }),
    slogan: z.string(),
    tags: z.string().meta({ description: "Comma-separated" }),
    logo: z.string().nullable(),
    documentation: z.string(),
    category: z.string().nullable(),
    port: z.number().int().nullable().meta({ description: "The port its web interface listens on, when the template says" }),
    source: z.string().meta({ description: "built-in, or the slug of the template source it comes from" }),
  })
  .meta({ id: "ServiceTemplate" });
export type ServiceTemplate = z.infer<typeof ServiceTemplate>;

const Filter = z.string().trim().min(1).max(100);
export const ServiceTemplateQuery = PaginationQuery.extend({
  category: Filter.optional().meta({ description: "Only templates of this category" }),
  tag: Filter.optional().meta({ description: "Only templates with this tag" }),
  search: Filter.optional().meta({ description: "Words the name, slogan or tags contain (case-insensitive)" }),
});
export type ServiceTemplateQuery = z.infer<typeof ServiceTemplateQuery>;
export const ServiceTemplateList = listOf(ServiceTemplate);
