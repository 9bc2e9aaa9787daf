import type { OutboundFetch } from "../../../lib/outbound.js";
import { CallBudget } from "./rate-budget.js";
import { bareName, DnsProviderError, isManagedType, PROVIDER_TIMEOUT_MS, type DnsProvider, type DnsRecord, type RecordData } from "./types.js";

export interface CloudflareCredentials {
  api_token: string;
}

/** Cloudflare's API base; an instance setting (PLATFORM_CLOUDFLARE_API_URL) so tests and proxies can point elsewhere. */
export const CLOUDFLARE_API_URL = "https://api.cloudflare.com/client/v4";

export interface Envelope<T> {
  success: boolean;
  errors?: { code?: number; message?: string }[];
  result: T;
  result_info?: { page: number; per_page: number; total_pages?: number; total_count?: number };
}

/** How often a 429 is retried, and the longest wait honoured from Retry-After. */
const RETRIES_ON_429 = 3;
const MAX_WAIT_MS = 10_000;

/**
 * w7: Cloudflare's documented limit is 1200 requests per five minutes per user, shared with the
 * dashboard and other tools, and exceeding it blocks the user's calls for five minutes: Capstan
 * spends at most 1000 of them per token and process (rate-budget.ts).
 */
export const CLOUDFLARE_BUDGET = new CallBudget(1000, 5 * 60_000, MAX_WAIT_MS);

/**
 * Cloudflare's v4 API with an API token (Authorization: Bearer): zones by name, then the zone's
 * dns_records. Every answer is the {success, errors, messages, result[, result_info]} envelope;
 * lists are paged (per_page up to 100 here). Calls are counted against CLOUDFLARE_BUDGET (under
 * Cloudflare's documented limit, per token). A 429 is retried after Retry-After (when at most
 * 10 s; a longer wait is reported at once, never cut short), a few times, then reported; a
 * reconcile only issues the calls its plan needs.
 */
export class CloudflareProvider implements DnsProvider {
  private readonly zoneIds = new Map<string, string>();

  constructor(
    protected readonly creds: CloudflareCredentials,
    private readonly fetch: OutboundFetch,
    private readonly baseUrl: string = CLOUDFLARE_API_URL,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
    private readonly budget: CallBudget = CLOUDFLARE_BUDGET,
  ) {}

  protected async call<T>(method: string, path: string, body?: unknown): Promise<Envelope<T>> {
    const url = `${this.baseUrl.replace(/\/+$/, "")}${path}`;
    const key = CallBudget.keyOf(this.creds.api_token);
    for (let attempt = 0; ; attempt++) {
      await this.budget.take(key, this.sleep, "Cloudflare");
      let res;
      try {
        res = await this.fetch(url, {
          method,
          headers: { Authorization: `Bearer ${this.creds.api_token}`, Accept: "application/json", ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
          body: body === undefined ? undefined : JSON.stringify(body),
          signal: AbortSignal.timeout(PROVIDER_TIMEOUT_MS),
        });
      } catch (err) {
        throw new DnsProviderError(`Cloudflare could not be reached: ${(err as Error).message}`);
      }
      if (res.status === 429 && attempt < RETRIES_ON_429) {
        await res.text();
        const after = Number(res.headers.get("retry-after"));
        const waitMs = Number.isFinite(after) && after > 0 ? after * 1000 : 1000 * 2 ** attempt;
        // w7: no call with this token before the wait is over, from any reconcile of this process; a
        // longer wait than we hold a reconcile for is not cut short (that would only be refused
        // again): the reconcile ends with the reason, and the next one (or the next sync) continues.
        this.budget.pause(key, waitMs);
        if (waitMs > MAX_WAIT_MS) throw new DnsProviderError(`Cloudflare's rate limit was reached; it asks to wait ${Math.ceil(waitMs / 1000)} s before the next request. Nothing more was sent; sync again later.`);
        continue;
      }
      const text = await res.text();
      let env: Envelope<T> | undefined;
      try {
        env = JSON.parse(text) as Envelope<T>;
      } catch {
        /* reported below */
      }
      if (!res.ok || !env?.success) {
        const msg = env?.errors?.map((e) => `${e.message ?? "error"}${e.code ? ` (${e.code})` : ""}`).join("; ");
        throw new DnsProviderError(`Cloudflare refused ${method} ${path.split("?")[0]}: HTTP ${res.status}${msg ? `: ${msg}` : ""}`);
      }
      return env;
    }
  }

  private async zoneId(zone: string): Promise<string> {
    const name = bareName(zone);
    const known = this.zoneIds.get(name);
    if (known) return known;
    const env = await this.call<{ id: string; name: string }[]>("GET", `/zones?name=${encodeURIComponent(name)}`);
    const z = env.result.find((r) => bareName(r.name) === name);
    if (!z) throw new DnsProviderError(`The Cloudflare token sees no zone named ${name}.`);
    this.zoneIds.set(name, z.id);
    return z.id;
  }

  async listRecords(zone: string): Promise<DnsRecord[]> {
    const id = await this.zoneId(zone);
    const out: DnsRecord[] = [];
    for (let page = 1; ; page++) {
      const env = await this.call<{ id: string; name: string; type: string; content: string; ttl: number }[]>("GET", `/zones/${id}/dns_records?per_page=100&page=${page}`);
      for (const r of env.result) {
        if (!isManagedType(r.type)) continue;
        const content = r.type === "CNAME" ? bareName(r.content) : r.type === "TXT" ? unquoteCf(r.content) : r.content;
        out.push({ id: r.id, name: bareName(r.name), type: r.type, content, ttl: r.ttl });
      }
      const pages = env.result_info?.total_pages ?? 1;
      if (page >= pages || env.result.length === 0) break;
    }
    return out;
  }

  protected body(r: RecordData) {
    return { type: r.type, name: bareName(r.name), content: r.type === "TXT" ? `"${r.content}"` : r.content, ttl: r.ttl, proxied: false };
  }

  async createRecord(zone: string, record: RecordData): Promise<void> {
    await this.call("POST", `/zones/${await this.zoneId(zone)}/dns_records`, this.body(record));
  }

  async updateRecord(zone: string, existing: DnsRecord, record: RecordData): Promise<void> {
    await this.call("PUT", `/zones/${await this.zoneId(zone)}/dns_records/${encodeURIComponent(existing.id)}`, this.body(record));
  }

  async deleteRecord(zone: string, existing: DnsRecord): Promise<void> {
    await this.call("DELETE", `/zones/${await this.zoneId(zone)}/dns_records/${encodeURIComponent(existing.id)}`);
  }

  /** GET /user/tokens/verify: the token exists and is active. */
  async testCredentials() {
    try {
      const env = await this.call<{ status?: string }>("GET", "/user/tokens/verify");
      return env.result.status === "active" ? ({ ok: true } as const) : { ok: false as const, error: `The token is ${env.result.status ?? "not active"}.` };
    } catch (err) {
      return { ok: false as const, error: (err as Error).message };
    }
  }
}

/** Cloudflare returns TXT content as sent; ours is sent as one quoted string. */
function unquoteCf(content: string): string {
  const m = /^"(.*)"$/.exec(content);
  return m ? m[1]! : content;
}
