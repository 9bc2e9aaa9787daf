import type { OutboundFetch } from "../../../lib/outbound.js";
import { CLOUDFLARE_API_URL, CloudflareProvider } from "./cloudflare.js";
import type { CallBudget } from "./rate-budget.js";
import { DnsProviderError, type RecordData } from "./types.js";

// ---- cloudflare_tunnel (issue 21, w7) ----

export interface CloudflareTunnelCredentials {
  api_token: string;
  account_id: string;
  tunnel_id: string;
}

/** One ingress rule of a tunnel's configuration as the API holds it; fields Capstan does not know are kept as they are. */
export interface IngressRule {
  hostname?: string;
  path?: string;
  service: string;
  [field: string]: unknown;
}

/** A remotely-managed tunnel's configuration: `ingress` plus whatever else it holds (originRequest, warp-routing), kept as read. */
export interface TunnelConfig {
  ingress: IngressRule[];
  [field: string]: unknown;
}

/**
 * A Cloudflare zone's records plus one remotely-managed tunnel (cfd_tunnel) of an account: the
 * records are Cloudflare's (CloudflareProvider), except that the CNAMEs written point at the
 * tunnel (`<tunnel id>.cfargotunnel.com`) and are proxied, as a tunnel's public hostnames must be.
 * The tunnel's configuration is read and written whole
 * (`/accounts/{account}/cfd_tunnel/{tunnel}/configurations`): a PUT replaces it, so the caller
 * merges into what it read (tunnel.ts).
 */
export class CloudflareTunnelProvider extends CloudflareProvider {
  constructor(
    readonly tunnel: CloudflareTunnelCredentials,
    fetch: OutboundFetch,
    baseUrl: string = CLOUDFLARE_API_URL,
    sleep?: (ms: number) => Promise<void>,
    budget?: CallBudget,
  ) {
    super({ api_token: tunnel.api_token }, fetch, baseUrl, sleep, budget);
  }

  /** What the tunnel's CNAMEs point at. */
  get target(): string {
    return tunnelTarget(this.tunnel.tunnel_id);
  }

  private get configPath(): string {
    return `/accounts/${encodeURIComponent(this.tunnel.account_id)}/cfd_tunnel/${encodeURIComponent(this.tunnel.tunnel_id)}/configurations`;
  }

  protected override body(r: RecordData) {
    return { ...super.body(r), proxied: r.type === "CNAME" };
  }

  /** The tunnel's configuration; a tunnel never configured through the API has none (an empty ingress list). */
  async getConfig(): Promise<TunnelConfig> {
    return (await this.readConfig()).config;
  }

  /** The configuration and its `version` (null when the answer has none). */
  async readConfig(): Promise<{ config: TunnelConfig; version: number | null }> {
    const env = await this.call<{ config?: Record<string, unknown> | null; version?: unknown } | null>("GET", this.configPath);
    const config = env.result?.config ?? {};
    const ingress = Array.isArray(config.ingress) ? (config.ingress as IngressRule[]) : [];
    return { config: { ...config, ingress }, version: typeof env.result?.version === "number" ? env.result.version : null };
  }

  /** Replaces the tunnel's configuration whole; answers the new `version` (null when the answer has none). */
  async putConfig(config: TunnelConfig): Promise<number | null> {
    // warp-routing is read-only in this API: it is not sent back.
    const { "warp-routing": _readOnly, ...rest } = config;
    const env = await this.call<{ version?: unknown } | null>("PUT", this.configPath, { config: rest });
    return typeof env.result?.version === "number" ? env.result.version : null;
  }

  /** The token is active (GET /user/tokens/verify) and sees the account's tunnel, not deleted and managed remotely. */
  override async testCredentials() {
    const token = await super.testCredentials();
    if (!token.ok) return token;
    try {
      const env = await this.call<{ id?: string; name?: string; deleted_at?: string | null; remote_config?: boolean }>(
        "GET",
        `/accounts/${encodeURIComponent(this.tunnel.account_id)}/cfd_tunnel/${encodeURIComponent(this.tunnel.tunnel_id)}`,
      );
      if (env.result.deleted_at) return { ok: false as const, error: `The tunnel ${this.tunnel.tunnel_id} was deleted.` };
      if (env.result.remote_config === false) {
        return { ok: false as const, error: `The tunnel ${env.result.name ?? this.tunnel.tunnel_id} is managed locally (cloudflared's config file); Capstan needs a remotely-managed tunnel.` };
      }
      return { ok: true as const };
    } catch (err) {
      return { ok: false as const, error: err instanceof DnsProviderError ? err.message : `The tunnel could not be read: ${(err as Error).message}` };
    }
  }
}

export function tunnelTarget(tunnelId: string): string {
  return `${tunnelId}.cfargotunnel.com`;
}
