import type { CreatedDashboardToken, DashboardTokenView, SessionToken, SessionView, TokenScope } from "@capstan/shared";

/**
 * How the page talks to the control plane (docs/decisions.md "Dashboard sessions"):
 * /session with the HTTP-only cookie and the CSRF header, and /api/v1 and /fleet with a
 * short-lived API token the session hands out. The token lives in memory only.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function json<T>(res: Response): Promise<T> {
  const text = await res.text();
  const body = text ? (JSON.parse(text) as unknown) : undefined;
  if (!res.ok) {
    const message = (body as { message?: string } | undefined)?.message ?? `HTTP ${res.status}`;
    throw new HttpError(res.status, message);
  }
  return body as T;
}

let csrf = "";
let token: { value: string; renewAt: number } | null = null;
let minting: Promise<string> | null = null;

/** The current session, or null when signed out. */
export async function loadSession(): Promise<SessionView | null> {
  const res = await fetch("/session", { credentials: "same-origin", headers: { Accept: "application/json" } });
  if (res.status === 401) return null;
  const view = await json<SessionView>(res);
  csrf = view.csrf_token;
  return view;
}

async function sessionPost<T>(path: string, body: unknown): Promise<T> {
  const res = await fetch(`/session${path}`, {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  });
  return json<T>(res);
}

function adopt(view: SessionView): SessionView {
  csrf = view.csrf_token;
  token = null;
  return view;
}

export const signIn = async (email: string, password: string) => adopt(await sessionPost<SessionView>("/sign-in", { email, password }));
export const signInWithLink = async (link: string) => adopt(await sessionPost<SessionView>("/link", { link }));
export const switchTeam = async (teamId: number) => adopt(await sessionPost<SessionView>("/team", { team_id: teamId }));

export async function signOut(): Promise<void> {
  const res = await fetch("/session/sign-out", { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: "{}" });
  token = null;
  csrf = "";
  if (!res.ok && res.status !== 401) throw new HttpError(res.status, "Signing out failed.");
}

/** A valid API token for the session's team; a new one well before the old one expires. */
export function apiToken(force = false): Promise<string> {
  if (!force && token && Date.now() < token.renewAt) return Promise.resolve(token.value);
  minting ??= sessionPost<SessionToken>("/token", {})
    .then((t) => {
      const expires = Date.parse(t.expires_at);
      token = { value: t.token, renewAt: Date.now() + (expires - Date.now()) / 2 };
      return t.token;
    })
    .finally(() => {
      minting = null;
    });
  return minting;
}

/** GET /api/v1{path} with the session's token; a 401 gets one retry with a fresh token. */
export async function apiGet<T>(path: string): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`/api/v1${path}`, { headers: { Accept: "application/json", Authorization: `Bearer ${await apiToken(attempt > 0)}` } });
    if (res.status === 401 && attempt === 0) continue;
    return json<T>(res);
  }
}

/**
 * Every item of a paginated list of the API (`path` without page parameters): page 1 with the
 * largest page size, then the remaining pages at most 4 at a time. A list of N items costs
 * ceil(N / 100) requests, never one per item.
 */
export async function apiGetAll<T>(path: string): Promise<T[]> {
  const sep = path.includes("?") ? "&" : "?";
  const page = (n: number) => apiGet<{ data: T[]; meta?: { last_page: number } }>(`${path}${sep}per_page=100&page=${n}`);
  const first = await page(1);
  const last = first.meta?.last_page ?? 1;
  const rest: T[][] = [];
  for (let n = 2; n <= last; n += 4) {
    const batch = [];
    for (let k = n; k < Math.min(n + 4, last + 1); k++) batch.push(page(k));
    for (const r of await Promise.all(batch)) rest.push(r.data);
  }
  return first.data.concat(...rest);
}

/** /session/api-tokens: the Keys and Tokens → API Tokens page (the spec keeps token creation out of the API). */
export const listTokens = async () => (await json<{ data: DashboardTokenView[] }>(await fetch("/session/api-tokens", { credentials: "same-origin", headers: { Accept: "application/json" } }))).data;
export const createToken = (name: string, scopes: TokenScope[]) => sessionPost<CreatedDashboardToken>("/api-tokens", { name, scopes });
export async function revokeToken(id: number): Promise<void> {
  await json(await fetch(`/session/api-tokens/${id}`, { method: "DELETE", credentials: "same-origin", headers: { Accept: "application/json", "X-CSRF-Token": csrf } }));
}

/** A POST or PATCH to /api/v1{path} with the session's token (a 401 gets one retry with a fresh token). */
export async function apiSend<T>(method: "POST" | "PATCH", path: string, body: unknown = {}): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(`/api/v1${path}`, {
      method,
      headers: { Accept: "application/json", "Content-Type": "application/json", Authorization: `Bearer ${await apiToken(attempt > 0)}` },
      body: JSON.stringify(body),
    });
    if (res.status === 401 && attempt === 0) continue;
    return json<T>(res);
  }
}

export const apiPost = <T,>(path: string, body: unknown = {}) => apiSend<T>("POST", path, body);

/**
 * Follows a server-sent event stream of the API (GET with the session's token; EventSource
 * cannot send it): each `data:` line of a default event goes to onLine, the `end` event's data
 * to onEnd. Resolves when the stream closes; abort it with the signal.
 */
export async function followEvents(path: string, on: { line: (text: string) => void; event: (name: string, data: string) => void }, signal: AbortSignal): Promise<void> {
  const res = await fetch(`/api/v1${path}`, { headers: { Accept: "text/event-stream", Authorization: `Bearer ${await apiToken()}` }, signal });
  if (!res.ok || !res.body) await json(res);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data: string[] = [];
      for (const l of block.split("\n")) {
        if (l.startsWith("event:")) name = l.slice(6).trim();
        else if (l.startsWith("data:")) data.push(l.slice(l.startsWith("data: ") ? 6 : 5));
      }
      if (data.length === 0) continue; // a keep-alive comment
      if (name === "message") data.forEach(on.line);
      else on.event(name, data.join("\n"));
    }
  }
}
