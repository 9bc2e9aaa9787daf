import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { isIP } from "node:net";

/**
 * Connections the platform makes to endpoints users chose (a git app's API, an S3 endpoint)
 * must not become a way to reach what only the platform's machines can reach: their loopback,
 * link-local addresses and the cloud metadata services behind them (also multicast, unspecified
 * and reserved addresses). Private networks stay reachable: self-hosted git and S3 servers
 * (MinIO, Ceph) live there. Addresses are judged one by one at connect time, on every address
 * a name resolves to (a name that resolves differently on a second lookup gains nothing), and
 * addresses that embed an IPv4 address (::ffff:a.b.c.d, NAT64, 6to4) are judged by the IPv4
 * address inside.
 */
export type AddressClass =
  | "public"
  | "unspecified"
  | "loopback"
  | "link-local"
  | "metadata"
  | "multicast"
  | "reserved"
  | "private"
  | "unique-local"
  | "cgnat"
  | "invalid";

/** What is local to the machine itself (or not an address at all): refused. */
const LOCAL_CLASSES: ReadonlySet<AddressClass> = new Set(["unspecified", "loopback", "link-local", "metadata", "multicast", "reserved", "invalid"]);

/** Cloud metadata services that do not sit in a link-local range. */
const METADATA_V4 = new Set(["100.100.100.200"]);

type V4 = [number, number, number, number];

function parseV4(address: string): V4 | null {
  const parts = address.split(".");
  if (parts.length !== 4) return null;
  const out: number[] = [];
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    out.push(n);
  }
  return out as V4;
}

/** 16 bytes of an IPv6 address (accepts an embedded dotted IPv4 tail and a %zone suffix). */
function parseV6(input: string): number[] | null {
  const address = input.replace(/%.*$/, "");
  if (isIP(address) !== 6) return null;
  let head = address;
  let tailV4: V4 | null = null;
  const lastColon = address.lastIndexOf(":");
  if (address.slice(lastColon + 1).includes(".")) {
    tailV4 = parseV4(address.slice(lastColon + 1));
    if (!tailV4) return null;
    head = address.slice(0, lastColon + 1) + "0:0";
  }
  const halves = head.split("::");
  const toGroups = (s: string) => (s === "" ? [] : s.split(":").map((g) => parseInt(g, 16)));
  const left = toGroups(halves[0] ?? "");
  const right = halves.length > 1 ? toGroups(halves[1] ?? "") : [];
  const missing = 8 - left.length - right.length;
  const groups = halves.length > 1 ? [...left, ...new Array<number>(missing).fill(0), ...right] : left;
  if (groups.length !== 8 || groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff)) return null;
  const bytes = groups.flatMap((g) => [g >> 8, g & 0xff]);
  if (tailV4) bytes.splice(12, 4, ...tailV4);
  return bytes;
}

function classifyV4([a, b, c, d]: V4): AddressClass {
  if (METADATA_V4.has(`${a}.${b}.${c}.${d}`)) return "metadata";
  if (a === 0) return "unspecified"; // "this network"; 0.0.0.0 reaches the local host
  if (a === 127) return "loopback";
  if (a === 169 && b === 254) return c === 169 && d === 254 ? "metadata" : "link-local";
  if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) return "private";
  if (a === 198 && (b === 18 || b === 19)) return "private"; // benchmarking range, used inside networks
  if (a === 100 && b >= 64 && b <= 127) return "cgnat";
  if (a === 192 && b === 0 && c === 0) return "reserved"; // IETF protocol assignments
  if (a >= 224 && a <= 239) return "multicast";
  if (a >= 240) return "reserved"; // incl. 255.255.255.255
  return "public";
}

function classifyV6(bytes: number[]): AddressClass {
  const zeroUpTo = (n: number) => bytes.slice(0, n).every((x) => x === 0);
  const v4At = (i: number) => bytes.slice(i, i + 4) as V4;
  if (zeroUpTo(16)) return "unspecified";
  if (zeroUpTo(15) && bytes[15] === 1) return "loopback";
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (deprecated compatible form)
  if (zeroUpTo(10) && ((bytes[10] === 0xff && bytes[11] === 0xff) || (bytes[10] === 0 && bytes[11] === 0))) return classifyV4(v4At(12));
  // 64:ff9b::/96 NAT64 and 64:ff9b:1::/48 local-use NAT64
  if (bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b) return classifyV4(v4At(12));
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return classifyV4(v4At(2)); // 6to4
  const first = bytes[0]!;
  const second = bytes[1]!;
  // fd00:ec2::254, a cloud metadata service over IPv6
  if (first === 0xfd && second === 0x00 && bytes[2] === 0x0e && bytes[3] === 0xc2 && bytes.slice(4, 14).every((x) => x === 0) && bytes[14] === 0x02 && bytes[15] === 0x54) {
    return "metadata";
  }
  if (first === 0xff) return "multicast";
  if (first === 0xfe && (second & 0xc0) === 0x80) return "link-local"; // fe80::/10
  if (first === 0xfe && (second & 0xc0) === 0xc0) return "private"; // fec0::/10, deprecated site-local
  if ((first & 0xfe) === 0xfc) return "unique-local"; // fc00::/7
  if (first === 0x01 && second === 0x00 && bytes.slice(2, 8).every((x) => x === 0)) return "reserved"; // 100::/64 discard
  return "public";
}

/** What kind of address this is; anything that is not an IP address is "invalid". */
export function classifyAddress(address: string): AddressClass {
  const family = isIP(address.replace(/%.*$/, ""));
  if (family === 4) return classifyV4(parseV4(address)!);
  if (family === 6) {
    const bytes = parseV6(address);
    return bytes ? classifyV6(bytes) : "invalid";
  }
  return "invalid";
}

/** Whether connecting to this address is refused. */
export function isRefusedAddress(address: string): boolean {
  return LOCAL_CLASSES.has(classifyAddress(address));
}

export class ForbiddenEndpointError extends Error {
  override name = "ForbiddenEndpointError";
  readonly code = "EFORBIDDENENDPOINT";
}

/** The message of a refusal; `setting` names what lifts the check, for the operator. */
function refusal(host: string, address: string, setting: string): string {
  const what = host === address ? `${address} is` : `${host} resolves to ${address},`;
  return `${what} a ${classifyAddress(address)} address; loopback, link-local or metadata addresses are refused (${setting} allows them)`;
}

/** Throws ForbiddenEndpointError when `host` is a refused literal IP address (names pass: they are judged at lookup). */
export function assertHostAllowed(host: string, setting: string): void {
  const bare = host.replace(/^\[|\]$/g, "");
  if (isIP(bare.replace(/%.*$/, "")) && isRefusedAddress(bare)) throw new ForbiddenEndpointError(refusal(bare, bare, setting));
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;
export type GuardedLookup = (hostname: string, options: { all?: boolean } & Record<string, unknown>, callback: LookupCallback) => void;

/**
 * A dns.lookup replacement for a socket's own connect (net/tls `lookup` option, undici's
 * connect.lookup) that fails when any address of the name is refused.
 */
export function guardedLookup(setting: string): GuardedLookup {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "");
      const list = addresses as LookupAddress[];
      const bad = list.find((a) => isRefusedAddress(a.address));
      if (bad) return callback(new ForbiddenEndpointError(refusal(hostname, bad.address, setting)), "");
      if (options.all) return callback(null, list);
      const first = list[0];
      if (!first) return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENOTFOUND" }), "");
      callback(null, first.address, first.family);
    });
  };
}
