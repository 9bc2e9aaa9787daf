import type { ServiceComponentKind, TemplateHeader } from "@capstan/shared";
import type { MagicVariable } from "./magic.js";

/** A variable the user may set: referenced by the template, neither generated nor a domain. */
export interface InputVariable {
  kind: "input";
  name: string;
  /** `${NAME:-default}` / `${NAME-default}`: stored as the value when the service is created (as the catalog does). */
  default: string | null;
  /** `${NAME:?message}` somewhere: the service cannot deploy without a value. */
  required: boolean;
}

export type TemplateVariable = MagicVariable | InputVariable;

/** One compose service of a template, classified (spec 4.6). */
export interface TemplateService {
  /** The compose service name. */
  name: string;
  /** The image as the template names it (defaults of `${VAR:-...}` applied), before any override. */
  image: string;
  kind: ServiceComponentKind;
  /** Named by a SERVICE_FQDN_/SERVICE_URL_ variable: the proxy routes a domain to it. */
  routable: boolean;
  /** The container port the proxy sends traffic to (routable services). */
  port: number | null;
  /** A path the catalog's `SERVICE_FQDN_X=/path` form asks the domain to carry; null: none. */
  path: string | null;
  /** The catalog's `exclude_from_hc: true`: the container does not count in the service's status. */
  excludeFromStatus: boolean;
}

/** The loaded compose part: plain data with YAML aliases expanded. */
export type ComposeData = Record<string, unknown> & { services: Record<string, Record<string, unknown>> };

/** A template that parsed and passed every check (control-plane/src/templates/template.ts). */
export interface Template {
  name: string;
  header: TemplateHeader;
  /** The file as written, header included: what a service created from it shows as its compose. */
  text: string;
  data: ComposeData;
  /** Every variable the compose part uses, each once, in order of first use. */
  variables: TemplateVariable[];
  services: TemplateService[];
  /** The first routable application: the service's main domain. Null for a template nobody browses to. */
  primary: string | null;
}

/** The values of one service created from a template, by variable name (sealed at rest by the caller). */
export type StoredValues = Readonly<Record<string, string>>;

/** The current domain of each routable compose service: its URL (`https://host[:port][/path]`). */
export type ServiceDomains = Readonly<Record<string, string | undefined>>;
