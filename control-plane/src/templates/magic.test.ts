import { describe, expect, it } from "vitest";
import { SYMBOLS, generate, magicVariable, randomString, serviceKey } from "./magic.js";

describe("magicVariable: the catalog's SERVICE_* names", () => {
  it.each([
    ["SERVICE_PASSWORD_POSTGRES", "PASSWORD"],
    ["SERVICE_PASSWORD_64_UMAMI", "PASSWORD_64"],
    ["SERVICE_PASSWORDWITHSYMBOLS_APP", "PASSWORDWITHSYMBOLS"],
    ["SERVICE_PASSWORDWITHSYMBOLS_64_APP", "PASSWORDWITHSYMBOLS_64"],
    ["SERVICE_PASSWORD_WITHSYMBOLS_APP", "PASSWORDWITHSYMBOLS"],
    ["SERVICE_PASSWORD_WITHSYMBOLS_64_APP", "PASSWORDWITHSYMBOLS_64"],
    ["SERVICE_USER_POSTGRES", "USER"],
    ["SERVICE_BASE64_APP", "BASE64_32"],
    ["SERVICE_BASE64_32_APP", "BASE64_32"],
    ["SERVICE_BASE64_64_APP", "BASE64_64"],
    ["SERVICE_BASE64_128_APP", "BASE64_128"],
    ["SERVICE_REALBASE64_APP", "REALBASE64_32"],
    ["SERVICE_REALBASE64_64_APP", "REALBASE64_64"],
    ["SERVICE_REALBASE64_128_APP", "REALBASE64_128"],
    ["SERVICE_HEX_32_APP", "HEX_32"],
    ["SERVICE_HEX_64_APP", "HEX_64"],
    ["SERVICE_HEX_128_APP", "HEX_128"],
    // IDs with underscores (the catalog's parser cannot have them; Capstan reads the ID to the end)
    ["SERVICE_PASSWORD_MY_DB", "PASSWORD"],
    // A size alone is an ID, as in the catalog (SERVICE_PASSWORD_64 is a 32-character password named 64)
    ["SERVICE_PASSWORD_64", "PASSWORD"],
  ])("%s generates %s", (name, command) => {
    expect(magicVariable(name)).toEqual({ kind: "generated", name, command });
  });

  it.each([
    ["SERVICE_FQDN_APP", "fqdn", "APP", null],
    ["SERVICE_URL_APP", "url", "APP", null],
    ["SERVICE_URL_APP_3000", "url", "APP", 3000],
    ["SERVICE_FQDN_MY_API_8080", "fqdn", "MY_API", 8080],
    ["SERVICE_URL_N8N_5678", "url", "N8N", 5678],
    ["SERVICE_URL_n8n", "url", "n8n", null],
  ])("%s is the %s of %s (port %s)", (name, form, service, port) => {
    expect(magicVariable(name)).toEqual({ kind: "domain", name, form, service, port });
  });

  it("SERVICE_FQDN_<PORT> / SERVICE_URL_<PORT> (the catalog's older form) name no service: the one using them", () => {
    expect(magicVariable("SERVICE_FQDN_3001")).toEqual({ kind: "domain", name: "SERVICE_FQDN_3001", form: "fqdn", service: null, port: 3001 });
    expect(magicVariable("SERVICE_URL_80")).toEqual({ kind: "domain", name: "SERVICE_URL_80", form: "url", service: null, port: 80 });
  });

  it("names outside SERVICE_ are not magic; SERVICE_ names it cannot fill are unknown", () => {
    expect(magicVariable("POSTGRES_PASSWORD")).toBeNull();
    expect(magicVariable("MY_SERVICE_PASSWORD_X")).toBeNull();
    for (const name of ["SERVICE_HEX_APP", "SERVICE_HEX_16_APP", "SERVICE_SUPABASEANON_KONG", "SERVICE_PASSWORD", "SERVICE_NAME", "SERVICE_URL_APP_70000", "SERVICE_URL_APP_0"]) {
      expect(magicVariable(name), name).toBe("unknown");
    }
  });

  it("service keys compare lowercase with - _ . as one character", () => {
    expect(serviceKey("MY_APP")).toBe(serviceKey("my-app"));
    expect(serviceKey("MY_APP")).toBe(serviceKey("my.app"));
    expect(serviceKey("MYAPP")).not.toBe(serviceKey("my-app"));
  });
});

describe("generate: lengths and alphabets of the catalog, from the CSPRNG", () => {
  const alnum = /^[A-Za-z0-9]+$/;
  const classes = (v: string) => [/[a-z]/, /[A-Z]/, /[0-9]/].every((re) => re.test(v));

  it("passwords: 32 or 64 letters and digits, every class present", () => {
    for (let i = 0; i < 50; i++) {
      const p = generate("PASSWORD");
      expect(p).toMatch(alnum);
      expect(p).toHaveLength(32);
      expect(classes(p)).toBe(true);
    }
    expect(generate("PASSWORD_64")).toHaveLength(64);
  });

  it("passwords with symbols: the catalog's symbol set, at least one symbol", () => {
    for (let i = 0; i < 50; i++) {
      const p = generate("PASSWORDWITHSYMBOLS");
      expect(p).toHaveLength(32);
      expect(classes(p)).toBe(true);
      expect([...p].some((c) => SYMBOLS.includes(c))).toBe(true);
      expect([...p].every((c) => /[A-Za-z0-9]/.test(c) || SYMBOLS.includes(c))).toBe(true);
    }
    expect(generate("PASSWORDWITHSYMBOLS_64")).toHaveLength(64);
  });

  it("users: 16 letters and digits; BASE64_N: N letters and digits (the catalog's name, not base64)", () => {
    expect(generate("USER")).toMatch(/^[A-Za-z0-9]{16}$/);
    expect(generate("BASE64_32")).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(generate("BASE64_64")).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(generate("BASE64_128")).toMatch(/^[A-Za-z0-9]{128}$/);
  });

  it("REALBASE64_N: base64 of N random bytes; HEX_N: 2N hex digits", () => {
    for (const n of [32, 64, 128] as const) {
      const b = generate(`REALBASE64_${n}`);
      expect(Buffer.from(b, "base64")).toHaveLength(n);
      expect(Buffer.from(b, "base64").toString("base64")).toBe(b);
      expect(generate(`HEX_${n}`)).toMatch(new RegExp(`^[0-9a-f]{${2 * n}}$`));
    }
  });

  it("never repeats (random, not derived)", () => {
    const seen = new Set(Array.from({ length: 200 }, () => generate("USER")));
    expect(seen.size).toBe(200);
  });

  it("randomString draws every character of the alphabet (no modulo bias that skips any)", () => {
    const s = randomString(20_000, "abc");
    for (const c of "abc") expect(s.split(c).length - 1).toBeGreaterThan(6000);
    expect(s).toMatch(/^[abc]+$/);
  });
});
