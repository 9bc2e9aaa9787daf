import { isIP } from "node:net";
import type { Db, Prisma } from "../../db/client.js";
import type { WildcardDomain } from "../../config.js";
import { boundDomain } from "../dns/bindings.js";

/**
 * Generated domains of service applications (issue 17, docs/services.md "Generated domains",
 * decisions.md): a routable service application (one a SERVICE_FQDN_/SERVICE_URL_ variable names)
 * gets a domain when its service is created, so that it is reachable without a PATCH, as users of
 * this API family expect. The domain is `<component>-<short id>.<base>`, where the base is, first
 * match wins:
 *
 *  1. managed_domain: a managed DNS domain (issue 21) of the team whose wildcard record points at
 *     the service's server (routing mode wildcard or hybrid): `*.<domain>` already reaches the
 *     server, so the name works as soon as the proxy routes it; https.
 *  2. instance_wildcard: PLATFORM_SERVICE_WILDCARD_DOMAIN, the operator's own wildcard; the scheme
 *     it was given (https when bare).
 *  3. sslip: `<server ip>.sslip.io` (sslip.io answers every `*.<ip>.sslip.io` with that ip, as
 *     Coolify's default domains do); http, as Coolify's are: a certificate per generated name
 *     from a public CA on a shared suffix is a rate limit waiting to happen. A server whose
 *     address is a local name (localhost, *.localhost, host.docker.internal) is the control
 *     plane's own machine: the IP literal of PLATFORM_PUBLIC_URL when it has one, else 127.0.0.1.
 *     A server added by any other DNS name gets no generated domain (nothing says its name has
 *     a wildcard): its components stay unrouted until PATCH, as before.
 */

export type GenerationSource = "managed_domain" | "instance_wildcard" | "sslip";

export interface GenerationBase {
  /** The part after `<component>-<short id>.`. */
  suffix: string;
  https: boolean;
  source: GenerationSource;
}

/** A server address that means "this machine" rather than a name with DNS behind it. */
export function isLocalName(address: string): boolean {
  const a = address.toLowerCase().replace(/\.$/, "");
  return a === "localhost" || a.endsWith(".localhost") || a === "host.docker.internal";
}

/**
 * The sslip.io label of an IP address: IPv4 as it is; IPv6 with `-` for `:`, with a `0` where a
 * leading or trailing `::` would leave a label starting or ending with `-` (sslip.io reads
 * `0--1` as `::1`). Null for anything that is not an IP literal.
 */
export function sslipLabel(ip: string): string | null {
  const family = isIP(ip);
  if (family === 4) return ip;
  if (family !== 6 || ip.includes(".") || ip.includes("%")) return null;
  let label = ip.toLowerCase().replace(/:/g, "-");
  if (label.startsWith("-")) label = `0${label}`;
  if (label.endsWith("-")) label = `${label}0`;
  return label;
}

/** The host of a URL when it is an IP literal (brackets of IPv6 removed); null otherwise. */
function ipOfUrl(url: string): string | null {
  try {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
    return isIP(host) ? host : null;
  } catch {
    return null;
  }
}

/** The sslip.io suffix for a server address; null for a server added by a DNS name. */
export function sslipSuffix(serverIp: string, publicUrl: string): string | null {
  const ip = isIP(serverIp) ? serverIp : isLocalName(serverIp) ? (ipOfUrl(publicUrl) ?? "127.0.0.1") : null;
  const label = ip === null ? null : sslipLabel(ip);
  return label === null ? null : `${label}.sslip.io`;
}

/** The base of the rule above; null: the service's components get no generated domain. */
export function generationBase(i: { managedDomain: string | null; wildcard: WildcardDomain | null; serverIp: string; publicUrl: string }): GenerationBase | null {
  if (i.managedDomain) return { suffix: i.managedDomain, https: true, source: "managed_domain" };
  if (i.wildcard) return { suffix: i.wildcard.host, https: i.wildcard.https, source: "instance_wildcard" };
  const suffix = sslipSuffix(i.serverIp, i.publicUrl);
  return suffix === null ? null : { suffix, https: false, source: "sslip" };
}

/** Characters of the service uuid in a generated name: unique enough among a team's services, short enough to read. */
export const SHORT_ID_LENGTH = 8;
/** A DNS label holds at most 63 characters: the component part is cut so that `<component>-<short id>` fits. */
const MAX_COMPONENT_LABEL = 63 - 1 - SHORT_ID_LENGTH;

/**
 * The first DNS label of a generated domain: the compose service name lowercased, every
 * character a DNS label cannot hold (`_`, `.`) as `-`, cut to fit, then `-` and the first
 * characters of the service's uuid (hex digits only).
 */
export function generatedLabel(component: string, serviceUuid: string): string {
  const name =
    component
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, "-")
      .slice(0, MAX_COMPONENT_LABEL)
      .replace(/^-+|-+$/g, "") || "app";
  const short = serviceUuid.toLowerCase().replace(/[^0-9a-f]/g, "").slice(0, SHORT_ID_LENGTH);
  return `${name}-${short}`;
}

/**
 * The fqdn a component is given: `scheme://<label>.<suffix>` plus the path the template asks its
 * domain to carry (the catalog's `SERVICE_FQDN_X=/path` form), as PATCH would store it.
 */
export function generatedFqdn(base: GenerationBase, component: string, serviceUuid: string, path: string | null): string {
  const p = path && path !== "/" ? `/${path.replace(/^\/+|\/+$/g, "")}` : "";
  return `${base.https ? "https" : "http"}://${generatedLabel(component, serviceUuid)}.${base.suffix}${p}`;
}

/** What the rule reads besides the database: the instance's settings. */
export interface GenerationSettings {
  wildcard: WildcardDomain | null;
  publicUrl: string;
}

/**
 * The base for a service of `teamId` on `serverId` in `environment`. Several managed domains
 * of the team pointing *.<domain> at the server: the one the environment's DNS bindings prefer
 * (bindings.ts, the rule hostnames bind by), else the oldest.
 */
export async function generationBaseFor(
  db: Db | Prisma.TransactionClient,
  where: { teamId: number; serverId: number; environment: { id: number; name: string } },
  settings: GenerationSettings,
): Promise<GenerationBase | null> {
  const server = await db.server.findFirst({ where: { id: where.serverId, teamId: where.teamId }, select: { ip: true } });
  if (!server) return null;
  const domains = await db.dnsDomain.findMany({
    where: { teamId: where.teamId, serverId: where.serverId, routingMode: { in: ["wildcard", "hybrid"] } },
    orderBy: { id: "asc" },
    select: { id: true, name: true },
  });
  let managed = domains[0] ?? null;
  if (domains.length > 1) {
    const bindings = await db.dnsEnvironmentBinding.findMany({ where: { dnsDomainId: { in: domains.map((d) => d.id) } }, orderBy: { id: "asc" } });
    managed = boundDomain(where.environment, domains, bindings) ?? managed;
  }
  return generationBase({ managedDomain: managed?.name ?? null, wildcard: settings.wildcard, serverIp: server.ip, publicUrl: settings.publicUrl });
}
