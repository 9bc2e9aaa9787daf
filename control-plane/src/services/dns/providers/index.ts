import type { OutboundFetch } from "../../../lib/outbound.js";
import { CloudflareProvider, type CloudflareCredentials } from "./cloudflare.js";
import { CloudflareTunnelProvider, type CloudflareTunnelCredentials } from "./cloudflare-tunnel.js";
import { PowerDnsProvider, type PowerDnsCredentials } from "./powerdns.js";
import { Rfc2136Provider, type Rfc2136Credentials } from "./rfc2136.js";
import type { DnsProvider } from "./types.js";

export * from "./types.js";
export { CallBudget } from "./rate-budget.js";
export { CloudflareProvider, CLOUDFLARE_API_URL, CLOUDFLARE_BUDGET, type CloudflareCredentials } from "./cloudflare.js";
export { CloudflareTunnelProvider, tunnelTarget, type CloudflareTunnelCredentials, type IngressRule, type TunnelConfig } from "./cloudflare-tunnel.js";
export { PowerDnsProvider, type PowerDnsCredentials } from "./powerdns.js";
export { Rfc2136Provider, TSIG_ALGORITHMS, type Rfc2136Credentials, type TsigAlgorithm } from "./rfc2136.js";

export type ProviderConfig =
  | { type: "powerdns"; credentials: PowerDnsCredentials }
  | { type: "rfc2136"; credentials: Rfc2136Credentials }
  | { type: "cloudflare"; credentials: CloudflareCredentials }
  | { type: "cloudflare_tunnel"; credentials: CloudflareTunnelCredentials };

export interface ProviderContext {
  /** fetch for user-chosen URLs (PowerDNS): the private-address guard unless the instance lifts it. */
  userFetch: OutboundFetch;
  /** fetch for the operator-set Cloudflare base URL. */
  fetch: OutboundFetch;
  allowPrivate: boolean;
  cloudflareApiUrl: string;
}

export function createProvider(config: ProviderConfig, ctx: ProviderContext): DnsProvider {
  switch (config.type) {
    case "powerdns":
      return new PowerDnsProvider(config.credentials, ctx.userFetch);
    case "rfc2136":
      return new Rfc2136Provider(config.credentials, { allowPrivate: ctx.allowPrivate });
    case "cloudflare":
      return new CloudflareProvider(config.credentials, ctx.fetch, ctx.cloudflareApiUrl);
    case "cloudflare_tunnel":
      return new CloudflareTunnelProvider(config.credentials, ctx.fetch, ctx.cloudflareApiUrl);
  }
}
