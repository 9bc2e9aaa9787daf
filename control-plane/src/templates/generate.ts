import { generate, serviceKey } from "./magic.js";
import type { ServiceDomains, StoredValues, Template } from "./types.js";

/**
 * The values of a service created from a template: a pure function of the template, the values
 * already stored for the service, and its current domains.
 *
 * - Generated secrets (SERVICE_PASSWORD_*, ...) and inputs are created only when missing: a
 *   stored value is returned byte for byte, so redeploys, restarts and control-plane upgrades
 *   never change a password the service's data was initialised with (the caller stores
 *   `created` once, sealed).
 * - SERVICE_FQDN_* / SERVICE_URL_* always follow the current domain and are never stored as
 *   the source of truth: a changed domain takes effect at the next deploy.
 * - An input with a default gets the default (as the catalog shows it), one without stays unset.
 */
export interface Generated {
  /** Every value the template's variables have now, by name. */
  values: Record<string, string>;
  /** Names whose value was created by this call (generated secrets, defaults): the caller stores these. */
  created: string[];
  /** Required inputs (`${NAME:?...}`) without a value: the service cannot deploy until they are set. */
  missing: string[];
  /** Routable services without a domain: their SERVICE_FQDN_/SERVICE_URL_ values are empty. */
  unrouted: string[];
}

export function generateValues(template: Template, stored: StoredValues, domains: ServiceDomains): Generated {
  const values: Record<string, string> = {};
  const created: string[] = [];
  const missing: string[] = [];
  const unrouted = new Set<string>();
  const services = new Map(template.services.map((s) => [serviceKey(s.name), s.name]));

  for (const v of template.variables) {
    if (v.kind === "domain") {
      const service = v.service === null ? undefined : services.get(serviceKey(v.service));
      const url = service === undefined ? undefined : domains[service];
      if (!url) {
        if (service !== undefined) unrouted.add(service);
        values[v.name] = "";
        continue;
      }
      const withPort = v.port === null ? url : withContainerPort(url, v.port);
      values[v.name] = v.form === "url" ? withPort : withoutScheme(withPort);
      continue;
    }
    if (Object.hasOwn(stored, v.name)) {
      values[v.name] = stored[v.name]!;
      continue;
    }
    if (v.kind === "generated") {
      values[v.name] = generate(v.command);
      created.push(v.name);
    } else if (v.default !== null) {
      values[v.name] = v.default;
      created.push(v.name);
    } else if (v.required) {
      missing.push(v.name);
    }
  }
  return { values, created, missing, unrouted: [...unrouted] };
}

/** `https://host/path` -> `host/path`: SERVICE_FQDN_* carries no scheme. */
export function withoutScheme(url: string): string {
  return url.replace(/^[a-z][a-z0-9+.-]*:\/\//i, "");
}

/**
 * The catalog's port-suffixed values: SERVICE_URL_X_3000 is the URL with `:3000` after the host
 * (an explicit port in the domain is replaced). The catalog writes domains this way to say
 * which container port a domain goes to; templates use the unsuffixed names for the public URL.
 */
export function withContainerPort(url: string, port: number): string {
  const m = /^([a-z][a-z0-9+.-]*:\/\/)?([^/:?#]+|\[[^\]]+\])(:[0-9]+)?(.*)$/i.exec(url);
  if (!m) return url;
  return `${m[1] ?? ""}${m[2]}:${port}${m[4] ?? ""}`;
}
