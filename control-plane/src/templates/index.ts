/**
 * One-click service templates (issue 17): the catalog's compose-with-header format, its magic
 * variables, classification of compose services, image overrides, and folder loading. Pure
 * modules (the loader reads a folder); nothing here stores or deploys. docs/templates.md.
 */
export { parseTemplate, reasonOf, templateSummary, type ParsedTemplate } from "./template.js";
export { parseHeader, headerFields } from "./header.js";
export { generateValues, withoutScheme, withContainerPort, type Generated } from "./generate.js";
export { renderTemplate, TemplateRenderError, type Rendered, type RenderedVariable, type RenderOptions } from "./render.js";
export { magicVariable, serviceKey, generate, type MagicVariable, type GeneratorCommand } from "./magic.js";
export { componentKind, isDatabaseImage, repositoryOf, DATABASE_REPOSITORIES } from "./classify.js";
export { overrideImage } from "./image-override.js";
export { loadTemplateDir, TemplateDirError, TEMPLATE_DIR_LIMITS, type LoadedTemplates, type BrokenTemplate, type TemplateDirLimits } from "./loader.js";
export { builtInCatalog, BUILT_IN_CATALOG_DIR } from "./catalog.js";
export type { Template, TemplateService, TemplateVariable, InputVariable, StoredValues, ServiceDomains, ComposeData } from "./types.js";
