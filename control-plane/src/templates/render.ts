import type { ImageOverrides } from "@capstan/shared";
import { stringify } from "yaml";
import { PUBLIC_SERVICE_KEY, TemplateError, interpolate } from "../compose/index.js";
import { overrideImage } from "./image-override.js";
import { magicVariable } from "./magic.js";
import type { Template, TemplateVariable } from "./types.js";
import { environmentEntries } from "./variables.js";

/**
 * A template with a service's values filled in: the compose file to deploy (what the compose
 * checker, control-plane/src/compose/, then parses and rewrites) and the service's variables.
 *
 * Every variable is resolved here, from `values` only, and every `$` of the result is written
 * `$$`: compose reads `$$` as a literal `$`, so a value such as `p$ss`, `${HOME}` or `a$$b`
 * arrives in the container exactly as stored and can neither break the file nor pull in a
 * variable of the server. `$$` in the template itself (a shell variable in a health check)
 * stays `$$`. Secrets appear in the rendered file only: the template text a service shows
 * keeps `${SERVICE_PASSWORD_...}`.
 */

export interface RenderOptions {
  imageOverrides?: ImageOverrides;
}

export interface RenderedVariable {
  key: string;
  /** Null: an input without a value (its references resolve to ""). */
  value: string | null;
  kind: TemplateVariable["kind"];
}

export interface Rendered {
  compose: string;
  env: RenderedVariable[];
}

/** Resolving failed: a `${NAME:?message}` without a value. Messages name the field. */
export class TemplateRenderError extends Error {
  override name = "TemplateRenderError";
  constructor(readonly problems: string[]) {
    super(problems.join("; "));
  }
}

const escape = (v: string) => v.split("$").join("$$");
const plain = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** The catalog's service key that keeps a container out of the service's status (a one-shot job, a sidecar). */
export const EXCLUDE_FROM_STATUS_KEY = "exclude_from_hc";

/** The catalog's `is_directory` / `isDirectory` of a long-syntax volume: how to create a bind source; compose knows neither. */
function withoutCatalogVolumeKeys(v: unknown): unknown {
  if (!plain(v) || !("is_directory" in v || "isDirectory" in v)) return v;
  const { is_directory: _a, isDirectory: _b, ...rest } = v;
  return rest;
}

export function renderTemplate(template: Template, values: Readonly<Record<string, string>>, options: RenderOptions = {}): Rendered {
  const problems: string[] = [];
  const resolve = (where: string, src: string): string => {
    try {
      return interpolate(src, values);
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      problems.push(`${where}: ${err.message}`);
      return "";
    }
  };
  const deep = (where: string, v: unknown): unknown => {
    if (typeof v === "string") return escape(resolve(where, v));
    if (Array.isArray(v)) return v.map((x, i) => deep(`${where}.${i}`, x));
    if (plain(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, deep(`${where}.${k}`, x)]));
    return v;
  };

  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(template.data)) {
    // Anchors were expanded where they are used; the x- fields themselves never reach compose.
    if (key.startsWith("x-")) continue;
    if (key !== "services") {
      out[key] = deep(key, value);
      continue;
    }
    const services: Record<string, unknown> = {};
    for (const [name, service] of Object.entries(template.data.services)) {
      const s: Record<string, unknown> = {};
      for (const [field, fv] of Object.entries(service)) {
        const where = `services.${name}.${field}`;
        // The catalog's own service key (docs/templates.md): read by classification, not compose.
        if (field === EXCLUDE_FROM_STATUS_KEY) continue;
        if (field === "volumes" && Array.isArray(fv)) {
          s.volumes = deep(where, fv.map(withoutCatalogVolumeKeys));
        } else if (field === "image" && typeof fv === "string") {
          s.image = escape(overrideImage(resolve(where, fv), options.imageOverrides ?? {}));
        } else if (field === "environment" && (Array.isArray(fv) || plain(fv))) {
          s.environment = environment(where, fv, values, resolve);
        } else {
          s[field] = deep(where, fv);
        }
      }
      services[name] = s;
    }
    out.services = services;
  }
  declareVolumes(out);
  if (template.primary !== null) out[PUBLIC_SERVICE_KEY] = template.primary;
  if (problems.length) throw new TemplateRenderError([...new Set(problems)]);

  const env = template.variables.map((v) => ({ key: v.name, value: Object.hasOwn(values, v.name) ? values[v.name]! : null, kind: v.kind }));
  // No aliases in the output: every value is written where it is used.
  return { compose: stringify(out, { aliasDuplicateObjects: false, lineWidth: 0 }), env };
}

/**
 * Named volumes the services use but the file does not declare get declared: the catalog's
 * templates leave the top-level `volumes` key out (its platform adds it), and compose needs it.
 * Runs on the rendered services, so `${VOLUME:-name}` sources count by their resolved name.
 */
function declareVolumes(out: Record<string, unknown>): void {
  // Anything but a mapping (or nothing) is left for the checker to refuse.
  if (out.volumes !== undefined && out.volumes !== null && !plain(out.volumes)) return;
  const declared = plain(out.volumes) ? { ...out.volumes } : {};
  const before = Object.keys(declared).length;
  for (const service of Object.values(plain(out.services) ? out.services : {})) {
    const volumes = plain(service) ? service.volumes : undefined;
    if (!Array.isArray(volumes)) continue;
    for (const v of volumes) {
      const source = typeof v === "string" ? (v.includes(":") ? v.slice(0, v.indexOf(":")) : null) : plain(v) && (v.type ?? "volume") === "volume" ? v.source : null;
      // A named volume's source is a name; paths (/x, ./x, ~/x) are bind mounts, and `$` means an unresolved value the checker reports.
      if (typeof source === "string" && /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/.test(source) && !Object.hasOwn(declared, source)) declared[source] = null;
    }
  }
  if (Object.keys(declared).length > before || out.volumes !== undefined) out.volumes = declared;
}

/**
 * The environment as a map. A bare name (`- SERVICE_URL_APP_3000`, `KEY:`) takes the
 * variable's value as it is (not interpolated: it is a value, not a template) or is left out
 * when the variable has none, as compose does with an unset pass-through variable.
 */
function environment(
  where: string,
  env: unknown,
  values: Readonly<Record<string, string>>,
  resolve: (where: string, src: string) => string,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of environmentEntries(env)) {
    const magic = magicVariable(k);
    const declaration = v === null || (magic !== null && magic !== "unknown" && magic.kind === "domain" && v.startsWith("/"));
    if (declaration) {
      if (Object.hasOwn(values, k)) out[k] = escape(values[k]!);
    } else {
      out[k] = escape(resolve(`${where}.${k}`, v));
    }
  }
  return out;
}
