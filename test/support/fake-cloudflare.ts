import { randomBytes, randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server } from "node:http";

/**
 * A local stand-in for the Cloudflare v4 API calls Capstan makes, speaking its request and
 * response shapes: every answer is the {success, errors, messages, result[, result_info]}
 * envelope; auth is `Authorization: Bearer <token>`. Served under /client/v4:
 * GET /user/tokens/verify, GET /zones?name=, GET/POST /zones/{id}/dns_records (paged with
 * page/per_page), PUT/PATCH/DELETE /zones/{id}/dns_records/{record_id}, and
 * GET /accounts/{account_id}/cfd_tunnel/{tunnel_id} and (w7)
 * GET/PUT /accounts/{account_id}/cfd_tunnel/{tunnel_id}/configurations, where a PUT replaces the
 * ingress list whole and is refused unless its last rule is a catch-all (no hostname).
 * `rateLimitNext` answers the next N requests with 429 and Retry-After, as Cloudflare does.
 */
export interface FakeCfRecord {
  id: string;
  zone_id: string;
  zone_name: string;
  name: string;
  type: string;
  content: string;
  ttl: number;
  proxied: boolean;
  created_on: string;
  modified_on: string;
}

export interface FakeCloudflare {
  /** Base URL to configure as the control plane's Cloudflare API URL (ends in /client/v4). */
  url: string;
  tokens: Set<string>;
  /** Adds a zone the tokens can see; returns its id. */
  addZone(name: string): string;
  records(zoneName: string): FakeCfRecord[];
  /**
   * Tunnels by `<account id>/<tunnel id>` (w7): the configuration last PUT (null: never
   * configured), its version, and whether the tunnel is deleted or managed locally.
   */
  tunnels: Map<string, FakeTunnel>;
  /** w7: adds a remotely-managed tunnel to an account (ids generated when not given); returns its id. */
  addTunnel(accountId: string, opts?: { id?: string; ingress?: FakeIngressRule[]; remoteConfig?: boolean }): string;
  /** w7: called once with the tunnel before the next configuration PUT is applied (another writer landing first), then cleared. */
  beforeNextConfigPut: ((tunnel: FakeTunnel) => void) | null;
  /** w7: the ingress list of a tunnel ([] when never configured). */
  ingress(accountId: string, tunnelId: string): FakeIngressRule[];
  calls: { method: string; path: string }[];
  rateLimitNext: number;
  /** w7: the Retry-After of those 429 answers (seconds; default 1). */
  rateLimitRetryAfter: number;
  /** w5/dns: when set, every request waits for it before being answered (holds a reconcile mid-run). */
  gate: Promise<void> | null;
  /** w5/dns: the most requests that were waiting or being answered at once. */
  maxInFlight: number;
  close(): Promise<void>;
}

export interface FakeIngressRule {
  hostname?: string;
  path?: string;
  service: string;
  [field: string]: unknown;
}
export interface FakeTunnel {
  id: string;
  name: string;
  config: { ingress: FakeIngressRule[]; [field: string]: unknown } | null;
  version: number;
  remoteConfig: boolean;
  deletedAt: string | null;
}

const id32 = () => randomBytes(16).toString("hex");

/**
 * w7: the checks the configurations API makes on a PUT (cloudflared's ingress rules): at least
 * one rule, each with a service, hostnames either plain or with one leading "*.", and exactly
 * the last rule matching everything (no hostname, no path). A message when refused.
 */
function ingressProblem(ingress: unknown): string | null {
  if (!Array.isArray(ingress) || ingress.length === 0) return "Validation failed: The ingress list must have at least one rule";
  for (const [i, r] of (ingress as FakeIngressRule[]).entries()) {
    if (!r || typeof r !== "object" || typeof r.service !== "string" || !r.service) return `Validation failed: Rule #${i + 1} has no service`;
    if (r.hostname !== undefined && (typeof r.hostname !== "string" || !/^(\*\.)?[a-z0-9.-]+$/i.test(r.hostname))) return `Validation failed: Rule #${i + 1} has an invalid hostname`;
    const all = !r.hostname && !r.path;
    if (all && i < ingress.length - 1) return `Validation failed: Rule #${i + 1} is matching all URLs, but isn't the last rule`;
    if (!all && i === ingress.length - 1) return "Validation failed: The last ingress rule must match all URLs (i.e. it should not have a hostname or path filter)";
  }
  return null;
}

function envelope(result: unknown, extra: Record<string, unknown> = {}) {
  return { success: true, errors: [], messages: [], result, ...extra };
}
function failure(code: number, message: string) {
  return { success: false, errors: [{ code, message }], messages: [], result: null };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  return text ? JSON.parse(text) : undefined;
}

const RECORD_TYPES = new Set(["A", "AAAA", "CNAME", "TXT", "MX", "NS", "SRV", "CAA"]);

export async function startFakeCloudflare(): Promise<FakeCloudflare> {
  const zones = new Map<string, { id: string; name: string; records: FakeCfRecord[] }>();
  const fake: FakeCloudflare = {
    url: "",
    tokens: new Set(),
    addZone(name) {
      const z = { id: id32(), name, records: [] as FakeCfRecord[] };
      zones.set(z.id, z);
      return z.id;
    },
    records(zoneName) {
      return [...zones.values()].find((z) => z.name === zoneName)?.records ?? [];
    },
    tunnels: new Map(),
    beforeNextConfigPut: null,
    addTunnel(accountId, opts = {}) {
      const id = opts.id ?? randomUUID();
      fake.tunnels.set(`${accountId}/${id}`, { id, name: `tunnel-${id.slice(0, 8)}`, config: opts.ingress ? { ingress: opts.ingress } : null, version: opts.ingress ? 1 : 0, remoteConfig: opts.remoteConfig ?? true, deletedAt: null });
      return id;
    },
    ingress(accountId, tunnelId) {
      return fake.tunnels.get(`${accountId}/${tunnelId}`)?.config?.ingress ?? [];
    },
    calls: [],
    rateLimitNext: 0,
    rateLimitRetryAfter: 1,
    gate: null,
    maxInFlight: 0,
    close: () => new Promise((r) => server.close(() => r())),
  };

  let inFlight = 0;
  const server: Server = createServer((req, res) => {
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "Content-Type": "application/json", ...headers });
      res.end(JSON.stringify(body));
    };
    inFlight++;
    fake.maxInFlight = Math.max(fake.maxInFlight, inFlight);
    res.on("close", () => inFlight--);
    void (async () => {
      const u = new URL(req.url ?? "/", "http://x");
      const method = req.method ?? "GET";
      fake.calls.push({ method, path: u.pathname });
      if (fake.gate) await fake.gate;
      if (fake.rateLimitNext > 0) {
        fake.rateLimitNext--;
        return send(429, failure(971, "Please wait and consider throttling your request speed"), { "Retry-After": String(fake.rateLimitRetryAfter) });
      }
      const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
      if (!token || !fake.tokens.has(token)) return send(401, failure(10000, "Authentication error"));
      const p = u.pathname.replace(/^\/client\/v4/, "").split("/").filter(Boolean);

      if (method === "GET" && p.join("/") === "user/tokens/verify") {
        return send(200, envelope({ id: id32(), status: "active" }, { messages: [{ code: 10000, message: "This API Token is valid and active", type: null }] }));
      }
      if (method === "GET" && p.length === 1 && p[0] === "zones") {
        const name = u.searchParams.get("name");
        const list = [...zones.values()].filter((z) => !name || z.name === name).map((z) => ({ id: z.id, name: z.name, status: "active", paused: false, type: "full" }));
        return send(200, envelope(list, { result_info: { page: 1, per_page: 20, count: list.length, total_count: list.length, total_pages: 1 } }));
      }
      if (p[0] === "zones" && p[2] === "dns_records") {
        const zone = zones.get(p[1] ?? "");
        if (!zone) return send(404, failure(7003, "Could not route to /zones/" + p[1] + ", perhaps your object identifier is invalid?"));
        if (p.length === 3 && method === "GET") {
          const page = Math.max(1, Number(u.searchParams.get("page") ?? 1));
          const per = Math.min(5000, Math.max(5, Number(u.searchParams.get("per_page") ?? 100)));
          const all = zone.records;
          const slice = all.slice((page - 1) * per, page * per);
          return send(200, envelope(slice, { result_info: { page, per_page: per, count: slice.length, total_count: all.length, total_pages: Math.max(1, Math.ceil(all.length / per)) } }));
        }
        if (p.length === 3 && method === "POST") {
          const b = (await readJson(req)) as Partial<FakeCfRecord>;
          if (!b?.type || !RECORD_TYPES.has(b.type) || !b.name || typeof b.content !== "string") return send(400, failure(9005, "DNS record is invalid: type, name and content are required"));
          const name = b.name.endsWith(zone.name) ? b.name : `${b.name}.${zone.name}`;
          if (zone.records.some((r) => r.name === name && r.type === b.type && r.content === b.content)) return send(400, failure(81058, "An identical record already exists."));
          if (b.type === "CNAME" && zone.records.some((r) => r.name === name)) return send(400, failure(81053, "A CNAME record with that host already exists or conflicts."));
          const now = new Date().toISOString();
          const rec: FakeCfRecord = { id: id32(), zone_id: zone.id, zone_name: zone.name, name, type: b.type, content: b.content, ttl: b.ttl ?? 1, proxied: b.proxied ?? false, created_on: now, modified_on: now };
          zone.records.push(rec);
          return send(200, envelope(rec));
        }
        const rec = zone.records.find((r) => r.id === p[3]);
        if (!rec) return send(404, failure(81044, "Record does not exist."));
        if (method === "DELETE") {
          zone.records.splice(zone.records.indexOf(rec), 1);
          return send(200, envelope({ id: rec.id }));
        }
        if (method === "PUT" || method === "PATCH") {
          const b = (await readJson(req)) as Partial<FakeCfRecord>;
          if (method === "PUT" && (!b?.type || !b.name || typeof b.content !== "string")) return send(400, failure(9005, "DNS record is invalid"));
          Object.assign(rec, { ...b, modified_on: new Date().toISOString() });
          return send(200, envelope(rec));
        }
        if (method === "GET") return send(200, envelope(rec));
      }
      if (p[0] === "accounts" && p[2] === "cfd_tunnel" && p.length >= 4) {
        const tunnel = fake.tunnels.get(`${p[1]}/${p[3]}`);
        if (!tunnel) return send(404, failure(1003, "Tunnel not found"));
        // GET /accounts/{account}/cfd_tunnel/{tunnel}: the tunnel itself.
        if (p.length === 4 && method === "GET") {
          return send(200, envelope({ id: tunnel.id, account_tag: p[1], name: tunnel.name, status: "healthy", tun_type: "cfd_tunnel", remote_config: tunnel.remoteConfig, config_src: tunnel.remoteConfig ? "cloudflare" : "local", deleted_at: tunnel.deletedAt, created_at: new Date(0).toISOString(), connections: [] }));
        }
        if (p.length === 5 && p[4] === "configurations") {
          const result = () => ({ account_id: p[1], tunnel_id: tunnel.id, version: tunnel.version, config: tunnel.config, source: "cloudflare", created_at: new Date().toISOString() });
          if (method === "GET") return send(200, envelope(result()));
          if (method === "PUT") {
            const b = (await readJson(req)) as { config?: { ingress?: unknown; [k: string]: unknown } };
            if (!b || typeof b.config !== "object" || b.config === null) return send(400, failure(1001, "Validation failed: config is required"));
            const problem = ingressProblem(b.config.ingress);
            if (problem) return send(400, failure(1056, problem));
            const other = fake.beforeNextConfigPut;
            fake.beforeNextConfigPut = null;
            other?.(tunnel);
            tunnel.config = b.config as FakeTunnel["config"];
            tunnel.version++;
            return send(200, envelope(result()));
          }
        }
      }
      send(404, failure(7000, "No route for that URI"));
    })().catch((err: unknown) => send(400, failure(6007, `Malformed JSON in request body: ${(err as Error).message}`)));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  const port = (server.address() as { port: number }).port;
  fake.url = `http://127.0.0.1:${port}/client/v4`;
  return fake;
}
