import { randomBytes } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ProxySettings } from "@capstan/shared";
import { DockerodeEngine } from "../../agent/src/docker/dockerode-engine.js";
import { resyncProxy, syncProxy, type ProxyOptions } from "../../agent/src/proxy/index.js";
import { repo, sh, until } from "./support/kit.js";

/**
 * The reverse proxy on the real local engine: busybox httpd "applications" labelled the way the
 * agent labels deployed containers, a real Caddy (capstan-test/caddy) configured by syncProxy,
 * and HTTP through the published ports on loopback.
 */
const RUN = randomBytes(4).toString("hex");
const NET = `capstan-test-proxy-${RUN}`;
const NET2 = `capstan-test-proxy2-${RUN}`;
const PROXY = `capstan-test-proxy-${RUN}`;
const VOLUME = `capstan-test-proxy-data-${RUN}`;
const HTTP_PORT = 18180;
const HTTPS_PORT = 18543;
const BUSYBOX = "capstan-test/busybox:latest";

const engine = new DockerodeEngine();
const settings: ProxySettings = { name: PROXY, image: "capstan-test/caddy:latest", networks: [NET], ensure_networks: [], http_port: HTTP_PORT, https_port: HTTPS_PORT };
const opts: ProxyOptions = {
  volume: VOLUME,
  labels: { "capstan.test": "1" },
  // Only this file's containers: other suites may run managed containers on the same engine.
  select: { "capstan.test.run": RUN },
  hostIp: "127.0.0.1",
};
const lines: string[] = [];
const ctx = () => ({ signal: AbortSignal.timeout(120_000), progress: (l: string) => void lines.push(l) });
const sync = (s: ProxySettings = settings) => syncProxy(engine, s, ctx(), opts);
const containers: string[] = [];
let certificate: string | undefined;

interface Reply {
  status: number;
  body: string;
  headers: http.IncomingHttpHeaders;
  /** SHA-256 fingerprint of the server certificate (https only). */
  cert?: string;
}

/** One request to the proxy on loopback with the given Host header (and SNI for https). */
function get(host: string, path = "/", secure = false): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const mod = secure ? https : http;
    const req = mod.request(
      {
        host: "127.0.0.1",
        port: secure ? HTTPS_PORT : HTTP_PORT,
        path,
        headers: { Host: host },
        ...(secure ? { servername: host, rejectUnauthorized: false } : {}),
        timeout: 10_000,
      },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        const cert = secure ? (res.socket as import("node:tls").TLSSocket).getPeerCertificate().fingerprint256 : undefined;
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, cert }));
      },
    );
    req.on("timeout", () => req.destroy(new Error(`request for ${host}${path} timed out`)));
    req.on("error", reject);
    req.end();
  });
}

/** A busybox httpd answering `text` on :8080, labelled as a deployed application container. */
async function startApp(name: string, o: { resource: string; text: string; rollout: number; routes: object[]; health?: "pass" | "fail" }): Promise<void> {
  const labels = {
    "capstan.test": "1",
    "capstan.test.run": RUN,
    "capstan.managed": "true",
    "capstan.resource.type": "application",
    "capstan.resource.uuid": o.resource,
    "capstan.rollout": String(o.rollout),
    "capstan.proxy.port": "8080",
    "capstan.proxy.network": NET,
    "capstan.proxy.routes": JSON.stringify(o.routes),
  };
  const health = o.health
    ? ["--health-cmd", o.health === "pass" ? "true" : "false", "--health-interval", "1s", "--health-retries", "2", "--health-start-period", "0s"]
    : [];
  const args = ["run", "-d", "--name", name, "--network", NET, ...Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]), ...health];
  args.push(BUSYBOX, "sh", "-c", 'mkdir -p /www && echo "$0" > /www/index.html && exec httpd -f -p 8080 -h /www', o.text);
  await sh("docker", args);
  containers.push(name);
}

const health = (name: string) => sh("docker", ["inspect", "-f", "{{.State.Health.Status}}", name]);
const name = (s: string) => `capstan-test-app-${s}-${RUN}`;

beforeAll(async () => {
  await sh("bash", [join(repo, "test/kit/images.sh"), "busybox", "caddy"]);
  for (const n of [NET, NET2]) await sh("docker", ["network", "create", "--label", "capstan.test=1", n]);
  await startApp(name("one"), { resource: "res-one", text: "one v1", rollout: 100, routes: [{ host: "one.capstan.test", https: false, path: "/" }] });
  await startApp(name("two"), { resource: "res-two", text: "two", rollout: 100, routes: [{ host: "two.capstan.test", https: false, path: "/" }] });
  await startApp(name("sec"), { resource: "res-sec", text: "secure", rollout: 100, routes: [{ host: "secure.localhost", https: true, path: "/" }] });
});

afterAll(async () => {
  for (const c of [...containers, PROXY]) await sh("docker", ["rm", "-f", c]).catch(() => {});
  await sh("docker", ["volume", "rm", "-f", VOLUME]).catch(() => {});
  for (const n of [NET, NET2]) await sh("docker", ["network", "rm", n]).catch(() => {});
});

describe("syncProxy on a real engine", () => {
  it("creates the proxy and routes each Host header to its application", async () => {
    const first = await sync();
    expect(first).toMatchObject({ routes: 3, reloaded: true, warnings: [] });
    const inspect = JSON.parse(await sh("docker", ["inspect", PROXY]))[0];
    expect(inspect.Config.Labels).toMatchObject({ "capstan.managed": "true", "capstan.component": "proxy", "capstan.test": "1" });
    expect(inspect.HostConfig.RestartPolicy.Name).toBe("unless-stopped");
    expect(inspect.HostConfig.PortBindings["80/tcp"]).toEqual([{ HostIp: "127.0.0.1", HostPort: String(HTTP_PORT) }]);
    expect(inspect.Mounts).toEqual([expect.objectContaining({ Type: "volume", Name: VOLUME, Destination: "/data" })]);
    expect(inspect.HostConfig.Binds ?? []).toEqual([]); // no Docker socket, no host paths

    expect(await get("one.capstan.test")).toMatchObject({ status: 200, body: "one v1\n" });
    expect(await get("two.capstan.test")).toMatchObject({ status: 200, body: "two\n" });
  });

  it("answers 404 at once for a host with no application", async () => {
    const t0 = Date.now();
    expect((await get("nobody.capstan.test")).status).toBe(404);
    expect(Date.now() - t0).toBeLessThan(2_000);
  });

  it("does not reload an unchanged config", async () => {
    expect(await sync()).toMatchObject({ routes: 3, reloaded: false });
  });

  it("serializes concurrent syncs", async () => {
    const results = await Promise.all([sync(), sync(), sync()]);
    expect(results.map((r) => r.routes)).toEqual([3, 3, 3]);
    expect(results.filter((r) => r.reloaded)).toEqual([]);
  });

  it("serves https routes with a certificate and redirects their plain HTTP to the published HTTPS port", async () => {
    const redirect = await get("secure.localhost", "/page?x=1");
    expect(redirect.status).toBe(308);
    expect(redirect.headers.location).toBe(`https://secure.localhost:${HTTPS_PORT}/page?x=1`);
    // Caddy's internal CA signs localhost names; the first handshake may wait for issuance.
    const res = await until("https answer", async () => get("secure.localhost", "/", true), 30_000, 500);
    expect(res).toMatchObject({ status: 200, body: "secure\n" });
    certificate = res.cert;
    expect(certificate).toMatch(/^[0-9A-F:]{95}$/);
    // An http-only name is never redirected.
    expect((await get("two.capstan.test")).status).toBe(200);
  });

  it("keeps traffic on the old container while a newer one is starting or unhealthy", async () => {
    await startApp(name("one-bad"), { resource: "res-one", text: "one broken", rollout: 200, routes: [{ host: "one.capstan.test", https: false, path: "/" }], health: "fail" });
    expect(await health(name("one-bad"))).toBe("starting");
    await sync();
    expect((await get("one.capstan.test")).body).toBe("one v1\n");
    await until("unhealthy", async () => (await health(name("one-bad"))) === "unhealthy", 30_000, 250);
    await sync();
    expect((await get("one.capstan.test")).body).toBe("one v1\n");
  });

  it("switches to a newer container once it is healthy", async () => {
    await startApp(name("one-v2"), { resource: "res-one", text: "one v2", rollout: 300, routes: [{ host: "one.capstan.test", https: false, path: "/" }], health: "pass" });
    await until("healthy", async () => (await health(name("one-v2"))) === "healthy", 30_000, 250);
    expect(await sync()).toMatchObject({ reloaded: true });
    expect((await get("one.capstan.test")).body).toBe("one v2\n");
  });

  it("keeps the admin API out of reach of application containers", async () => {
    const app = name("two");
    const proxyIp = (await sh("docker", ["inspect", "-f", `{{(index .NetworkSettings.Networks "${NET}").IPAddress}}`, PROXY])).trim();
    expect(proxyIp).toMatch(/^\d+\.\d+\.\d+\.\d+$/);
    // Control: from this container the proxy itself is reachable on its network, by name and IP.
    for (const target of [PROXY, proxyIp]) {
      const viaProxy = await sh("docker", ["exec", app, "timeout", "5", "wget", "-q", "-O-", "--header", "Host: one.capstan.test", `http://${target}:80/`]);
      expect(viaProxy).toBe("one v2");
    }
    // The admin API: nothing listens on 2019 outside the proxy's loopback.
    for (const url of [`http://${PROXY}:2019/config/`, `http://${proxyIp}:2019/config/`, `http://${proxyIp}:2019/load`]) {
      const attempt = await sh("docker", ["exec", app, "sh", "-c", 'timeout 5 wget -q -O- "$0"; echo "exit=$?"', url]);
      expect(attempt).toMatch(/exit=[1-9]/);
      expect(attempt).not.toContain("apps");
    }
    // Nor through the proxy's own routes with an admin-looking Host.
    expect((await get("localhost:2019", "/config/")).status).toBe(404);
    expect((await get("127.0.0.1:2019", "/config/")).status).toBe(404);
  });

  it("joins networks added on later syncs", async () => {
    await sync({ ...settings, networks: [NET, NET2] });
    const nets = await sh("docker", ["inspect", "-f", "{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}", PROXY]);
    expect(nets.split(" ").filter(Boolean).sort()).toEqual([NET, NET2].sort());
  });

  it("keeps its config across a proxy restart, and resyncProxy re-renders from the proxy's own settings", async () => {
    await sh("docker", ["restart", "-t", "5", PROXY]);
    await until("route after restart", async () => (await get("two.capstan.test")).status === 200, 30_000, 250);
    const again = await resyncProxy(engine, ctx(), { ...opts, name: PROXY });
    expect(again).toMatchObject({ routes: 3, reloaded: false });
  });

  it("answers 502 quickly for a stopped upstream, and drops a removed container's route on the next sync", async () => {
    await sh("docker", ["stop", "-t", "1", name("two")]);
    const t0 = Date.now();
    expect((await get("two.capstan.test")).status).toBe(502);
    expect(Date.now() - t0).toBeLessThan(7_000);
    await sh("docker", ["rm", "-f", name("two")]);
    expect(await sync()).toMatchObject({ routes: 2, reloaded: true });
    expect((await get("two.capstan.test")).status).toBe(404);
    expect((await get("one.capstan.test")).body).toBe("one v2\n");
  });

  it("replaces the proxy when its ports change, keeping the certificate volume", async () => {
    const before = await sh("docker", ["inspect", "-f", "{{.Id}}", PROXY]);
    const moved = { ...settings, networks: [NET, NET2], http_port: HTTP_PORT + 1 };
    expect(await sync(moved)).toMatchObject({ reloaded: true });
    expect(await sh("docker", ["inspect", "-f", "{{.Id}}", PROXY])).not.toBe(before);
    const res = await new Promise<number>((resolve, reject) =>
      http.get({ host: "127.0.0.1", port: HTTP_PORT + 1, headers: { Host: "one.capstan.test" }, timeout: 10_000 }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      }).on("error", reject),
    );
    expect(res).toBe(200);
    await sync({ ...settings, networks: [NET, NET2] });
    expect((await get("one.capstan.test")).body).toBe("one v2\n");
    // Same certificate from the volume: the replaced Caddy did not issue a new one.
    const secure = await until("https answer", async () => get("secure.localhost", "/", true), 30_000, 500);
    expect(secure).toMatchObject({ status: 200, cert: certificate });
  });

  it("refuses invalid settings and a foreign container of the proxy's name", async () => {
    await expect(syncProxy(engine, { ...settings, image: "--privileged" }, ctx(), opts)).rejects.toThrow(/invalid proxy settings/);
    const foreign = `capstan-test-foreign-${RUN}`;
    await sh("docker", ["create", "--name", foreign, "--label", "capstan.test=1", BUSYBOX]);
    containers.push(foreign);
    await expect(syncProxy(engine, { ...settings, name: foreign }, ctx(), opts)).rejects.toThrow(/not Capstan's proxy/);
  });
});

describe("the product image (deploy/proxy/build-image.sh)", () => {
  const product = { name: `${PROXY}-product`, volume: `${VOLUME}-product` };
  const productSettings: ProxySettings = { name: product.name, image: "capstan/proxy:latest", networks: [NET], ensure_networks: [], http_port: HTTP_PORT + 2, https_port: HTTPS_PORT + 2 };

  afterAll(async () => {
    await sh("docker", ["rm", "-f", product.name]).catch(() => {});
    await sh("docker", ["volume", "rm", "-f", product.volume]).catch(() => {});
  });

  it("builds from local Debian and behaves like the test image", async () => {
    expect(await sh("bash", [join(repo, "deploy/proxy/build-image.sh")])).toMatch(/^capstan\/proxy:2\.\d+\.\d+$/);
    const result = await syncProxy(engine, productSettings, ctx(), { ...opts, volume: product.volume });
    expect(result).toMatchObject({ routes: 2, reloaded: true });
    const status = await new Promise<{ status: number; body: string }>((resolve, reject) =>
      http
        .get({ host: "127.0.0.1", port: HTTP_PORT + 2, headers: { Host: "one.capstan.test" }, timeout: 10_000 }, (r) => {
          let body = "";
          r.on("data", (d) => (body += d));
          r.on("end", () => resolve({ status: r.statusCode ?? 0, body }));
        })
        .on("error", reject),
    );
    expect(status).toEqual({ status: 200, body: "one v2\n" });
    const attempt = await sh("docker", ["exec", name("one-v2"), "sh", "-c", 'timeout 5 wget -q -O- "$0"; echo "exit=$?"', `http://${product.name}:2019/config/`]);
    expect(attempt).toMatch(/exit=[1-9]/);
    expect(await syncProxy(engine, productSettings, ctx(), { ...opts, volume: product.volume })).toMatchObject({ reloaded: false });
  });
});
