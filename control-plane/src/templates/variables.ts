import { type Reference, TemplateError, referencesIn } from "../compose/index.js";
import { magicVariable, serviceKey } from "./magic.js";
import type { ComposeData, InputVariable, TemplateVariable } from "./types.js";

/**
 * The variables a template's compose part uses: every `$NAME` / `${NAME...}` in a value, and
 * every environment entry written as a bare name (`- SERVICE_URL_APP_3000`, `KEY:` with no
 * value), which compose passes through from the environment. In the catalog that bare form is
 * how a template declares a domain and its port without using the value.
 */

export interface Collected {
  variables: TemplateVariable[];
  /** Paths the catalog's `SERVICE_FQDN_X=/path` form gives, by compose service name. */
  paths: Map<string, string>;
  problems: string[];
}

interface Use {
  name: string;
  ref: Reference | null;
  /** The compose service whose definition uses the name (null: outside services). */
  service: string | null;
}

const plain = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Each environment entry as [key, value-or-null] (list and map forms). */
export function environmentEntries(env: unknown): [string, string | null][] {
  if (Array.isArray(env)) {
    return env.map((e) => {
      const s = String(e);
      const eq = s.indexOf("=");
      return eq < 0 ? [s.trim(), null] : [s.slice(0, eq).trim(), s.slice(eq + 1)];
    });
  }
  if (plain(env)) return Object.entries(env).map(([k, v]) => [k, v === null || v === undefined ? null : typeof v === "object" ? JSON.stringify(v) : String(v)]);
  return [];
}

export function collectVariables(data: ComposeData): Collected {
  const uses: Use[] = [];
  const problems: string[] = [];
  const paths = new Map<string, string>();
  const serviceNames = Object.keys(data.services);
  const byKey = new Map(serviceNames.map((n) => [serviceKey(n), n]));

  let current: string | null = null;
  const scan = (where: string, value: string) => {
    try {
      for (const ref of referencesIn(value)) uses.push({ name: ref.name, ref, service: current });
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      problems.push(`${where}: ${err.message}`);
    }
  };
  const walk = (where: string, v: unknown) => {
    if (typeof v === "string") scan(where, v);
    else if (Array.isArray(v)) v.forEach((x, i) => walk(`${where}.${i}`, x));
    else if (plain(v)) for (const [k, x] of Object.entries(v)) walk(`${where}.${k}`, x);
  };

  for (const [key, value] of Object.entries(data)) {
    // x- fields only hold anchors for reuse; what they hold arrives where they are merged.
    if (key.startsWith("x-")) continue;
    if (key !== "services") {
      walk(key, value);
      continue;
    }
    for (const [name, service] of Object.entries(data.services)) {
      if (!plain(service)) continue;
      current = name;
      for (const [field, fv] of Object.entries(service)) {
        if (field !== "environment") {
          walk(`services.${name}.${field}`, fv);
          continue;
        }
        for (const [k, v] of environmentEntries(fv)) {
          const magic = magicVariable(k);
          const isDomain = magic !== null && magic !== "unknown" && magic.kind === "domain";
          if (v === null || (isDomain && v.startsWith("/"))) {
            // A bare name: compose passes the variable through; the name is used.
            uses.push({ name: k, ref: null, service: name });
            if (isDomain && v !== null && v !== "/") {
              const target = magic.service === null ? name : byKey.get(serviceKey(magic.service));
              if (target && !paths.has(target)) paths.set(target, v);
            }
          } else {
            scan(`services.${name}.environment.${k}`, v);
          }
        }
      }
      current = null;
    }
  }

  // SERVICE_FQDN_<PORT> belongs to the one service that uses it.
  const owners = new Map<string, Set<string>>();
  for (const u of uses) {
    const m = magicVariable(u.name);
    if (m === null || m === "unknown" || m.kind !== "domain" || m.service !== null) continue;
    const set = owners.get(u.name) ?? new Set<string>();
    if (u.service !== null) set.add(u.service);
    owners.set(u.name, set);
  }
  for (const [name, set] of owners) {
    if (set.size !== 1) problems.push(`${name} is used ${set.size === 0 ? "outside any service" : `by several services (${[...set].join(", ")})`}: name the service, as in SERVICE_URL_<SERVICE>_<PORT>`);
  }

  const variables = new Map<string, TemplateVariable>();
  for (const { name, ref } of uses) {
    const existing = variables.get(name);
    if (existing) {
      if (existing.kind === "input" && ref) addReference(existing, ref);
      continue;
    }
    const magic = magicVariable(name);
    if (magic === "unknown") {
      problems.push(`${name} is not a variable Capstan fills in (docs/templates.md lists SERVICE_PASSWORD_*, SERVICE_USER_*, SERVICE_BASE64_*, SERVICE_REALBASE64_*, SERVICE_HEX_*, SERVICE_FQDN_* and SERVICE_URL_*)`);
      variables.set(name, { kind: "input", name, default: null, required: false });
      continue;
    }
    if (magic) {
      const owner = magic.kind === "domain" && magic.service === null ? owners.get(name) : undefined;
      variables.set(name, magic.kind === "domain" && owner?.size === 1 ? { ...magic, service: [...owner][0]! } : magic);
      continue;
    }
    const input: InputVariable = { kind: "input", name, default: null, required: false };
    if (ref) addReference(input, ref);
    variables.set(name, input);
  }
  return { variables: [...variables.values()], paths, problems: [...new Set(problems)] };
}

function addReference(v: InputVariable, ref: Reference): void {
  if ((ref.op === ":-" || ref.op === "-") && v.default === null && ref.literal !== null) v.default = ref.literal;
  if (ref.op === ":?" || ref.op === "?") v.required = true;
}
