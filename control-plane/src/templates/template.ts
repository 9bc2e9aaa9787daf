import { TemplateName, type TemplateSummary } from "@capstan/shared";
import { FIELD, TemplateError, interpolate, loadYaml, parseCompose } from "../compose/index.js";
import { Invalid } from "../domain/errors.js";
import { componentKind } from "./classify.js";
import { generateValues } from "./generate.js";
import { parseHeader } from "./header.js";
import { serviceKey } from "./magic.js";
import { EXCLUDE_FROM_STATUS_KEY, TemplateRenderError, renderTemplate } from "./render.js";
import type { ComposeData, Template, TemplateService, TemplateVariable } from "./types.js";
import { collectVariables } from "./variables.js";

/**
 * Parses one template file and checks that Capstan can run it: the header, the YAML (the
 * compose checker's loader and limits), the variables (only magic names Capstan fills in), the
 * services (databases are not routed, a routed service needs a port), and finally a dry run:
 * the template rendered with generated values and placeholder domains must pass the same
 * compose checker as a user's compose file (docs/compose.md). Anything that fails is the
 * template's reason; nothing is dropped silently.
 */

export type ParsedTemplate = { ok: true; template: Template } | { ok: false; reason: string };

/** Reasons shown per template: the first few problems, then a count. */
const MAX_PROBLEMS = 5;
/** Port of a routed service that names none anywhere. */
const DEFAULT_PORT = 80;
/** Domain of the dry run (a reserved TLD: never a real host). */
const DRY_RUN_DOMAIN = "template.invalid";

export function reasonOf(problems: string[]): string {
  const shown = problems.slice(0, MAX_PROBLEMS).join("; ");
  return problems.length > MAX_PROBLEMS ? `${shown}; and ${problems.length - MAX_PROBLEMS} more problems` : shown;
}

const plain = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export function parseTemplate(name: string, text: string): ParsedTemplate {
  const fail = (problems: string[]): ParsedTemplate => ({ ok: false, reason: reasonOf(problems) });
  if (!TemplateName.safeParse(name).success) return fail([`template name ${JSON.stringify(name.slice(0, 80))}: use lowercase letters, digits, '.', '_' or '-' (the file name without .yaml)`]);

  const header = parseHeader(text);
  let loaded: unknown;
  try {
    loaded = loadYaml(text);
  } catch (err) {
    if (!(err instanceof Invalid)) throw err;
    return fail([...(header.ok ? [] : header.problems), ...(err.errors[FIELD] ?? [err.message])]);
  }
  if (!header.ok) return fail(header.problems);
  if (!plain(loaded) || !plain(loaded.services) || Object.keys(loaded.services).length === 0) return fail(["the compose part needs a services mapping with at least one service"]);
  const badService = Object.entries(loaded.services).find(([, s]) => !plain(s));
  if (badService) return fail([`services.${badService[0].slice(0, 40)}: a service is a mapping with at least an image`]);
  const data = loaded as ComposeData;

  const collected = collectVariables(data);
  const problems = [...collected.problems];
  const services = classify(data, collected.variables, header.header.port ?? null, collected.paths, problems);
  if (problems.length) return fail(problems);

  const routable = services.filter((s) => s.routable);
  const template: Template = {
    name,
    header: header.header,
    text,
    data,
    variables: collected.variables,
    services,
    primary: routable[0]?.name ?? null,
  };
  const dry = dryRun(template);
  return dry.length ? fail(dry) : { ok: true, template };
}

/** Each compose service's kind, route and port; problems for what cannot be routed. */
function classify(data: ComposeData, variables: TemplateVariable[], headerPort: number | null, paths: Map<string, string>, problems: string[]): TemplateService[] {
  const byKey = new Map(Object.keys(data.services).map((n) => [serviceKey(n), n]));
  const domainVars = new Map<string, { name: string; port: number | null }[]>();
  for (const v of variables) {
    // An unbound SERVICE_FQDN_<PORT> was reported by the variable collection.
    if (v.kind !== "domain" || v.service === null) continue;
    const service = byKey.get(serviceKey(v.service));
    if (service === undefined) {
      problems.push(`${v.name} names no service of this template (services: ${[...byKey.values()].join(", ")})`);
      continue;
    }
    domainVars.set(service, [...(domainVars.get(service) ?? []), { name: v.name, port: v.port }]);
  }
  // Defaults of inputs resolve `image: ${IMAGE:-postgres:16}` for classification.
  const defaults = Object.fromEntries(variables.flatMap((v) => (v.kind === "input" && v.default !== null ? [[v.name, v.default] as const] : [])));

  const out: TemplateService[] = [];
  let firstRoutable = true;
  for (const [name, service] of Object.entries(data.services)) {
    const raw = typeof service.image === "string" ? service.image : "";
    let image = raw;
    try {
      image = interpolate(raw, defaults);
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
    }
    const kind = componentKind(image);
    const vars = domainVars.get(name) ?? [];
    const routable = vars.length > 0 && kind === "application";
    if (vars.length > 0 && kind === "database") {
      problems.push(`${vars[0]!.name}: service ${name} runs a database image (${image}); databases get no domain`);
    }
    let port: number | null = null;
    if (routable) {
      // Last resort 80: the catalog's proxy would use the image's own exposed port, which a
      // template does not show; web images without other information serve HTTP on 80
      // (the catalog's WordPress relies on it). decisions.md, "Service templates".
      port = vars.find((v) => v.port !== null)?.port ?? (firstRoutable ? headerPort : null) ?? firstExposedPort(service) ?? DEFAULT_PORT;
      firstRoutable = false;
    }
    const exclude = service[EXCLUDE_FROM_STATUS_KEY];
    if (exclude !== undefined && typeof exclude !== "boolean") problems.push(`services.${name}.${EXCLUDE_FROM_STATUS_KEY}: use true or false`);
    if (Array.isArray(service.volumes) && service.volumes.some((v) => plain(v) && "content" in v)) {
      problems.push(`services.${name}.volumes: files written from the template (content:) are not supported yet; use a named volume or an environment variable`);
    }
    out.push({ name, image, kind, routable, port, path: routable ? (paths.get(name) ?? null) : null, excludeFromStatus: exclude === true });
  }
  return out;
}

/** The first container port a service lists under expose or ports (`"3000"`, `3000`, `"3000/tcp"`). */
function firstExposedPort(service: Record<string, unknown>): number | null {
  for (const field of ["expose", "ports"]) {
    const list = service[field];
    if (!Array.isArray(list)) continue;
    for (const entry of list) {
      const m = /^([0-9]{1,5})(\/tcp)?$/.exec(String(typeof entry === "object" && entry !== null ? (entry as { target?: unknown }).target : entry));
      if (m) return Number(m[1]);
    }
  }
  return null;
}

/**
 * Renders the template as a new service would get it (generated values, every required input
 * set to a placeholder, a domain per routable service) and runs the compose checker on it.
 */
function dryRun(template: Template): string[] {
  const domains = Object.fromEntries(template.services.filter((s) => s.routable).map((s) => [s.name, `https://${s.name.replace(/_/g, "-")}.${DRY_RUN_DOMAIN}${s.path ?? ""}`]));
  const generated = generateValues(template, {}, domains);
  const values = { ...generated.values, ...Object.fromEntries(generated.missing.map((k) => [k, "placeholder"])) };
  try {
    parseCompose(renderTemplate(template, values).compose);
    return [];
  } catch (err) {
    if (err instanceof TemplateRenderError) return err.problems;
    if (err instanceof Invalid) return err.errors[FIELD] ?? [err.message];
    throw err;
  }
}

/** What a catalog lists for a template (GET /services/templates, beyond the spec): its header. */
export function templateSummary(t: Template): TemplateSummary {
  return {
    name: t.name,
    slogan: t.header.slogan,
    tags: t.header.tags,
    logo: t.header.logo ?? null,
    documentation: t.header.documentation,
    category: t.header.category ?? null,
    port: t.header.port ?? null,
  };
}
