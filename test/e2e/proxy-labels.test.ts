/**
 * Issue 17, label overrides (4.15): the user-facing proxy-label namespace proven by traffic. A
 * compose application whose public service carries `proxy.*` labels is deployed through a real
 * control plane and agent on this machine's engine, with the real proxy image (Caddy 2.6):
 * basic auth answers 401 without credentials and 200 with them, a response header shows on
 * every answer, compression applies, and a hostile label (a Caddy placeholder that would read
 * the proxy's environment) is left out with its reason in the deployment's log and in
 * GET /servers/{uuid}, while the route keeps working. docs/proxy-labels.md.
 */
import http from "node:http";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TeamFixture } from "../api/harness.js";
import { until } from "./support/kit.js";
import { applicationCreator, deployFinished, startLocalStack, type LocalStack } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const DEPLOY_TIMEOUT_S = 180;
/** `caddy hash-password --plaintext open-sesame-17` (Caddy 2.6.2, bcrypt cost 14). */
const PASSWORD = "open-sesame-17";
const HASH = "$2a$14$DIIWF53dTevBGU1c3SKBo.wsBBcRn6psfVF0/8dXg78yyEgdkzm4e";

let stack: LocalStack;
let team: TeamFixture;
let proxyPort = 0;
let server: { uuid: string; destination: string };
let project: string;
const { common, create } = applicationCreator(() => team.api, () => ({ project, server }));

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * One GET to the proxy on loopback with a Host header, optional credentials and headers, on a
 * connection of its own (a proxy reload closes idle keep-alive ones; see support/http.ts).
 */
function get(host: string, opts: { auth?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Host: host, ...opts.headers };
    if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
    const req = http.get({ host: "127.0.0.1", port: proxyPort, path: "/", headers, timeout: 15_000, agent: false }, (res) => {
      let body = "";
      res.setEncoding("latin1");
      res.on("data", (d: string) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.on("error", reject);
  });
}

const deployed = (app: string) => deployFinished(team.api, app, DEPLOY_TIMEOUT_S * 1000);

beforeAll(async () => {
  stack = await startLocalStack({ name: `labels-${RUN}`, deployTimeoutS: DEPLOY_TIMEOUT_S });
  ({ team, server, project, proxyPort } = stack);
}, 300_000);

afterAll(async () => {
  await stack?.close();
});

describe("proxy.* labels on a compose application, through the real proxy", () => {
  it("basic auth: 401 without or with wrong credentials, 200 with them; headers and compression apply; a placeholder label is left out with its reason", async () => {
    const host = `labels-${RUN}.e2e.test`;
    // `$$` is compose's escape for a literal `$` (the hash is full of them).
    const hash = HASH.replaceAll("$", () => "$$");
    const compose = [
      "services:",
      "  web:",
      "    image: capstan-test/busybox:latest",
      // A body over Caddy's 512-byte minimum, so compression applies.
      '    command: ["sh", "-c", "mkdir -p /www && { echo labels-app-ok; i=0; while [ $$i -lt 100 ]; do echo padding-line-$$i; i=$$((i+1)); done; } > /www/index.html; exec httpd -f -p 8080 -h /www"]',
      "    labels:",
      `      proxy.basic_auth.alice: "${hash}"`,
      '      proxy.headers.response.X-Capstan-Labels: "on"',
      '      proxy.headers.response.X-Leak: "{env.CADDY_ADMIN}"',
      "      proxy.encode: gzip",
      "x-capstan-public-service: web",
    ].join("\n");
    const app = await create("dockercompose", common("labels-app", { docker_compose_raw: compose, ports_exposes: "8080", fqdn: `http://${host}` }));
    const d = await deployed(app);

    // The hostile label is reported where the user looks: the deployment's log ...
    expect(String(d.logs)).toMatch(/label proxy\.headers\.response\.X-Leak: braces are not allowed/);
    expect(String(d.logs)).not.toContain("{env.CADDY_ADMIN}");

    const denied = await until("the route with basic auth to be served", async () => {
      const r = await get(host);
      return r.status === 401 ? r : false;
    });
    expect(denied.headers["www-authenticate"]).toMatch(/^Basic realm=/);
    expect(denied.body).not.toContain("labels-app-ok");

    const wrong = await get(host, { auth: "alice:not-the-password" });
    expect(wrong.status).toBe(401);
    const stranger = await get(host, { auth: `mallory:${PASSWORD}` });
    expect(stranger.status).toBe(401);

    const ok = await get(host, { auth: `alice:${PASSWORD}` });
    expect(ok.status).toBe(200);
    expect(ok.body).toContain("labels-app-ok");
    expect(ok.headers["x-capstan-labels"]).toBe("on");
    // The placeholder label was left out: no header at all, nothing of the proxy's environment.
    expect(ok.headers["x-leak"]).toBeUndefined();
    expect(JSON.stringify(ok.headers)).not.toContain("2019");

    const gz = await get(host, { auth: `alice:${PASSWORD}`, headers: { "Accept-Encoding": "gzip" } });
    expect(gz.status).toBe(200);
    expect(gz.headers["content-encoding"]).toBe("gzip");

    // ... and the server's proxy facts (sent right after the sync).
    const warnings = await until(
      "the proxy's warnings in GET /servers/{uuid}",
      async () => {
        const w = (await team.api.get(`/servers/${server.uuid}`)).body.proxy.warnings as string[];
        return w.some((line) => line.includes("proxy.headers.response.X-Leak")) ? w : false;
      },
      30_000,
      500,
    );
    expect(warnings.join("\n")).not.toContain("{env.");
  });
});
