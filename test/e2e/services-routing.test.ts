/**
 * Service applications routed by the proxy on the real engine (issue 17, w7/svcroute): a
 * template service (a compose file with the template header, parsed as any catalog template)
 * with two routed components, each given its domain with PATCH /service-applications/{uuid}:
 * after a start both answer through the local proxy on their own domain (one over HTTPS with
 * the proxy's certificate, one on plain HTTP); a basic-auth label override (proxy.basic_auth.*,
 * docs/proxy-labels.md) makes the web domain answer 401 without credentials and 200 with them
 * after a restart; DELETE takes the routes away.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { httpGet, type HttpAnswer } from "./support/http.js";
import { removeLabelled, sh, until } from "./support/kit.js";
import { startLocalStack, type LocalStack } from "./support/local-server.js";

const RUN = randomBytes(3).toString("hex");
const DEPLOY_TIMEOUT_S = 180;
const BUSYBOX = "capstan-test/busybox:latest";
/** `caddy hash-password --plaintext open-sesame-17` (Caddy 2.6.2, bcrypt cost 14), as test/e2e/proxy-labels.test.ts. */
const PASSWORD = "open-sesame-17";
const HASH = "$2a$14$DIIWF53dTevBGU1c3SKBo.wsBBcRn6psfVF0/8dXg78yyEgdkzm4e";
/** Caddy's internal CA signs .localhost names: the HTTPS route gets a certificate without ACME. */
const WEB_HOST = `web-${RUN}.localhost`;
const ADMIN_HOST = `admin-${RUN}.capstan.test`;

const TEMPLATE = `# documentation: https://example.org/docs
# slogan: A page and its admin, each on its own domain.
# tags: test
# port: 8080

services:
  web:
    image: ${BUSYBOX}
    command: ["sh", "-c", "mkdir -p /www && echo web-ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
    environment:
      - SERVICE_URL_WEB_8080
      - WEB_PASSWORD=\${SERVICE_PASSWORD_WEB}
  admin:
    image: ${BUSYBOX}
    command: ["sh", "-c", "mkdir -p /www && echo admin-ok > /www/index.html && exec httpd -f -p 9090 -h /www"]
    environment:
      - SERVICE_URL_ADMIN_9090
  cache:
    image: redis:7
    command: ["sh", "-c", "exec sleep 100000"]
`;

let stack: LocalStack;

/** One GET to the local proxy with a Host header (and SNI over HTTPS; its certificate is the proxy's own CA's). */
function get(host: string, opts: { secure?: boolean; auth?: string } = {}): Promise<HttpAnswer> {
  const headers: Record<string, string> = { Host: host };
  if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString("base64")}`;
  return httpGet({ host: "127.0.0.1", port: opts.secure ? stack.httpsPort : stack.proxyPort, headers, timeoutMs: 15_000, ...(opts.secure ? { servername: host } : {}) });
}

/** Polls until `host` answers `status` (and `body` when given); errors while the proxy reloads count as not yet. */
async function answers(host: string, status: number, opts: { secure?: boolean; auth?: string; body?: string } = {}): Promise<HttpAnswer> {
  return until(
    `${host} to answer ${status}${opts.body ? ` ${opts.body}` : ""}`,
    async () => {
      const r = await get(host, opts).catch(() => null);
      return r && r.status === status && (opts.body === undefined || r.body.trim() === opts.body) ? r : false;
    },
    DEPLOY_TIMEOUT_S * 1000,
    500,
  );
}

async function act(uuid: string, action: "start" | "restart"): Promise<void> {
  const res = await stack.team.api.post(`/services/${uuid}/${action}`);
  expect([200, 202], `${action}: ${JSON.stringify(res.body)}`).toContain(res.status);
  await until(`the service to run after ${action}`, async () => /^running/.test((await stack.team.api.get(`/services/${uuid}`)).body.status), DEPLOY_TIMEOUT_S * 1000, 250);
}

beforeAll(async () => {
  stack = await startLocalStack({
    name: `svc-route-${RUN}`,
    deployTimeoutS: DEPLOY_TIMEOUT_S,
    env: { PLATFORM_TEMPLATE_IMAGE_OVERRIDES: JSON.stringify({ redis: BUSYBOX }) },
    agentLabels: `capstan.test=1,capstan.test.run=svc-route-${RUN}`,
  });
}, 300_000);

afterAll(async () => {
  await stack?.close();
  // What a failed run left behind (the test deletes its service on success).
  await removeLabelled(`svc-route-${RUN}`);
});

describe("service applications behind the proxy", () => {
  it("route each component on its domain (HTTPS and HTTP), honour a basic-auth label override, and lose the routes on delete", async () => {
    const { team, server, project, t } = stack;
    const created = await team.api.post("/services", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destination,
      docker_compose_raw: TEMPLATE,
      name: `routed-${RUN}`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = created.body.uuid as string;
    const detail = (await team.api.get(`/services/${uuid}`)).body;
    const component = (name: string) => (detail.applications as { uuid: string; name: string }[]).find((c) => c.name === name)!.uuid;
    expect(detail.databases.map((c: { name: string }) => c.name)).toEqual(["cache"]);

    const web = await team.api.patch(`/service-applications/${component("web")}`, { fqdn: `https://${WEB_HOST}` });
    expect(web.status, JSON.stringify(web.body)).toBe(200);
    expect(web.body.data.fqdn).toBe(`https://${WEB_HOST}`);
    expect((await team.api.patch(`/service-applications/${component("admin")}`, { fqdn: `http://${ADMIN_HOST}` })).status).toBe(200);

    await act(uuid, "start");
    // Both routed components answer on their own domains; the web one over HTTPS (plain HTTP redirects there).
    await answers(WEB_HOST, 200, { secure: true, body: "web-ok" });
    expect((await get(WEB_HOST)).status).toBe(308);
    await answers(ADMIN_HOST, 200, { body: "admin-ok" });
    // The component's SERVICE_URL_ value follows its domain (with the template's port for it).
    const env = (await sh("docker", ["inspect", "-f", "{{json .Config.Env}}", `${uuid}-web`])).trim();
    expect((JSON.parse(env) as string[]).filter((e) => e.startsWith("SERVICE_URL_WEB"))).toEqual([`SERVICE_URL_WEB_8080=https://${WEB_HOST}:8080`]);
    // The database component is no proxy target: only the routed ones carry routes.
    const routesOf = async (name: string) => (await sh("docker", ["inspect", "-f", '{{index .Config.Labels "capstan.proxy.routes"}}', `${uuid}-${name}`])).trim();
    expect(await routesOf("cache")).toBe("");

    // A basic-auth override (the paid feature), applied from the next restart.
    await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["PROXY_LABEL_OVERRIDES"] });
    const put = await team.api.put(`/service-applications/${component("web")}/label-overrides`, { yaml: `proxy.basic_auth.alice: "${HASH}"\n` });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    await act(uuid, "restart");
    await answers(WEB_HOST, 401, { secure: true });
    await answers(WEB_HOST, 200, { secure: true, auth: `alice:${PASSWORD}`, body: "web-ok" });
    expect((await get(WEB_HOST, { secure: true, auth: "alice:wrong" })).status).toBe(401);
    // The other component has no override: it answers without credentials.
    expect(await get(ADMIN_HOST)).toMatchObject({ status: 200 });

    const removed = await team.api.delete(`/services/${uuid}?delete_volumes=true`);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    await until("the service's containers to be gone", async () => (await sh("docker", ["ps", "-aq", "--filter", `label=capstan.resource.uuid=${uuid}`])).trim() === "", 60_000, 250);
    await until(
      "the routes to be gone",
      async () => {
        const [w, a] = await Promise.all([get(WEB_HOST, { secure: true, auth: `alice:${PASSWORD}` }).catch(() => null), get(ADMIN_HOST).catch(() => null)]);
        return (w === null || (w.status !== 200 && !w.body.includes("web-ok"))) && a !== null && a.status !== 200 && !a.body.includes("admin-ok");
      },
      60_000,
      500,
    );
  });
});
