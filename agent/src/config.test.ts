import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "./config.js";

const base = { CAPSTAN_URL: "https://cp.example.com/", CAPSTAN_AGENT_TOKEN: "cap_abcdefghijklmnop0123456789" };

describe("loadConfig", () => {
  it("applies defaults", () => {
    expect(loadConfig(base)).toEqual({
      url: "https://cp.example.com",
      token: base.CAPSTAN_AGENT_TOKEN,
      stateDir: "/var/lib/capstan-agent",
      dockerSocket: "/var/run/docker.sock",
      logLevel: "info",
      extraLabels: {},
    });
  });

  it("takes extra labels for everything the agent creates, but never the platform's own", () => {
    expect(loadConfig({ ...base, CAPSTAN_AGENT_LABELS: "capstan.test=1, owner=ops" }).extraLabels).toEqual({ "capstan.test": "1", owner: "ops" });
    expect(() => loadConfig({ ...base, CAPSTAN_AGENT_LABELS: "capstan.managed=false" })).toThrow(/platform's own labels/);
    expect(() => loadConfig({ ...base, CAPSTAN_AGENT_LABELS: "Bad Key=1" })).toThrow(/key=value/);
  });

  it("takes every variable, empty ones meaning unset", () => {
    const c = loadConfig({ ...base, CAPSTAN_AGENT_STATE_DIR: "/srv/agent", DOCKER_SOCKET: "unix:///run/docker.sock", CAPSTAN_AGENT_LOG_LEVEL: "debug" });
    expect(c).toMatchObject({ stateDir: "/srv/agent", dockerSocket: "/run/docker.sock", logLevel: "debug" });
    expect(loadConfig({ ...base, CAPSTAN_AGENT_LOG_LEVEL: "" }).logLevel).toBe("info");
  });

  it("reads the engine's socket from DOCKER_SOCKET, else from Docker's own DOCKER_HOST (unix:// only)", () => {
    expect(loadConfig(base).dockerSocket).toBe("/var/run/docker.sock");
    expect(loadConfig({ ...base, DOCKER_HOST: "unix:///run/user/1000/docker.sock" }).dockerSocket).toBe("/run/user/1000/docker.sock");
    expect(loadConfig({ ...base, DOCKER_SOCKET: "/srv/d.sock", DOCKER_HOST: "tcp://10.0.0.1:2375" }).dockerSocket).toBe("/srv/d.sock");
    expect(() => loadConfig({ ...base, DOCKER_HOST: "tcp://10.0.0.1:2375" })).toThrow(/DOCKER_HOST: must be unix:\/\/\/path/);
  });

  it("lists every bad variable in one clear error", () => {
    let err: unknown;
    try {
      loadConfig({ CAPSTAN_URL: "ftp://x", CAPSTAN_AGENT_TOKEN: "has space in it 123456", DOCKER_SOCKET: "relative.sock", CAPSTAN_AGENT_LOG_LEVEL: "loud" });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const msg = (err as Error).message;
    for (const v of ["CAPSTAN_URL", "CAPSTAN_AGENT_TOKEN", "DOCKER_SOCKET", "CAPSTAN_AGENT_LOG_LEVEL"]) expect(msg).toContain(v);
    expect(msg).not.toContain("has space"); // the token is never echoed
  });

  it.each(["https://user:pw@cp.example.com", "https://cp.example.com/?x=1", "cp.example.com", "https://cp.example.com/#frag"])("rejects %s", (url) => {
    expect(() => loadConfig({ ...base, CAPSTAN_URL: url })).toThrow(/CAPSTAN_URL/);
  });

  it("requires URL and token", () => {
    expect(() => loadConfig({})).toThrow(/CAPSTAN_URL: is required[\s\S]*CAPSTAN_AGENT_TOKEN: is required/);
  });

  // resource restores (w7/restore)
  it("takes the helper image of volume restores, checked as an image reference", () => {
    expect(loadConfig({ ...base, CAPSTAN_AGENT_HELPER_IMAGE: "capstan/agent:1.2.3" }).helperImage).toBe("capstan/agent:1.2.3");
    expect(loadConfig({ ...base, CAPSTAN_AGENT_HELPER_IMAGE: "" }).helperImage).toBeUndefined();
    expect(() => loadConfig({ ...base, CAPSTAN_AGENT_HELPER_IMAGE: "bad image; rm -rf /" })).toThrow(/CAPSTAN_AGENT_HELPER_IMAGE/);
  });
});
