/**
 * Compose applications (build pack containercompose): parseCompose checks what users send,
 * rewriteCompose turns it into the file the agent runs for one deployment. docs/compose.md
 * describes the supported subset and why the rest is refused.
 */
export { parseCompose, loadYaml, bindSources, FIELD, PUBLIC_SERVICE_KEY, type ComposeDoc, type ComposeService } from "./parse.js";
export {
  rewriteCompose,
  projectName,
  containerName,
  volumeName,
  appNetworkName,
  LABELS,
  RENDERED_META_KEY,
  type RewriteContext,
  type ExtraNetwork,
  type RenderedMeta,
} from "./rewrite.js";
export { LIMITS, isReservedLabel } from "./schema.js";
export { variablesIn, referencesIn, interpolate, TemplateError, type Reference } from "./interpolate.js";
// label overrides (issue 17, spec 4.15)
export { parseLabelOverrides, mergeLabels, applyLabelOverrides, isReservedOverride, LABEL_OVERRIDE_LIMITS, LABEL_OVERRIDES_FIELD, type LabelOverrides } from "./label-overrides.js";
