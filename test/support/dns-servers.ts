import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { freePort } from "./ports.js";

const run = promisify(execFile);
const SERVICES = fileURLToPath(new URL("../services/", import.meta.url));

/** The test-only credentials test/services/powerdns.sh and knot.sh configure. */
export const PDNS_TEST_API_KEY = "capstan-test-pdns-key";
export const KNOT_TEST_TSIG = { key_name: "capstan-test-key", algorithm: "hmac-sha256" as const, secret: "c2VjcmV0LWNhcHN0YW4tdGVzdC10c2lnLWtleS0wMDA=" };

export interface PowerDnsServer {
  apiUrl: string;
  apiKey: string;
  dnsPort: number;
  /** Creates a Native zone with an NS record (PowerDNS's API: POST /servers/localhost/zones). */
  addZone(zone: string): Promise<void>;
  /** Writes an RRset directly through the API, as an operator would by hand. */
  replaceRRset(zone: string, name: string, type: string, contents: string[], ttl?: number): Promise<void>;
  stop(): Promise<void>;
}

/** A real PowerDNS Authoritative server (sqlite3 backend) on two claimed loopback ports. */
export async function startPowerDns(): Promise<PowerDnsServer> {
  const dnsPort = await freePort();
  const apiPort = await freePort();
  const { stdout } = await run("bash", [`${SERVICES}powerdns.sh`, "start", String(dnsPort), String(apiPort)], { timeout: 300_000 });
  const apiUrl = stdout.trim();
  const api = async (method: string, path: string, body: unknown) => {
    const res = await fetch(`${apiUrl}/api/v1/servers/localhost${path}`, { method, headers: { "X-API-Key": PDNS_TEST_API_KEY, "Content-Type": "application/json" }, body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`PowerDNS ${method} ${path}: ${res.status} ${await res.text()}`);
  };
  return {
    apiUrl,
    apiKey: PDNS_TEST_API_KEY,
    dnsPort,
    addZone: (zone) => api("POST", "/zones", { name: `${zone}.`, kind: "Native", nameservers: [`ns1.${zone}.`] }),
    replaceRRset: (zone, name, type, contents, ttl = 300) =>
      api("PATCH", `/zones/${zone}.`, { rrsets: [{ name: `${name}.`, type, ttl, changetype: "REPLACE", records: contents.map((content) => ({ content, disabled: false })) }] }),
    stop: async () => {
      await run("bash", [`${SERVICES}powerdns.sh`, "stop", String(dnsPort)]);
    },
  };
}

export interface KnotServer {
  server: string;
  port: number;
  zone: string;
  stop(): Promise<void>;
}

/** A real Knot DNS server accepting TSIG-signed updates and transfers of `zone`. */
export async function startKnot(zone: string): Promise<KnotServer> {
  const port = await freePort();
  await run("bash", [`${SERVICES}knot.sh`, "start", String(port), zone], { timeout: 300_000 });
  return {
    server: "127.0.0.1",
    port,
    zone,
    stop: async () => {
      await run("bash", [`${SERVICES}knot.sh`, "stop", String(port)]);
    },
  };
}

/** Asks a DNS server with kdig (a real DNS client): the answers' rdata, sorted. */
export async function dig(port: number, name: string, type: string): Promise<string[]> {
  const { stdout } = await run("kdig", ["-p", String(port), "@127.0.0.1", "+short", "+time=2", "+retry=1", type, name]);
  return stdout.split("\n").map((s) => s.trim()).filter(Boolean).sort();
}
