import { z } from "zod";
import { ImageRef } from "../validation/inputs.js";
import { CONTROL_CHARACTERS_MESSAGE, hasControlCharacter } from "../validation/text.js";

/**
 * One-click service templates (issue 17): the shapes both ends see. A template is a compose
 * file whose leading comment lines form a header (docs/templates.md); the control plane parses
 * it (control-plane/src/templates/), a catalog lists its header, and a service created from it
 * carries the kinds of its compose services.
 */

/** Template names: the file name without .yaml/.yml, as the catalog and `type` spell them. */
export const TemplateName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "Use 1-64 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit.");

const HeaderUrl = z
  .string()
  .max(2048)
  .regex(/^https?:\/\/[^\s]+$/, "Use an http(s) URL.");

/** A logo: an http(s) URL or a relative path inside the template source (Coolify's `svgs/x.svg`). */
const Logo = z
  .string()
  .max(512)
  .regex(/^(https?:\/\/[^\s]+|[A-Za-z0-9_][A-Za-z0-9_./-]*)$/, "Use an http(s) URL or a relative path such as svgs/app.svg.")
  .refine((v) => /^https?:/.test(v) || !v.split("/").includes(".."), "A relative logo path must not contain '..'.");

/**
 * The header as read from the comment lines: every value a string (or absent). `tags` is
 * comma-separated, `port` a container port, `ignore: true` keeps the template out of a catalog.
 */
export const TemplateHeader = z.strictObject({
  documentation: HeaderUrl,
  slogan: z.string().min(1).max(500).refine((v) => !hasControlCharacter(v), CONTROL_CHARACTERS_MESSAGE),
  tags: z
    .string()
    .max(1000)
    .optional()
    .transform((v) =>
      [...new Set((v ?? "").split(",").map((t) => t.trim().toLowerCase()).filter((t) => t !== ""))].slice(0, 32),
    )
    .pipe(z.array(z.string().regex(/^[a-z0-9][a-z0-9 ._+-]{0,39}$/, "Tags are 1-40 letters, digits, spaces, '.', '_', '+' or '-'."))),
  logo: Logo.optional(),
  category: z
    .string()
    .regex(/^[a-z0-9][a-z0-9 _-]{0,39}$/i, "Use a short word such as analytics.")
    .transform((v) => v.toLowerCase())
    .optional(),
  port: z
    .string()
    .regex(/^[0-9]{1,5}$/, "Use a container port number.")
    .transform(Number)
    .pipe(z.number().int().min(1, "Ports are 1-65535.").max(65_535, "Ports are 1-65535."))
    .optional(),
  ignore: z.enum(["true", "false"], { error: "Use true or false." }).transform((v) => v === "true").optional(),
});
export type TemplateHeader = z.output<typeof TemplateHeader>;

/** What a catalog lists per template (GET /services/templates, beyond the spec). */
export const TemplateSummary = z.object({
  name: TemplateName,
  slogan: z.string(),
  tags: z.array(z.string()),
  logo: z.string().nullable(),
  documentation: z.string(),
  category: z.string().nullable(),
  port: z.number().int().nullable(),
});
export type TemplateSummary = z.infer<typeof TemplateSummary>;

/**
 * Each compose service of a template service is a service application or a service database
 * (spec 4.6), decided by its image (docs/templates.md lists the database images).
 */
export const ServiceComponentKind = z.enum(["application", "database"]);
export type ServiceComponentKind = z.infer<typeof ServiceComponentKind>;

/** Most entries an image-override map may hold (PLATFORM_TEMPLATE_IMAGE_OVERRIDES). */
export const MAX_IMAGE_OVERRIDES = 1000;

/**
 * PLATFORM_TEMPLATE_IMAGE_OVERRIDES: upstream image -> image to run instead (tests,
 * air-gapped installations). A key without a tag matches every tag of that repository.
 */
export const ImageOverrides = z
  .record(z.string(), z.unknown())
  .superRefine((map, ctx) => {
    const entries = Object.entries(map);
    if (entries.length > MAX_IMAGE_OVERRIDES) ctx.addIssue({ code: "custom", message: `at most ${MAX_IMAGE_OVERRIDES} entries` });
    for (const [from, to] of entries.slice(0, MAX_IMAGE_OVERRIDES)) {
      if (!ImageRef.safeParse(from).success || from.trim() !== from) ctx.addIssue({ code: "custom", message: `key ${JSON.stringify(from.slice(0, 80))} is not an image reference` });
      if (typeof to !== "string" || !ImageRef.safeParse(to).success || to.trim() !== to) ctx.addIssue({ code: "custom", message: `value of ${JSON.stringify(from.slice(0, 80))} is not an image reference` });
    }
  })
  .transform((map) => map as Record<string, string>);
export type ImageOverrides = z.output<typeof ImageOverrides>;
