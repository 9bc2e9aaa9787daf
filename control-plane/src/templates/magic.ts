import { randomBytes } from "node:crypto";

/**
 * "Magic" variables of templates: names starting with SERVICE_ that the platform fills in,
 * with the meaning Coolify's public catalog gives them (docs/templates.md, decisions.md
 * "Template magic variables"), so that its templates deploy unchanged:
 *
 *   SERVICE_PASSWORD_<ID>, SERVICE_PASSWORD_64_<ID>          letters and digits, 32 / 64
 *   SERVICE_PASSWORDWITHSYMBOLS_<ID>, ..._64_<ID>           the same with symbols
 *   SERVICE_USER_<ID>                                       16 letters and digits
 *   SERVICE_BASE64_<ID>, SERVICE_BASE64_32|64|128_<ID>      letters and digits, 32 / N (not base64: the catalog's name)
 *   SERVICE_REALBASE64_<ID>, SERVICE_REALBASE64_32|64|128_<ID>  base64 of 32 / N random bytes
 *   SERVICE_HEX_32|64|128_<ID>                              hex of N random bytes (2N digits)
 *   SERVICE_FQDN_<NAME>[_<PORT>]                            the service's host (no scheme)
 *   SERVICE_URL_<NAME>[_<PORT>]                             the service's URL (with scheme)
 *   SERVICE_FQDN_<PORT>, SERVICE_URL_<PORT>                 the same for the service using it
 */

export type GeneratorCommand =
  | "PASSWORD"
  | "PASSWORD_64"
  | "PASSWORDWITHSYMBOLS"
  | "PASSWORDWITHSYMBOLS_64"
  | "USER"
  | `BASE64_${32 | 64 | 128}`
  | `REALBASE64_${32 | 64 | 128}`
  | `HEX_${32 | 64 | 128}`;

export type MagicVariable =
  | { kind: "generated"; name: string; command: GeneratorCommand }
  | {
      kind: "domain";
      name: string;
      form: "fqdn" | "url";
      /**
       * The compose service the name refers to, as written after FQDN_/URL_ (case kept); null for
       * SERVICE_FQDN_<PORT>, which means the service it is used in (variables.ts binds it).
       */
      service: string | null;
      /** Container port the proxy sends the service's traffic to, when the name ends in _<PORT>. */
      port: number | null;
    };

export const MAGIC_PREFIX = "SERVICE_";

/**
 * Longest prefixes first: SERVICE_PASSWORD_64_X is a 64-character password for X, not a
 * password for "64_X". The catalog's parser splits on underscores and so cannot have IDs with
 * underscores; here the ID is everything after the command, so SERVICE_PASSWORD_MY_DB works too.
 * PASSWORD_WITHSYMBOLS is accepted as another spelling of PASSWORDWITHSYMBOLS.
 */
const GENERATORS: [RegExp, (m: RegExpExecArray) => GeneratorCommand][] = [
  [/^PASSWORD_?WITHSYMBOLS_64_[A-Za-z0-9_]+$/, () => "PASSWORDWITHSYMBOLS_64"],
  [/^PASSWORD_?WITHSYMBOLS_[A-Za-z0-9_]+$/, () => "PASSWORDWITHSYMBOLS"],
  [/^PASSWORD_64_[A-Za-z0-9_]+$/, () => "PASSWORD_64"],
  [/^PASSWORD_[A-Za-z0-9_]+$/, () => "PASSWORD"],
  [/^REALBASE64_(32|64|128)_[A-Za-z0-9_]+$/, (m) => `REALBASE64_${Number(m[1]) as 32 | 64 | 128}`],
  [/^REALBASE64_[A-Za-z0-9_]+$/, () => "REALBASE64_32"],
  [/^BASE64_(32|64|128)_[A-Za-z0-9_]+$/, (m) => `BASE64_${Number(m[1]) as 32 | 64 | 128}`],
  [/^BASE64_[A-Za-z0-9_]+$/, () => "BASE64_32"],
  [/^HEX_(32|64|128)_[A-Za-z0-9_]+$/, (m) => `HEX_${Number(m[1]) as 32 | 64 | 128}`],
  [/^USER_[A-Za-z0-9_]+$/, () => "USER"],
];

/** A trailing all-digit segment is a port (the catalog's rule): SERVICE_URL_API_8080 is API on 8080. */
const DOMAIN = /^(FQDN|URL)_([A-Za-z0-9_]+?)(?:_([0-9]+))?$/;

/**
 * What a SERVICE_* name means; null for a name that does not start with SERVICE_. A SERVICE_*
 * name the platform cannot fill (SERVICE_HEX_X, SERVICE_SUPABASEANON_X...) is "unknown":
 * templates using it are reported, never deployed with an empty value.
 */
export function magicVariable(name: string): MagicVariable | "unknown" | null {
  if (!name.startsWith(MAGIC_PREFIX)) return null;
  const rest = name.slice(MAGIC_PREFIX.length);
  // The catalog's older form SERVICE_FQDN_3001: the service the variable is used in, on that port.
  const own = /^(FQDN|URL)_([0-9]+)$/.exec(rest);
  if (own) {
    const port = Number(own[2]);
    if (port < 1 || port > 65_535) return "unknown";
    return { kind: "domain", name, form: own[1] === "FQDN" ? "fqdn" : "url", service: null, port };
  }
  const d = DOMAIN.exec(rest);
  if (d) {
    const port = d[3] === undefined ? null : Number(d[3]);
    if (port !== null && (port < 1 || port > 65_535)) return "unknown";
    return { kind: "domain", name, form: d[1] === "FQDN" ? "fqdn" : "url", service: d[2]!, port };
  }
  for (const [re, command] of GENERATORS) {
    const m = re.exec(rest);
    if (m) return { kind: "generated", name, command: command(m) };
  }
  return "unknown";
}

/**
 * The compose service a FQDN/URL name refers to: compared lowercase with `-`, `_` and `.` as
 * one character, because variable names cannot hold `-` or `.` (SERVICE_URL_MY_APP is my-app).
 */
export function serviceKey(name: string): string {
  return name.toLowerCase().replace(/[-_.]/g, "_");
}

const LOWER = "abcdefghijklmnopqrstuvwxyz";
const UPPER = LOWER.toUpperCase();
const DIGITS = "0123456789";
/** The catalog's symbol set (Laravel's Str::password): `$`, `\` and braces included, so escaping matters. */
export const SYMBOLS = "~!#$%^&*()-_.,<>?/\\{}[]|:;";
const ALNUM = LOWER + UPPER + DIGITS;

/** `length` characters drawn uniformly from `alphabet` with the OS's CSPRNG (rejection sampling: no modulo bias). */
export function randomString(length: number, alphabet: string): string {
  if (alphabet.length < 2 || alphabet.length > 256) throw new Error("randomString: alphabet of 2-256 characters");
  const limit = 256 - (256 % alphabet.length);
  let out = "";
  while (out.length < length) {
    for (const byte of randomBytes(Math.max(16, (length - out.length) * 2))) {
      if (byte >= limit) continue;
      out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/**
 * A password with at least one character of every class (lowercase, uppercase, digit and, when
 * asked, symbol), as the catalog's generator guarantees: some applications refuse passwords
 * without them. Drawing again until every class is present keeps the result uniform over the
 * passwords that qualify (at 32 characters a redraw is rare).
 */
function password(length: number, symbols: boolean): string {
  const classes = symbols ? [LOWER, UPPER, DIGITS, SYMBOLS] : [LOWER, UPPER, DIGITS];
  const alphabet = classes.join("");
  for (;;) {
    const p = randomString(length, alphabet);
    if (classes.every((c) => [...p].some((ch) => c.includes(ch)))) return p;
  }
}

/** A fresh value for a generator: the catalog's lengths, the OS's CSPRNG. */
export function generate(command: GeneratorCommand): string {
  switch (command) {
    case "PASSWORD":
      return password(32, false);
    case "PASSWORD_64":
      return password(64, false);
    case "PASSWORDWITHSYMBOLS":
      return password(32, true);
    case "PASSWORDWITHSYMBOLS_64":
      return password(64, true);
    case "USER":
      return randomString(16, ALNUM);
    default: {
      const [kind, size] = command.split("_") as ["BASE64" | "REALBASE64" | "HEX", string];
      const n = Number(size);
      // The catalog encodes N random letters and digits; N random bytes give the same length
      // with more entropy (and decode to N bytes, which is what keys sized this way want).
      if (kind === "BASE64") return randomString(n, ALNUM);
      if (kind === "REALBASE64") return randomBytes(n).toString("base64");
      return randomBytes(n).toString("hex");
    }
  }
}
