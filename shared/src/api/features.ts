import { z } from "zod";

/**
 * Paid features (spec 4.9, 4.12, 4.14, 4.15), switched per team by instance administrators
 * (`capstan team features`). A route declares the feature it needs in the route table; a team
 * without it gets 402 naming it (docs/features.md).
 */
export const FEATURES = [
  /** Registries (4.9). */
  "REGISTRY_MANAGEMENT",
  /** Clusters (4.12). */
  "CLUSTER_MANAGEMENT",
  /** Every DNS endpoint (4.14). */
  "DNS_PROVIDER_MANAGEMENT",
  /** DNS Pro: more than one provider, pinning hostnames to domains (4.14). */
  "DNS_MULTI_DOMAIN",
  /** DNS Pro: environment bindings of domains (4.14). */
  "DNS_ENV_BINDINGS",
  /** Proxy label overrides of template service containers (4.15). */
  "PROXY_LABEL_OVERRIDES",
] as const;
export const Feature = z.enum(FEATURES);
export type Feature = z.infer<typeof Feature>;

/** A team's stored feature list: "*" (every feature, also later ones: the root team) or names joined by ",". */
export const ALL_FEATURES = "*";

/**
 * Parses a comma-separated list of feature names (PLATFORM_DEFAULT_TEAM_FEATURES, the CLI's
 * --enable/--disable): the names, or the unknown ones. Blanks between commas are ignored;
 * names are case-sensitive, as the spec writes them.
 */
export function parseFeatureList(list: string): { features: Feature[] } | { unknown: string[] } {
  const names = list.split(",").map((s) => s.trim()).filter(Boolean);
  const unknown = names.filter((n) => !(FEATURES as readonly string[]).includes(n));
  if (unknown.length) return { unknown };
  return { features: FEATURES.filter((f) => names.includes(f)) };
}

/** The features a stored list grants (ALL_FEATURES: every one). Unknown names (of a later release) are skipped. */
export function storedFeatures(stored: string): Feature[] {
  if (stored.trim() === ALL_FEATURES) return [...FEATURES];
  const names = stored.split(",").map((s) => s.trim());
  return FEATURES.filter((f) => names.includes(f));
}
