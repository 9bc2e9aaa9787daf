import type { DeployPayload } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { checkRendered, waitBoundMs, withExtraLabels } from "./compose.js";

const APP = "0d7f5a1e-2b3c-4d5e-8f90-123456789abc";
const DEP = "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9";

/** The shape control-plane/src/compose/rewrite.ts writes (the e2e test runs the real one). */
function rendered() {
  const labels = { "capstan.managed": "true", "capstan.resource.uuid": APP, "capstan.deployment": DEP };
  return {
    "x-capstan": { project: `capstan-${APP}`, app_uuid: APP, deployment_uuid: DEP, network: "capstan", public_container: `${APP}-web`, containers: [`${APP}-db`, `${APP}-web`] },
    services: {
      [`${APP}-db`]: { image: "postgres:16", container_name: `${APP}-db`, labels, volumes: [{ type: "volume", source: "data", target: "/var/lib/postgresql/data" }], networks: { app: { aliases: ["db"] }, destination: {} } },
      [`${APP}-web`]: { image: "nginx", container_name: `${APP}-web`, labels, volumes: ["/srv/site:/usr/share/nginx/html:ro"], security_opt: ["no-new-privileges:true"], networks: { app: { aliases: ["web"] }, destination: {} } },
    },
    networks: { app: { name: `capstan-${APP}`, labels }, destination: { external: true, name: "capstan" } },
    volumes: { data: { name: `${APP}-data`, labels } },
  };
}

const payload = (compose: string): DeployPayload =>
  ({ deployment_uuid: DEP, app: { uuid: APP, name: "a" }, source: { kind: "compose", compose }, run: { network: "capstan" } }) as unknown as DeployPayload;

const check = (doc: unknown) => checkRendered(JSON.stringify(doc), payload(JSON.stringify(doc)));

describe("checkRendered: the agent runs only the control plane's rewrite", () => {
  it("accepts the rewrite and returns its metadata", () => {
    const { meta, services } = check(rendered());
    expect(meta.public_container).toBe(`${APP}-web`);
    expect(Object.keys(services)).toEqual([`${APP}-db`, `${APP}-web`]);
  });

  const tampered: [string, (d: ReturnType<typeof rendered>) => void, RegExp][] = [
    ["a refused key on a service", (d) => ((d.services[`${APP}-web`] as Record<string, unknown>).privileged = true), /privileged/],
    ["host network", (d) => ((d.services[`${APP}-db`] as Record<string, unknown>).network_mode = "host"), /network_mode/],
    ["seccomp off", (d) => (d.services[`${APP}-web`]!.security_opt = ["seccomp:unconfined"]), /security_opt/],
    ["published ports", (d) => ((d.services[`${APP}-web`] as Record<string, unknown>).ports = ["80:80"]), /ports/],
    ["the docker socket", (d) => (d.services[`${APP}-web`]!.volumes = ["/var/run/docker.sock:/var/run/docker.sock"]), /bind \/var\/run\/docker\.sock/],
    ["a traversing bind", (d) => (d.services[`${APP}-web`]!.volumes = ["/srv/../etc:/x"]), /bind/],
    ["a bind in long syntax", (d) => (d.services[`${APP}-db`]!.volumes = [{ type: "bind", source: "/etc", target: "/x" }]), /mount of/],
    ["another application's labels", (d) => (d.services[`${APP}-db`]!.labels = { ...d.services[`${APP}-db`]!.labels, "capstan.resource.uuid": "other" }), /labels of/],
    ["a service outside the naming scheme", (d) => ((d.services as Record<string, unknown>)["evil"] = d.services[`${APP}-db`]), /service list|service evil/],
    ["an extra network", (d) => ((d.networks as Record<string, unknown>).host = { external: true, name: "host" }), /extra networks/],
    ["another destination", (d) => (d.networks.destination.name = "other"), /destination network/],
    ["an external volume", (d) => ((d.volumes.data as Record<string, unknown>).external = true), /volume data/],
    ["a volume named after another app", (d) => (d.volumes.data.name = "other-data"), /volume data/],
    ["an include", (d) => ((d as Record<string, unknown>).include = ["/etc/x.yml"]), /top-level key include/],
    ["another deployment", (d) => (d["x-capstan"].deployment_uuid = "x"), /deployment/],
  ];
  it.each(tampered)("refuses %s", (_name, tamper, reason) => {
    const d = rendered();
    tamper(d);
    expect(() => check(d)).toThrow(/not the platform's rewrite/);
    expect(() => check(d)).toThrow(reason);
  });

  // Files the control plane would have refused (issue 15): the agent refuses them again.
  it.each(["//etc", "/var//run/docker.sock", "///root/.ssh", "/var/lib//docker", "/var", "/home", "/var/spool/cron/crontabs", "/", "/tmp/x"])(
    "refuses a bind of %j (the shared host-path rule)",
    (source) => {
      const d = rendered();
      d.services[`${APP}-web`]!.volumes = [`${source}:/x`];
      expect(() => check(d)).toThrow(/not the platform's rewrite.*refused by the agent.*system directory/);
    },
  );

  it("refuses a bind source that is not in normal form, and one inside the agent's own state directory", () => {
    const d = rendered();
    d.services[`${APP}-web`]!.volumes = ["/srv/site/:/x"];
    expect(() => check(d)).toThrow(/not in its normal form \(\/srv\/site\)/);
    const own = rendered();
    own.services[`${APP}-web`]!.volumes = ["/srv/agent/compose:/x"];
    const text = JSON.stringify(own);
    expect(() => checkRendered(text, payload(text), ["/srv/agent", "/run/docker.sock"])).toThrow(/lies inside the system directory \/srv\/agent/);
    expect(() => check(own)).not.toThrow();
  });

  it("refuses YAML that is not the rewrite's JSON form", () => {
    const yaml = "services:\n  web:\n    image: nginx\n";
    expect(() => checkRendered(yaml, payload(yaml))).toThrow(/not in the rewritten format/);
  });
});

describe("checkRendered: further networks (shared networks, the proxy network)", () => {
  const withExtra = (runNetworks: string[], tamper: (d: ReturnType<typeof rendered>) => void = () => {}) => {
    const d = rendered();
    (d.networks as Record<string, unknown>).proxy = { external: true, name: "capstan-proxy-net" };
    (d.services[`${APP}-web`]!.networks as Record<string, unknown>).proxy = {};
    tamper(d);
    const text = JSON.stringify(d);
    const p = payload(text);
    (p.run as { networks: string[] }).networks = runNetworks;
    return () => checkRendered(text, p);
  };

  it("accepts an external network the deployment lists in run.networks, joined by some services", () => {
    expect(withExtra(["capstan-proxy-net"])().meta.public_container).toBe(`${APP}-web`);
  });

  it("refuses one the deployment does not list", () => {
    expect(withExtra([])).toThrow(/networks of|extra networks/);
  });

  it("refuses a further network compose would create (not external) or one with more keys", () => {
    expect(withExtra(["capstan-proxy-net"], (d) => ((d.networks as Record<string, unknown>).proxy = { name: "capstan-proxy-net" }))).toThrow(/not the platform's rewrite/);
    expect(withExtra(["capstan-proxy-net"], (d) => ((d.networks as Record<string, unknown>).proxy = { external: true, name: "capstan-proxy-net", driver: "host" }))).toThrow(
      /not the platform's rewrite/,
    );
  });

  it("refuses a service joining a network the file does not declare", () => {
    expect(withExtra(["capstan-proxy-net"], (d) => ((d.services[`${APP}-db`]!.networks as Record<string, unknown>).other = {}))).toThrow(/networks of/);
  });
});

describe("waitBoundMs", () => {
  it("covers the slowest health check's worst case, within bounds", () => {
    expect(waitBoundMs({ a: {} })).toBe(60_000);
    expect(waitBoundMs({ a: { healthcheck: { interval: "2s", timeout: "1s", retries: 10, start_period: "1m" } } })).toBe(60_000 + 3_000 * 11 + 30_000);
    // compose's defaults: 30s interval and timeout, 3 retries
    expect(waitBoundMs({ a: { healthcheck: { test: ["CMD", "true"] } } })).toBe(60_000 * 4 + 30_000);
    expect(waitBoundMs({ a: { healthcheck: { interval: "1h" } } })).toBe(15 * 60_000);
    expect(waitBoundMs({ a: { healthcheck: { disable: true, interval: "1h" } } })).toBe(60_000);
  });
});

describe("withExtraLabels", () => {
  it("adds the agent's labels to every service and volume without overriding the platform's", () => {
    const rendered = JSON.stringify({
      services: { "u-web": { labels: { "capstan.managed": "true", owner: "app" } }, "u-db": {} },
      volumes: { "u-data": { name: "u-data", labels: { "capstan.resource.uuid": "u" } }, "u-tmp": null },
      networks: { app: { name: "capstan-u" }, destination: { name: "capstan", external: true } },
    });
    const out = JSON.parse(withExtraLabels(rendered, { "capstan.test": "1", owner: "ops" }));
    expect(out.services["u-web"].labels).toEqual({ "capstan.test": "1", owner: "app", "capstan.managed": "true" });
    expect(out.services["u-db"].labels).toEqual({ "capstan.test": "1", owner: "ops" });
    expect(out.volumes["u-data"]).toEqual({ name: "u-data", labels: { "capstan.test": "1", owner: "ops", "capstan.resource.uuid": "u" } });
    expect(out.volumes["u-tmp"].labels).toEqual({ "capstan.test": "1", owner: "ops" });
    expect(out.networks.app).toEqual({ name: "capstan-u", labels: { "capstan.test": "1", owner: "ops" } });
    expect(out.networks.destination).toEqual({ name: "capstan", external: true });
    expect(withExtraLabels(rendered, {})).toBe(rendered);
  });
});
