import { isIP } from "node:net";
import type { CloudflareTunnelProvider, IngressRule, TunnelConfig } from "./providers/cloudflare-tunnel.js";
import { bareName, type DnsRecord, type RecordData } from "./providers/types.js";
import { applyPlan, markerName, markerText, planZone, type Drift, type Plan } from "./reconcile.js";

// ---- cloudflare_tunnel (issue 21, w7) ----

/**
 * Plan, then apply, for a domain whose provider is a Cloudflare Tunnel (docs/dns.md). Each name
 * the domain routes gets two things: a proxied CNAME `<name> → <tunnel id>.cfargotunnel.com` in
 * the zone, with the ownership marker of reconcile.ts beside it, and an ingress rule
 * `{hostname: <name>, service: http://<server address>:80}` in the tunnel's configuration (the
 * server's proxy routes by host name, as for the other providers).
 *
 * The configuration API replaces the ingress list whole, so the list is merged: a rule is
 * Capstan's when the zone holds this domain's marker for its hostname; every other rule (made
 * by hand, by another domain or tool) is kept as it was, in its order. The new list is: our
 * per-host rules, the other rules, our wildcard rules, the catch-all (the one found last, or
 * `http_status:404`), because cloudflared takes the first rule that matches and refuses a list
 * not ending in a catch-all. A name someone else's rule or record holds is drift: reported,
 * neither rule nor record written.
 */

/** The TTL Cloudflare gives proxied records ("automatic"). */
export const PROXIED_TTL = 1;
const CATCH_ALL: IngressRule = { service: "http_status:404" };

export interface TunnelPlan {
  /** The zone's part: markers and proxied CNAMEs (applied like any zone plan). */
  dns: Plan;
  /** The whole ingress list to PUT, or null when it stays as it is. */
  ingress: IngressRule[] | null;
  config: TunnelConfig;
  /** Both parts in one, for last_applied and dry_run (ingress rules as type "INGRESS", content its service). */
  shown: Plan;
  /** The routing records the domain wants in the zone (the CNAMEs). */
  desired: RecordData[];
}

/** The origin an ingress rule sends a name to: the server's proxy on port 80. */
export function originOf(address: string): string {
  return isIP(address) === 6 ? `http://[${address}]:80` : `http://${address}:80`;
}

const isCatchAll = (r: IngressRule) => !r.hostname && !r.path;
const isWildcard = (h: string) => h.startsWith("*.");
const ingressRecord = (hostname: string, service: string): RecordData => ({ name: hostname, type: "INGRESS" as RecordData["type"], content: service, ttl: 0 });

/**
 * `wanted`: the routing records the domain's mode wants, each pointing a name at a server's
 * address (as for the other providers); they become CNAMEs to the tunnel plus ingress rules.
 */
export function planTunnel(current: DnsRecord[], config: TunnelConfig, wanted: RecordData[], owner: string, target: string, markerTtl = 300): TunnelPlan {
  const text = markerText(owner);
  const markedBefore = new Set(current.filter((r) => r.type === "TXT" && r.content === text).map((r) => r.name));
  const ours = (host: string) => markedBefore.has(markerName(host));
  const rules = config.ingress;
  const last = rules[rules.length - 1];
  const catchAll = last && isCatchAll(last) ? last : null;
  const others = (catchAll ? rules.slice(0, -1) : rules).filter((r) => !(r.hostname && ours(bareName(r.hostname))));
  const mine = rules.filter((r) => r.hostname && ours(bareName(r.hostname)));

  const drift: Drift[] = [];
  const routes = new Map<string, string>();
  for (const w of wanted) {
    const host = bareName(w.name);
    if (routes.has(host)) continue;
    const foreign = others.find((r) => r.hostname && bareName(r.hostname) === host);
    if (foreign) {
      drift.push({ name: host, type: "INGRESS", content: foreign.service, reason: "The tunnel has an ingress rule for this name that Capstan did not create; it is left as it is." });
      continue;
    }
    routes.set(host, originOf(w.content));
  }
  const desired = [...routes.keys()].map((name): RecordData => ({ name, type: "CNAME", content: target, ttl: PROXIED_TTL }));
  const dns = planZone(current, desired, owner, markerTtl);
  // Names the zone refuses us (someone else's record) get no rule either.
  const markedAfter = new Set([...markedBefore, ...dns.creates.filter((r) => r.type === "TXT" && r.content === text).map((r) => r.name)]);
  const routed = [...routes].filter(([host]) => markedAfter.has(markerName(host)));

  const shown: Plan = { creates: [...dns.creates], updates: [...dns.updates], deletes: [...dns.deletes], drift: [...dns.drift, ...drift] };
  const next: IngressRule[] = [];
  for (const [host, service] of routed) {
    const had = mine.find((r) => bareName(r.hostname!) === host);
    if (!had) shown.creates.push(ingressRecord(host, service));
    else if (had.service !== service || had.path) shown.updates.push({ existing: { ...ingressRecord(host, had.service), id: `ingress:${host}` }, record: ingressRecord(host, service) });
    // A rule of ours that is right stays as it is (fields added to it by hand included).
    next.push(had && had.service === service && !had.path ? had : { hostname: host, service });
  }
  for (const r of mine) if (!routed.some(([host]) => host === bareName(r.hostname!))) shown.deletes.push({ ...ingressRecord(bareName(r.hostname!), r.service), id: `ingress:${r.hostname}` });
  const byHost = (a: IngressRule, b: IngressRule) => (a.hostname! < b.hostname! ? -1 : a.hostname! > b.hostname! ? 1 : 0);
  const exact = next.filter((r) => !isWildcard(r.hostname!)).sort(byHost);
  // The more specific wildcard first (*.a.example.com before *.example.com).
  const wild = next.filter((r) => isWildcard(r.hostname!)).sort((a, b) => b.hostname!.length - a.hostname!.length || byHost(a, b));
  const ingress = [...exact, ...others, ...wild, catchAll ?? CATCH_ALL];
  const unchanged = JSON.stringify(ingress) === JSON.stringify(rules) || (rules.length === 0 && ingress.length === 1 && !routed.length);
  return { dns, ingress: unchanged ? null : ingress, config, shown, desired };
}

/**
 * Applies a tunnel plan: markers and CNAMEs first, then the ingress list, then the deletions of
 * records and (last) markers, so a reconcile cut short never leaves a rule or record of ours
 * without the marker that lets the next reconcile recognise it.
 */
export async function applyTunnel(provider: CloudflareTunnelProvider, zone: string, plan: TunnelPlan, readVersion: number | null): Promise<{ raced: boolean }> {
  await applyPlan(provider, zone, { ...plan.dns, deletes: [] });
  let raced = false;
  if (plan.ingress) {
    const version = await provider.putConfig({ ...plan.config, ingress: plan.ingress });
    // Someone wrote the configuration between our read and our write (another replica's
    // reconcile of a domain on this tunnel, the dashboard): our list may have dropped their change.
    raced = readVersion !== null && version !== null && version !== readVersion + 1;
  }
  await applyPlan(provider, zone, { creates: [], updates: [], deletes: plan.dns.deletes, drift: [] });
  return { raced };
}

/**
 * One read-merge-write of a tunnel's configuration at a time in this process: two domains on
 * the same tunnel reconciling at once would otherwise each PUT a list without the other's change.
 */
const tunnelLocks = new Map<string, Promise<unknown>>();
export async function withTunnelLock<T>(key: string, work: () => Promise<T>): Promise<T> {
  const before = tunnelLocks.get(key) ?? Promise.resolve();
  const run = before.catch(() => undefined).then(work);
  const tail = run.catch(() => undefined);
  tunnelLocks.set(key, tail);
  try {
    return await run;
  } finally {
    if (tunnelLocks.get(key) === tail) tunnelLocks.delete(key);
  }
}
