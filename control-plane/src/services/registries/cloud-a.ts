import { createHash, createHmac } from "node:crypto";
import type { OutboundFetch } from "../../lib/outbound.js";

/**
 * cloud_a's token exchange (issue 18, docs/registries.md): the vendor's GetAuthorizationToken
 * call, an AWS JSON 1.1 request (`POST /` with `X-Amz-Target`) signed with Signature Version 4
 * by the registry's access key, answers `{authorizationData: [{authorizationToken, expiresAt,
 * proxyEndpoint}]}`: the token is base64 `user:password` for the registry's basic login, valid
 * for 12 hours. Errors are `{__type, message}` with a 4xx/5xx status.
 */
export interface CloudAKeys {
  cloud_access_key_id: string;
  cloud_secret_access_key: string;
  cloud_region: string;
}
export interface CloudAToken {
  username: string;
  password: string;
  expiresAt: Date;
  /** The registry URL the vendor names for the token (null when it names none). */
  proxyEndpoint: string | null;
}

const TARGET = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";
const SERVICE = "ecr";
const CONTENT_TYPE = "application/x-amz-json-1.1";

/** The vendor's API endpoint of a region (`endpoint` overrides it: PLATFORM_REGISTRY_CLOUD_A_ENDPOINT, tests' fake). */
export function cloudAEndpoint(region: string, endpoint?: string | null): string {
  return endpoint ? endpoint.replace(/\/+$/, "") : `https://api.ecr.${region}.amazonaws.com`;
}

const sha256hex = (s: string) => createHash("sha256").update(s, "utf8").digest("hex");
const hmac = (key: Buffer | string, s: string) => createHmac("sha256", key).update(s, "utf8").digest();

/** Signature Version 4 headers of a POST of `body` to `url`, at `now`. */
export function signV4(url: string, body: string, headers: Record<string, string>, keys: CloudAKeys, now: Date): Record<string, string> {
  const u = new URL(url);
  const amzDate = now.toISOString().replace(/[-:]/g, "").replace(/\.\d{3}/, "");
  const day = amzDate.slice(0, 8);
  const all: Record<string, string> = { ...Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v.trim()])), host: u.host, "x-amz-date": amzDate };
  const names = Object.keys(all).sort();
  const canonical = ["POST", u.pathname || "/", "", ...names.map((n) => `${n}:${all[n]}`), "", names.join(";"), sha256hex(body)].join("\n");
  const scope = `${day}/${keys.cloud_region}/${SERVICE}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256hex(canonical)].join("\n");
  const key = hmac(hmac(hmac(hmac(`AWS4${keys.cloud_secret_access_key}`, day), keys.cloud_region), SERVICE), "aws4_request");
  const signature = createHmac("sha256", key).update(toSign, "utf8").digest("hex");
  return {
    ...headers,
    "X-Amz-Date": amzDate,
    Authorization: `AWS4-HMAC-SHA256 Credential=${keys.cloud_access_key_id}/${scope}, SignedHeaders=${names.join(";")}, Signature=${signature}`,
  };
}

/** Exchanges the access key for a registry token; throws with the vendor's reason (never the secret). */
export async function exchangeCloudAToken(
  fetch: OutboundFetch,
  keys: CloudAKeys,
  opts: { endpoint?: string | null; now: Date; signal?: AbortSignal },
): Promise<CloudAToken> {
  const url = `${cloudAEndpoint(keys.cloud_region, opts.endpoint)}/`;
  const body = "{}";
  const headers = signV4(url, body, { "Content-Type": CONTENT_TYPE, "X-Amz-Target": TARGET }, keys, opts.now);
  const res = await fetch(url, { method: "POST", headers, body, redirect: "manual", ...(opts.signal ? { signal: opts.signal } : {}) });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // not JSON: the status says it
  }
  if (!res.ok) {
    const type = typeof json.__type === "string" ? json.__type.split("#").pop() : null;
    const message = typeof json.message === "string" ? json.message : typeof json.Message === "string" ? json.Message : text.slice(0, 200);
    throw new Error(`The token exchange answered ${res.status}${type ? ` ${type}` : ""}: ${message}`.split(keys.cloud_secret_access_key).join("****"));
  }
  const data = (json.authorizationData as { authorizationToken?: unknown; expiresAt?: unknown; proxyEndpoint?: unknown }[] | undefined)?.[0];
  if (!data || typeof data.authorizationToken !== "string" || typeof data.expiresAt !== "number") {
    throw new Error("The token exchange answered without authorizationData.");
  }
  const decoded = Buffer.from(data.authorizationToken, "base64").toString("utf8");
  const i = decoded.indexOf(":");
  if (i <= 0) throw new Error("The token exchange answered a token that is not user:password.");
  return {
    username: decoded.slice(0, i),
    password: decoded.slice(i + 1),
    expiresAt: new Date(Math.round(data.expiresAt * 1000)),
    proxyEndpoint: typeof data.proxyEndpoint === "string" ? data.proxyEndpoint : null,
  };
}
