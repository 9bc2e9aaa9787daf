/**
 * Which managed domain a hostname binds to, and why (issue 21, w6; docs/dns.md "Which domain a
 * hostname binds to"). Only domains covering the hostname (equal to it, or a parent of it) are
 * candidates, since a domain's records can only be written under it:
 *
 * 1. override: the hostname is pinned to one of them (assign-domain);
 * 2. environment_binding: bindings of the resource's environment (by id) or of its role (its
 *    environment's name) to one of them, the highest priority first (ties: an id binding
 *    before a role binding, then the older binding);
 * 3. suffix_match: the longest (most specific) of them.
 */

export type HostBinding = "override" | "environment_binding" | "suffix_match";

export interface BindableDomain {
  id: number;
  name: string;
}

export interface EnvBindingRow {
  id: number;
  dnsDomainId: number;
  environmentId: number | null;
  environmentRole: string | null;
  priority: number;
}

export interface BindingContext<D extends BindableDomain> {
  domains: D[];
  /** hostname -> pinned domain id */
  pins: Map<string, number>;
  bindings: EnvBindingRow[];
}

export function covers(domain: string, host: string): boolean {
  return host === domain || host.endsWith(`.${domain}`);
}

export function bindHost<D extends BindableDomain>(
  host: string,
  env: { id: number; name: string },
  ctx: BindingContext<D>,
): { domain: D; binding: HostBinding } | null {
  const candidates = ctx.domains.filter((d) => covers(d.name, host));
  if (!candidates.length) return null;
  const pinned = ctx.pins.get(host);
  const pin = pinned === undefined ? undefined : candidates.find((d) => d.id === pinned);
  if (pin) return { domain: pin, binding: "override" };
  const bound = boundDomain(env, candidates, ctx.bindings);
  if (bound) return { domain: bound, binding: "environment_binding" };
  const longest = [...candidates].sort((a, b) => b.name.length - a.name.length)[0]!;
  return { domain: longest, binding: "suffix_match" };
}

/**
 * The domain among `candidates` that the environment's bindings prefer (rule 2 above): bindings
 * of the environment (by id) or of its role (its name), the highest priority first (ties: an id
 * binding before a role binding, then the older binding). Null when none binds one of them.
 */
export function boundDomain<D extends BindableDomain>(env: { id: number; name: string }, candidates: D[], bindings: EnvBindingRow[]): D | null {
  const role = env.name.toLowerCase();
  const matching = bindings
    .filter((b) => (b.environmentId !== null ? b.environmentId === env.id : b.environmentRole === role) && candidates.some((d) => d.id === b.dnsDomainId))
    .sort((a, b) => b.priority - a.priority || Number(b.environmentId !== null) - Number(a.environmentId !== null) || a.id - b.id);
  return matching.length ? candidates.find((d) => d.id === matching[0]!.dnsDomainId)! : null;
}
