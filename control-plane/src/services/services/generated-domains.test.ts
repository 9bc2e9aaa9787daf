import { describe, expect, it } from "vitest";
import { generatedFqdn, generatedLabel, generationBase, isLocalName, sslipLabel, sslipSuffix } from "./generated-domains.js";

const UUID = "3f2a9c1e-77b0-4d2e-9a55-0c1d2e3f4a5b";

describe("generated domains of service applications (docs/services.md)", () => {
  it("take the first base that applies: a managed domain, the instance's wildcard, sslip.io", () => {
    const common = { serverIp: "203.0.113.7", publicUrl: "https://capstan.example.com" };
    expect(generationBase({ ...common, managedDomain: "apps.example.com", wildcard: { host: "svc.example.org", https: false } })).toEqual({
      suffix: "apps.example.com",
      https: true,
      source: "managed_domain",
    });
    expect(generationBase({ ...common, managedDomain: null, wildcard: { host: "svc.example.org", https: false } })).toEqual({ suffix: "svc.example.org", https: false, source: "instance_wildcard" });
    expect(generationBase({ ...common, managedDomain: null, wildcard: null })).toEqual({ suffix: "203.0.113.7.sslip.io", https: false, source: "sslip" });
  });

  it("give a server added by a DNS name none (nothing says the name has a wildcard), unless a managed domain or the instance's wildcard applies", () => {
    const named = { serverIp: "srv1.example.com", publicUrl: "http://198.51.100.4:8000", managedDomain: null };
    expect(generationBase({ ...named, wildcard: null })).toBeNull();
    expect(generationBase({ ...named, wildcard: { host: "svc.example.org", https: true } })?.source).toBe("instance_wildcard");
    expect(generationBase({ ...named, managedDomain: "apps.example.com", wildcard: null })?.source).toBe("managed_domain");
  });

  it("read a server at a local name as the control plane's machine: PLATFORM_PUBLIC_URL's IP, else 127.0.0.1", () => {
    expect(["localhost", "LOCALHOST.", "box.localhost", "host.docker.internal"].every(isLocalName)).toBe(true);
    expect(["localhost.example.com", "127.0.0.1", "docker.internal"].some(isLocalName)).toBe(false);
    expect(sslipSuffix("localhost", "http://198.51.100.4:8000")).toBe("198.51.100.4.sslip.io");
    expect(sslipSuffix("host.docker.internal", "http://[2001:db8::1]:8000")).toBe("2001-db8--1.sslip.io");
    expect(sslipSuffix("localhost", "https://capstan.example.com")).toBe("127.0.0.1.sslip.io");
    expect(sslipSuffix("127.0.0.1", "https://capstan.example.com")).toBe("127.0.0.1.sslip.io");
  });

  it("write IPv6 addresses in sslip.io's dashed form, never starting or ending a label with a dash", () => {
    expect(sslipLabel("2a01:4f8:c17:b8f::2")).toBe("2a01-4f8-c17-b8f--2");
    expect(sslipLabel("::1")).toBe("0--1");
    expect(sslipLabel("fe80::")).toBe("fe80--0");
    expect(sslipLabel("not-an-ip")).toBeNull();
    expect(sslipLabel("::ffff:1.2.3.4")).toBeNull();
  });

  it("name the component and the service's short id in one DNS label", () => {
    expect(generatedLabel("pgadmin", UUID)).toBe("pgadmin-3f2a9c1e");
    expect(generatedLabel("My_App.web", UUID)).toBe("my-app-web-3f2a9c1e");
    expect(generatedLabel("__", UUID)).toBe("app-3f2a9c1e");
    const long = generatedLabel("x".repeat(80), UUID);
    expect(long.length).toBeLessThanOrEqual(63);
    expect(long).toMatch(/^x+-3f2a9c1e$/);
  });

  it("give the fqdn the base's scheme and the path the template asks for", () => {
    const sslip = { suffix: "203.0.113.7.sslip.io", https: false, source: "sslip" as const };
    expect(generatedFqdn(sslip, "web", UUID, null)).toBe("http://web-3f2a9c1e.203.0.113.7.sslip.io");
    expect(generatedFqdn({ suffix: "apps.example.com", https: true, source: "managed_domain" }, "api", UUID, "/api/")).toBe("https://api-3f2a9c1e.apps.example.com/api");
    expect(generatedFqdn(sslip, "web", UUID, "/")).toBe("http://web-3f2a9c1e.203.0.113.7.sslip.io");
  });
});
