import type { OutboundFetch } from "../../lib/outbound.js";

/**
 * The login check of the Docker Registry HTTP API V2, as `docker login` does it, from the
 * control plane: `GET /v2/` without credentials; a registry that wants a login answers 401 with
 * a `WWW-Authenticate` challenge, either `Basic realm=...` (send the credentials to /v2/) or
 * `Bearer realm=...,service=...[,scope=...]` (ask the realm, with the credentials, for a token
 * for that service, then show /v2/ the token). 200 at the end is a working login; anything else
 * is a failed one with the registry's own reason.
 *
 * Every request goes through the outbound guard (lib/outbound.ts): the registry and the realm it
 * names are user-chosen addresses. Redirects are not followed: a redirect to a literal address
 * would pass by the guard's lookup.
 */

export type HandshakeResult = { ok: true; note?: string } | { ok: false; error: string };

export interface HandshakeLogin {
  username: string;
  password: string;
}

interface Challenge {
  scheme: string;
  params: Record<string, string>;
}

/** `Bearer realm="https://auth.example/token",service="registry.example"` -> {scheme: "bearer", params}. */
export function parseChallenge(header: string | null): Challenge | null {
  if (!header) return null;
  const m = /^\s*([A-Za-z]+)\s*(.*)$/s.exec(header);
  if (!m) return null;
  const params: Record<string, string> = {};
  for (const p of m[2]!.matchAll(/([A-Za-z_]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g)) params[p[1]!.toLowerCase()] = (p[2] ?? p[3] ?? "").replace(/\\(.)/g, "$1");
  return { scheme: m[1]!.toLowerCase(), params };
}

/** What an error body says: the registry's `errors[].message` (and detail), a token server's `details`/`error`, or the status. */
async function reason(res: { status: number; text(): Promise<string> }, what: string): Promise<string> {
  let text = "";
  try {
    text = (await res.text()).slice(0, 4096);
  } catch {
    /* the status says enough */
  }
  let said: string | undefined;
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    if (Array.isArray(body.errors)) {
      said = body.errors
        .map((e: { message?: unknown; code?: unknown }) => String(e?.message ?? e?.code ?? ""))
        .filter(Boolean)
        .join("; ");
    }
    said ||= typeof body.details === "string" ? body.details : typeof body.error === "string" ? body.error : typeof body.message === "string" ? body.message : undefined;
  } catch {
    said = text.trim() || undefined;
  }
  return `${what} answered ${res.status}${said ? `: ${said}` : ""}`;
}

function basic(login: HandshakeLogin): string {
  return `Basic ${Buffer.from(`${login.username}:${login.password}`, "utf8").toString("base64")}`;
}

/**
 * Docker Hub's API answers at registry-1.docker.io, while users name it docker.io or
 * index.docker.io (as `docker login` does).
 */
export function v2Base(url: string): string {
  const u = new URL(url);
  if (["docker.io", "index.docker.io", "registry.hub.docker.com"].includes(u.hostname)) return "https://registry-1.docker.io";
  return u.origin;
}

/** The handshake against `url` (an origin) with `login`; `signal` bounds the whole exchange. */
export async function registryHandshake(fetch: OutboundFetch, url: string, login: HandshakeLogin, signal: AbortSignal): Promise<HandshakeResult> {
  const base = v2Base(url);
  const get = (target: string, authorization?: string) =>
    fetch(target, { method: "GET", redirect: "manual", signal, headers: { accept: "application/json", ...(authorization ? { authorization } : {}) } });

  const first = await get(`${base}/v2/`);
  if (first.status === 200) {
    await first.body?.cancel();
    return { ok: true, note: "The registry takes requests without a login." };
  }
  if (first.status !== 401) {
    if (first.status === 404) return { ok: false, error: `${base}/v2/ answered 404: not a Docker Registry HTTP API V2 endpoint` };
    return { ok: false, error: await reason(first, `${base}/v2/`) };
  }
  const challenge = parseChallenge(first.headers.get("www-authenticate"));
  await first.body?.cancel();
  if (!challenge) return { ok: false, error: `${base}/v2/ answered 401 without a WWW-Authenticate challenge` };

  if (challenge.scheme === "basic") {
    const res = await get(`${base}/v2/`, basic(login));
    if (res.status === 200) {
      await res.body?.cancel();
      return { ok: true };
    }
    return { ok: false, error: await reason(res, "The registry") };
  }

  if (challenge.scheme === "bearer") {
    const realm = challenge.params.realm;
    if (!realm || !URL.canParse(realm) || !/^https?:$/.test(new URL(realm).protocol)) {
      return { ok: false, error: `The registry's Bearer challenge names no usable realm (${realm ?? "none"})` };
    }
    const tokenUrl = new URL(realm);
    if (challenge.params.service) tokenUrl.searchParams.set("service", challenge.params.service);
    if (challenge.params.scope) tokenUrl.searchParams.set("scope", challenge.params.scope);
    tokenUrl.searchParams.set("account", login.username);
    const tokenRes = await get(tokenUrl.toString(), basic(login));
    if (tokenRes.status !== 200) return { ok: false, error: await reason(tokenRes, `The token service ${tokenUrl.origin}`) };
    let token: unknown;
    try {
      const body = (await tokenRes.json()) as { token?: unknown; access_token?: unknown };
      token = body.token ?? body.access_token;
    } catch {
      token = undefined;
    }
    if (typeof token !== "string" || !token) return { ok: false, error: `The token service ${tokenUrl.origin} answered without a token` };
    const res = await get(`${base}/v2/`, `Bearer ${token}`);
    if (res.status === 200) {
      await res.body?.cancel();
      return { ok: true };
    }
    return { ok: false, error: await reason(res, "The registry") };
  }
  return { ok: false, error: `The registry asks for ${challenge.scheme} authentication, which a Docker login does not speak` };
}
