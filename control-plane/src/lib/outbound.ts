import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";
import { Agent, fetch as undiciFetch, type RequestInit, type Response } from "undici";

/**
 * Requests the control plane makes to addresses users chose (a git app's API, an S3 endpoint)
 * must not become a way to reach what only the control plane can reach: its own loopback,
 * link-local addresses and the cloud metadata services behind them. The check runs on every
 * address the name resolves to, at connect time (so a name that resolves to something else
 * on the second lookup gains nothing). Private ranges (10/8, 192.168/16, ...) stay allowed:
 * self-hosted git servers and S3 endpoints live there. PLATFORM_ALLOW_PRIVATE_ENDPOINTS lifts
 * the check entirely (a control plane whose git server runs on the same machine).
 */
const FORBIDDEN = new BlockList();
FORBIDDEN.addSubnet("0.0.0.0", 8, "ipv4"); // "this network"; 0.0.0.0 reaches the local host
FORBIDDEN.addSubnet("127.0.0.0", 8, "ipv4"); // loopback
FORBIDDEN.addSubnet("169.254.0.0", 16, "ipv4"); // link-local, incl. 169.254.169.254 metadata
FORBIDDEN.addAddress("100.100.100.200", "ipv4"); // a cloud metadata service outside link-local
FORBIDDEN.addSubnet("224.0.0.0", 4, "ipv4"); // multicast
FORBIDDEN.addSubnet("240.0.0.0", 4, "ipv4"); // reserved, broadcast
FORBIDDEN.addAddress("::", "ipv6");
FORBIDDEN.addAddress("::1", "ipv6");
FORBIDDEN.addSubnet("fe80::", 10, "ipv6"); // link-local
FORBIDDEN.addAddress("fd00:ec2::254", "ipv6"); // a cloud metadata service over IPv6
FORBIDDEN.addSubnet("ff00::", 8, "ipv6"); // multicast

/** Whether an address is one the control plane must not call on a user's behalf. */
export function isForbiddenAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return FORBIDDEN.check(address, "ipv4");
  if (family === 6) {
    // IPv4-mapped (::ffff:127.0.0.1) and the like: judge the IPv4 address inside.
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
    if (mapped) return FORBIDDEN.check(mapped[1]!, "ipv4");
    return FORBIDDEN.check(address, "ipv6");
  }
  return true;
}

export class ForbiddenEndpointError extends Error {
  override name = "ForbiddenEndpointError";
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** dns.lookup that refuses forbidden addresses, for the socket's own connect. */
function guardedLookup(hostname: string, options: { all?: boolean } & Record<string, unknown>, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, "");
    const list = addresses as LookupAddress[];
    const bad = list.find((a) => isForbiddenAddress(a.address));
    if (bad) {
      return callback(new ForbiddenEndpointError(`${hostname} resolves to ${bad.address}, a loopback, link-local or metadata address; refused (PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it)`), "");
    }
    if (options.all) return callback(null, list);
    const first = list[0];
    if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "");
    callback(null, first.address, first.family);
  });
}

export type OutboundFetch = (url: string, init?: RequestInit) => Promise<Response>;

/**
 * fetch for user-chosen endpoints. A literal IP in the URL is checked before connecting (no
 * lookup happens for it); names are checked on every address they resolve to.
 */
export function outboundFetch(opts: { allowPrivate: boolean }): OutboundFetch {
  if (opts.allowPrivate) return (url, init) => undiciFetch(url, init);
  const dispatcher = new Agent({ connect: { lookup: guardedLookup as never } });
  return async (url, init) => {
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "");
    if (isIP(host) && isForbiddenAddress(host)) {
      throw new ForbiddenEndpointError(`${host} is a loopback, link-local or metadata address; refused (PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it)`);
    }
    return undiciFetch(url, { ...init, dispatcher });
  };
}
