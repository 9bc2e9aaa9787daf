import { z } from "zod";

/**
 * The user-facing proxy-label namespace (docs/proxy-labels.md): labels a user may put on the
 * public container of an application (compose `labels`, later a service's label overrides) to
 * add directives to the routes the proxy serves for it. The platform's own labels keep the
 * reserved `capstan.` prefix, which users cannot set; these live under `proxy.`.
 *
 * Parsed label by label: a bad label is left out with a reason (the agent reports it in its
 * proxy facts) and never reaches Caddy; the good ones still apply. Values are only ever
 * literal: braces are refused, because Caddy expands `{...}` placeholders in header values and
 * credentials (`{env.*}`, `{file.*}`), which would let a label read the proxy's environment or
 * files into a response.
 */
export const PROXY_LABEL_PREFIX = "proxy.";

export const PROXY_LABEL = {
  /** `proxy.basic_auth.<username>` = bcrypt hash ($2a$/$2b$/$2y$): every route of the container asks for credentials. */
  basicAuth: "proxy.basic_auth.",
  /** `proxy.headers.response.<Name>` = value: set on every response (empty value: remove the header). */
  responseHeader: "proxy.headers.response.",
  /** `proxy.headers.request.<Name>` = value: set on the request passed upstream (empty value: remove it). */
  requestHeader: "proxy.headers.request.",
  /** `proxy.redirect` = to-apex | to-www: between two of the container's own hosts (www.example.com and example.com). */
  redirect: "proxy.redirect",
  /** `proxy.encode` = comma list of zstd, gzip: compress responses the client accepts compressed. */
  encode: "proxy.encode",
  /** `proxy.network` = network the proxy reaches the container on (spec section 1, rule 9); wins over the automatic one. */
  network: "proxy.network",
} as const;

/** Bounds that keep one container from bloating the proxy's config (every reload sends it whole). */
export const PROXY_LABEL_LIMITS = { users: 20, headers: 50, headerValue: 4096 } as const;

const CONTROL = /[\u0000-\u001f\u007f]/;
const literal = (max: number) =>
  z
    .string()
    .max(max, `longer than ${max} characters`)
    .refine((v) => !CONTROL.test(v), "control characters (newlines, tabs) are not allowed")
    .refine((v) => !/[{}]/.test(v), "braces are not allowed: the proxy would read {...} as a placeholder");

/** RFC 9110 token; names the proxy must keep to itself are refused (hop-by-hop, framing, Host). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "content-length", "host"]);
export const ProxyHeaderName = z
  .string()
  .regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/, "not a header name")
  .refine((n) => !HOP_BY_HOP.has(n.toLowerCase()), "this header is managed by the proxy");
export const ProxyHeaderValue = literal(PROXY_LABEL_LIMITS.headerValue);

export const BasicAuthUser = z.string().regex(/^[A-Za-z0-9._@-]{1,64}$/, "user names use letters, digits and . _ @ -");
/**
 * A bcrypt hash as `caddy hash-password` or `htpasswd -nbB` print it. A plain password is
 * refused, not hashed: a label is readable by anyone who can inspect the container, so the
 * password itself must never be in one.
 */
export const BcryptHash = z
  .string()
  .regex(/^\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}$/, "not a bcrypt hash ($2a$, $2b$ or $2y$, 60 characters); a plain password is refused (docs/proxy-labels.md)");

export const ProxyRedirect = z.enum(["to-apex", "to-www"], { error: "use to-apex or to-www" });
export const ProxyEncoding = z.enum(["zstd", "gzip"]);
export const ProxyNetworkName = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, "must name a Docker network (letters, digits, _ . -)");

/** The directives one container's labels ask for, every part already checked. */
export const ProxyDirectives = z.object({
  basic_auth: z.array(z.object({ user: BasicAuthUser, hash: BcryptHash })).max(PROXY_LABEL_LIMITS.users),
  request_headers: z.record(ProxyHeaderName, ProxyHeaderValue),
  response_headers: z.record(ProxyHeaderName, ProxyHeaderValue),
  redirect: ProxyRedirect.nullable(),
  encode: z.array(ProxyEncoding).max(2),
  network: ProxyNetworkName.nullable(),
});
export type ProxyDirectives = z.infer<typeof ProxyDirectives>;

export const NO_DIRECTIVES: ProxyDirectives = Object.freeze({
  basic_auth: [],
  request_headers: {},
  response_headers: {},
  redirect: null,
  encode: [],
  network: null,
}) as ProxyDirectives;

export interface ParsedProxyLabels {
  directives: ProxyDirectives;
  /** One line per label left out: the key and why (never the value: it may be a credential). */
  problems: string[];
}

const issue = (r: { error?: z.ZodError }) => r.error?.issues[0]?.message ?? "invalid";

/**
 * The `proxy.*` labels of one container as directives; every other label is ignored. Header
 * names are matched case-insensitively (the last key in sorted order wins a tie), so the result
 * is the same for the same labels in any order.
 */
export function parseProxyLabels(labels: Readonly<Record<string, string>>): ParsedProxyLabels {
  const problems: string[] = [];
  const d = { basic_auth: [] as ProxyDirectives["basic_auth"], request_headers: {} as Record<string, string>, response_headers: {} as Record<string, string>, redirect: null as ProxyDirectives["redirect"], encode: [] as ProxyDirectives["encode"], network: null as string | null };
  const bad = (key: string, why: string) => problems.push(`label ${key.slice(0, 200)}: ${why}; ignored`);
  const keys = Object.keys(labels)
    .filter((k) => k.startsWith(PROXY_LABEL_PREFIX))
    .sort();
  for (const key of keys) {
    const value = labels[key]!;
    if (key.startsWith(PROXY_LABEL.basicAuth)) {
      const user = BasicAuthUser.safeParse(key.slice(PROXY_LABEL.basicAuth.length));
      const hash = BcryptHash.safeParse(value);
      if (!user.success) bad(key, issue(user));
      else if (!hash.success) bad(key, issue(hash));
      else if (d.basic_auth.length >= PROXY_LABEL_LIMITS.users) bad(key, `at most ${PROXY_LABEL_LIMITS.users} users`);
      else d.basic_auth.push({ user: user.data, hash: hash.data });
      continue;
    }
    const headerKind = key.startsWith(PROXY_LABEL.responseHeader) ? "response_headers" : key.startsWith(PROXY_LABEL.requestHeader) ? "request_headers" : null;
    if (headerKind) {
      const name = ProxyHeaderName.safeParse(key.slice((headerKind === "response_headers" ? PROXY_LABEL.responseHeader : PROXY_LABEL.requestHeader).length));
      const val = ProxyHeaderValue.safeParse(value);
      const set = d[headerKind];
      if (!name.success) bad(key, issue(name));
      else if (!val.success) bad(key, issue(val));
      else if (Object.keys(d.request_headers).length + Object.keys(d.response_headers).length >= PROXY_LABEL_LIMITS.headers) bad(key, `at most ${PROXY_LABEL_LIMITS.headers} headers`);
      else {
        const canonical = canonicalHeader(name.data);
        set[canonical] = val.data;
      }
      continue;
    }
    if (key === PROXY_LABEL.redirect) {
      const r = ProxyRedirect.safeParse(value.trim());
      if (r.success) d.redirect = r.data;
      else bad(key, issue(r));
      continue;
    }
    if (key === PROXY_LABEL.encode) {
      const parts = value.split(",").map((p) => p.trim()).filter(Boolean);
      const parsed = z.array(ProxyEncoding, { error: "use zstd, gzip or both (comma-separated)" }).min(1, "use zstd, gzip or both (comma-separated)").safeParse(parts);
      if (parsed.success) d.encode = [...new Set(parsed.data)];
      else bad(key, "use zstd, gzip or both (comma-separated)");
      continue;
    }
    if (key === PROXY_LABEL.network) {
      const n = ProxyNetworkName.safeParse(value);
      if (n.success) d.network = n.data;
      else bad(key, issue(n));
      continue;
    }
    bad(key, `not a proxy directive (${Object.values(PROXY_LABEL).join(", ")})`);
  }
  return { directives: ProxyDirectives.parse(d), problems };
}

/** X-FRAME-options -> X-Frame-Options: one spelling per header, so two labels cannot set it twice. */
function canonicalHeader(name: string): string {
  return name
    .split("-")
    .map((p) => (p ? p[0]!.toUpperCase() + p.slice(1).toLowerCase() : p))
    .join("-");
}

export function hasDirectives(d: ProxyDirectives): boolean {
  return d.basic_auth.length > 0 || Object.keys(d.request_headers).length > 0 || Object.keys(d.response_headers).length > 0 || d.redirect !== null || d.encode.length > 0;
}
