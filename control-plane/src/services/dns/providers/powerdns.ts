import type { OutboundFetch } from "../../../lib/outbound.js";
import { bareName, DnsProviderError, isManagedType, PROVIDER_TIMEOUT_MS, quoteTxt, unquoteTxt, type DnsProvider, type DnsRecord, type RecordData } from "./types.js";

export interface PowerDnsCredentials {
  /** Base URL of the PowerDNS webserver (http://ns1.example.com:8081), without /api/v1. */
  api_url: string;
  api_key: string;
  /** The server_id of the API paths; PowerDNS Authoritative always calls itself "localhost". */
  server_id: string;
}

interface RRSet {
  name: string;
  type: string;
  ttl: number;
  records: { content: string; disabled: boolean }[];
}

/**
 * PowerDNS Authoritative through its HTTP API (/api/v1/servers/{server_id}/zones/{zone_id}).
 * PowerDNS has no record ids: a record is one content of an RRset (name + type), and every
 * change replaces the RRset whole (PATCH changetype REPLACE/DELETE), so a change to one of our
 * records keeps the other contents of its RRset as they are.
 */
export class PowerDnsProvider implements DnsProvider {
  constructor(
    private readonly creds: PowerDnsCredentials,
    private readonly fetch: OutboundFetch,
  ) {}

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    const url = `${this.creds.api_url.replace(/\/+$/, "")}/api/v1/servers/${encodeURIComponent(this.creds.server_id)}${path}`;
    let res;
    try {
      res = await this.fetch(url, {
        method,
        headers: { "X-API-Key": this.creds.api_key, Accept: "application/json", ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
      });
    } catch (err) {
      throw new DnsProviderError(`PowerDNS at ${this.creds.api_url} could not be reached: ${(err as Error).message}`);
    }
    const text = await res.text();
    if (!res.ok) {
      let reason = `HTTP ${res.status}`;
      try {
        const j = JSON.parse(text) as { error?: unknown };
        if (typeof j.error === "string") reason += `: ${j.error}`;
      } catch {
        /* not JSON (401 answers in plain text) */
      }
      throw new DnsProviderError(`PowerDNS refused ${method} ${path.split("?")[0]}: ${reason}`);
    }
    return text ? JSON.parse(text) : undefined;
  }

  private zonePath(zone: string): string {
    return `/zones/${encodeURIComponent(`${bareName(zone)}.`)}`;
  }

  private async rrsets(zone: string): Promise<RRSet[]> {
    const z = (await this.call("GET", this.zonePath(zone))) as { rrsets?: RRSet[] };
    return z.rrsets ?? [];
  }

  async listRecords(zone: string): Promise<DnsRecord[]> {
    const out: DnsRecord[] = [];
    for (const set of await this.rrsets(zone)) {
      if (!isManagedType(set.type)) continue;
      for (const r of set.records) {
        if (r.disabled) continue;
        const content = set.type === "TXT" ? unquoteTxt(r.content) : bareContent(set.type, r.content);
        const name = bareName(set.name);
        out.push({ id: `${name}|${set.type}|${content}`, name, type: set.type, content, ttl: set.ttl });
      }
    }
    return out;
  }

  /** Writes the RRset of (name, type) with these contents (none: deletes it). */
  private async putSet(zone: string, name: string, type: string, ttl: number, contents: string[]): Promise<void> {
    const set = { name: `${bareName(name)}.`, type, ttl };
    const change = contents.length
      ? { ...set, changetype: "REPLACE", records: contents.map((content) => ({ content, disabled: false })) }
      : { ...set, changetype: "DELETE", records: [] };
    await this.call("PATCH", this.zonePath(zone), { rrsets: [change] });
  }

  /** The current contents (presentation format) of one RRset. */
  private async current(zone: string, name: string, type: string): Promise<{ ttl: number; contents: string[] }> {
    const set = (await this.rrsets(zone)).find((s) => bareName(s.name) === bareName(name) && s.type === type);
    return { ttl: set?.ttl ?? 0, contents: set ? set.records.map((r) => r.content) : [] };
  }

  async createRecord(zone: string, record: RecordData): Promise<void> {
    const cur = await this.current(zone, record.name, record.type);
    const add = wire(record);
    if (cur.contents.includes(add)) return;
    await this.putSet(zone, record.name, record.type, record.ttl, [...cur.contents, add]);
  }

  async updateRecord(zone: string, existing: DnsRecord, record: RecordData): Promise<void> {
    const cur = await this.current(zone, existing.name, existing.type);
    const old = wire(existing);
    const contents = cur.contents.filter((c) => c !== old && c !== wire(record));
    await this.putSet(zone, record.name, record.type, record.ttl, [...contents, wire(record)]);
  }

  async deleteRecord(zone: string, existing: DnsRecord): Promise<void> {
    const cur = await this.current(zone, existing.name, existing.type);
    const old = wire(existing);
    if (!cur.contents.includes(old)) return;
    await this.putSet(zone, existing.name, existing.type, cur.ttl, cur.contents.filter((c) => c !== old));
  }

  async testCredentials() {
    try {
      const s = (await this.call("GET", "")) as { daemon_type?: string };
      return s.daemon_type === undefined || s.daemon_type === "authoritative"
        ? ({ ok: true } as const)
        : { ok: false as const, error: `The API answers as a PowerDNS ${s.daemon_type}, not an authoritative server.` };
    } catch (err) {
      return { ok: false as const, error: (err as Error).message };
    }
  }
}

/** Content as PowerDNS stores it: TXT quoted, names absolute with the trailing dot. */
function wire(r: RecordData): string {
  if (r.type === "TXT") return quoteTxt(r.content);
  if (r.type === "CNAME") return `${bareName(r.content)}.`;
  return r.content;
}

function bareContent(type: string, content: string): string {
  return type === "CNAME" ? bareName(content) : content;
}
