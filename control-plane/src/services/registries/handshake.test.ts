import { describe, expect, it } from "vitest";
import { parseChallenge, v2Base } from "./handshake.js";

describe("WWW-Authenticate challenges", () => {
  it("reads the scheme and the quoted and bare parameters of Basic and Bearer challenges", () => {
    expect(parseChallenge('Basic realm="Registry Realm"')).toEqual({ scheme: "basic", params: { realm: "Registry Realm" } });
    expect(parseChallenge('Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull"')).toEqual({
      scheme: "bearer",
      params: { realm: "https://auth.docker.io/token", service: "registry.docker.io", scope: "repository:a/b:pull" },
    });
    expect(parseChallenge("Bearer realm=https://auth.example/token, service=reg")).toEqual({ scheme: "bearer", params: { realm: "https://auth.example/token", service: "reg" } });
    expect(parseChallenge('Bearer realm="a\\"b"')?.params.realm).toBe('a"b');
  });

  it("has nothing to read in an absent or empty header", () => {
    expect(parseChallenge(null)).toBeNull();
    expect(parseChallenge("")).toBeNull();
  });
});

describe("the V2 base of a registry URL", () => {
  it("sends the hub's names to registry-1.docker.io and keeps every other origin", () => {
    expect(v2Base("https://docker.io")).toBe("https://registry-1.docker.io");
    expect(v2Base("https://index.docker.io")).toBe("https://registry-1.docker.io");
    expect(v2Base("http://10.0.0.5:5000")).toBe("http://10.0.0.5:5000");
    expect(v2Base("https://ghcr.io")).toBe("https://ghcr.io");
  });
});
