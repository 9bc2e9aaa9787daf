import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.js";

const base = { PLATFORM_DATA_DIR: "/tmp/capstan-config-test" };
const load = (env: Record<string, string>) => loadConfig({ ...base, ...env });
const refusal = (env: Record<string, string>): string => {
  try {
    load(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
};

describe("network settings (docs/networks.md)", () => {
  it("defaults: management off, environment mode, no proxy isolation, no overlay encryption, 200 networks", () => {
    expect(load({}).network).toEqual({ management: false, isolation: "environment", proxyIsolation: false, overlayEncryption: false, maxNetworks: 200 });
  });

  it("reads every setting", () => {
    const c = load({
      PLATFORM_NETWORK_MANAGEMENT: "true",
      PLATFORM_NETWORK_ISOLATION_MODE: "none",
      PLATFORM_PROXY_ISOLATION: "1",
      PLATFORM_OVERLAY_ENCRYPTION: "yes",
      PLATFORM_MAX_NETWORKS: "7",
    });
    expect(c.network).toEqual({ management: true, isolation: "none", proxyIsolation: true, overlayEncryption: true, maxNetworks: 7 });
  });

  it("strict mode turns proxy isolation on when PLATFORM_PROXY_ISOLATION is not set", () => {
    const c = load({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "strict" });
    expect(c.network.isolation).toBe("strict");
    expect(c.network.proxyIsolation).toBe(true);
    expect(load({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "strict", PLATFORM_PROXY_ISOLATION: "true" }).network.proxyIsolation).toBe(true);
  });

  it("refuses strict mode with PLATFORM_PROXY_ISOLATION=false (a contradiction)", () => {
    expect(refusal({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_NETWORK_ISOLATION_MODE: "strict", PLATFORM_PROXY_ISOLATION: "false" })).toMatch(
      /PLATFORM_PROXY_ISOLATION=false contradicts PLATFORM_NETWORK_ISOLATION_MODE=strict/,
    );
  });

  it("refuses isolation settings that would do nothing without network management", () => {
    expect(refusal({ PLATFORM_NETWORK_ISOLATION_MODE: "strict" })).toMatch(/strict needs PLATFORM_NETWORK_MANAGEMENT=true/);
    expect(refusal({ PLATFORM_PROXY_ISOLATION: "true" })).toMatch(/PLATFORM_PROXY_ISOLATION=true needs PLATFORM_NETWORK_MANAGEMENT=true/);
    // Not isolating: fine either way.
    expect(load({ PLATFORM_NETWORK_ISOLATION_MODE: "none", PLATFORM_PROXY_ISOLATION: "false" }).network.management).toBe(false);
  });

  it("refuses PLATFORM_OVERLAY_ENCRYPTION=true without network management (no overlay would be created to encrypt)", () => {
    const off: Record<string, string>[] = [{}, { PLATFORM_NETWORK_MANAGEMENT: "false" }];
    for (const unset of off) {
      expect(refusal({ ...unset, PLATFORM_OVERLAY_ENCRYPTION: "true" })).toMatch(
        /PLATFORM_OVERLAY_ENCRYPTION=true needs PLATFORM_NETWORK_MANAGEMENT=true \(without it the platform creates no overlay network to encrypt\)/,
      );
    }
    // Every problem is named at once.
    const both = refusal({ PLATFORM_PROXY_ISOLATION: "true", PLATFORM_OVERLAY_ENCRYPTION: "yes" });
    expect(both).toMatch(/PLATFORM_PROXY_ISOLATION=true needs/);
    expect(both).toMatch(/PLATFORM_OVERLAY_ENCRYPTION=true needs/);
    // Off is fine without management; on is fine with it.
    expect(load({ PLATFORM_OVERLAY_ENCRYPTION: "false" }).network.overlayEncryption).toBe(false);
    expect(load({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_OVERLAY_ENCRYPTION: "true" }).network.overlayEncryption).toBe(true);
  });

  it("refuses bad values with the variable's name and what it takes", () => {
    expect(refusal({ PLATFORM_NETWORK_ISOLATION_MODE: "per-team" })).toMatch(/PLATFORM_NETWORK_ISOLATION_MODE: must be none, environment or strict/);
    expect(refusal({ PLATFORM_NETWORK_MANAGEMENT: "on" })).toMatch(/PLATFORM_NETWORK_MANAGEMENT/);
    expect(refusal({ PLATFORM_PROXY_ISOLATION: "maybe" })).toMatch(/PLATFORM_PROXY_ISOLATION/);
    expect(refusal({ PLATFORM_OVERLAY_ENCRYPTION: "2" })).toMatch(/PLATFORM_OVERLAY_ENCRYPTION/);
    expect(refusal({ PLATFORM_MAX_NETWORKS: "0" })).toMatch(/PLATFORM_MAX_NETWORKS: must be at least 1/);
    expect(refusal({ PLATFORM_MAX_NETWORKS: "2.5" })).toMatch(/PLATFORM_MAX_NETWORKS: must be a whole number/);
    expect(refusal({ PLATFORM_MAX_NETWORKS: "many" })).toMatch(/PLATFORM_MAX_NETWORKS: must be a whole number/);
    expect(refusal({ PLATFORM_MAX_NETWORKS: "1000000" })).toMatch(/PLATFORM_MAX_NETWORKS: must be at most 100000/);
  });
});

describe("PLATFORM_DEFAULT_TEAM_FEATURES (docs/features.md)", () => {
  it("defaults to no feature", () => {
    expect(load({}).defaultTeamFeatures).toEqual([]);
  });

  it("reads a comma-separated list of known names, in the canonical order, blanks ignored", () => {
    expect(load({ PLATFORM_DEFAULT_TEAM_FEATURES: " DNS_ENV_BINDINGS, REGISTRY_MANAGEMENT,," }).defaultTeamFeatures).toEqual(["REGISTRY_MANAGEMENT", "DNS_ENV_BINDINGS"]);
  });

  it.each(["GOLD", "dns_multi_domain", "REGISTRY_MANAGEMENT,NOPE", "*"])("refuses %j at start-up, naming the unknown feature and the known ones", (value) => {
    const message = refusal({ PLATFORM_DEFAULT_TEAM_FEATURES: value });
    expect(message).toMatch(/PLATFORM_DEFAULT_TEAM_FEATURES: unknown feature\(s\) /);
    expect(message).toContain("REGISTRY_MANAGEMENT, CLUSTER_MANAGEMENT, DNS_PROVIDER_MANAGEMENT, DNS_MULTI_DOMAIN, DNS_ENV_BINDINGS, PROXY_LABEL_OVERRIDES");
  });
});

describe("PLATFORM_TEMPLATE_IMAGE_OVERRIDES (docs/templates.md)", () => {
  it("defaults to no override", () => {
    expect(load({}).templateImageOverrides).toEqual({});
    expect(load({ PLATFORM_TEMPLATE_IMAGE_OVERRIDES: " " }).templateImageOverrides).toEqual({});
  });

  it("reads a JSON object of image reference to image reference", () => {
    const map = { "postgres:16-alpine": "registry.local:5000/postgres:16-alpine", "ghcr.io/umami-software/umami": "capstan-test/umami:1" };
    expect(load({ PLATFORM_TEMPLATE_IMAGE_OVERRIDES: JSON.stringify(map) }).templateImageOverrides).toEqual(map);
  });

  it.each(["postgres", "[]", '{"postgres:16": 5}', '{"postgres:16": "Bad Image"}', '{"-x": "postgres:16"}', '{"postgres:16": " postgres:17"}'])("refuses %s at start-up", (value) => {
    expect(refusal({ PLATFORM_TEMPLATE_IMAGE_OVERRIDES: value })).toMatch(/PLATFORM_TEMPLATE_IMAGE_OVERRIDES: must be a JSON object/);
  });
});

describe("PLATFORM_SERVICE_WILDCARD_DOMAIN (docs/services.md, generated domains)", () => {
  it("is unset by default", () => {
    expect(load({}).serviceWildcardDomain).toBeNull();
    expect(load({ PLATFORM_SERVICE_WILDCARD_DOMAIN: " " }).serviceWildcardDomain).toBeNull();
  });

  it.each([
    ["apps.example.com", { host: "apps.example.com", https: true }],
    ["https://Apps.Example.com/", { host: "apps.example.com", https: true }],
    ["http://apps.example.com", { host: "apps.example.com", https: false }],
    ["*.apps.example.com", { host: "apps.example.com", https: true }],
  ])("reads %s", (value, want) => {
    expect(load({ PLATFORM_SERVICE_WILDCARD_DOMAIN: value }).serviceWildcardDomain).toEqual(want);
  });

  it.each(["example", "apps.example.com:8443", "https://apps.example.com/path", "203.0.113.7", "ftp://apps.example.com", "-bad.example.com", "a b.example.com"])("refuses %s at start-up", (value) => {
    expect(refusal({ PLATFORM_SERVICE_WILDCARD_DOMAIN: value })).toMatch(/PLATFORM_SERVICE_WILDCARD_DOMAIN: must be a domain name/);
  });
});
