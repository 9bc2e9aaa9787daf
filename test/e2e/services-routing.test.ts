/**
 * Service applications routed by the proxy on the real engine (issue 17, w7/svcroute): a
 * template service (a compose file with the template header, parsed as any catalog template)
 * with two routed components, each given its domain with PATCH /service-applications/{uuid}:
 * after a start both answer through the local proxy on their own domain (one over HTTPS with
 * the proxy's certificate, one on plain HTTP); a basic-auth label override (proxy.basic_auth.*,
 * docs/proxy-labels.md) makes the web domain answer 401 without credentials and 200 with them
 * after a restart; DELETE takes the routes away. And (issue 17's end-to-end proof) a service of
 * the BUILT-IN catalog's pgadmin template, created without any domain, is reachable through the
 * proxy on its generated domain (<component>-<short id>.127.0.0.1.sslip.io, by Host header: no
 * DNS), keeps its generated passwords byte-identical across a redeploy, and is deleted cleanly
 * (containers, networks, route; its volume only when asked).
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildImage, startLocalStack, type LocalStack } from "./support/local-server.js";
import { removeLabelled, sh, until } from "./support/kit.js";
import { envOf, proxyClient, serviceAction, serviceContainers, serviceLeftovers } from "./support/services.js";

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

/**
 * The stand-in for the built-in catalog's pgadmin template (dpage/pgadmin4, through
 * PLATFORM_TEMPLATE_IMAGE_OVERRIDES: no pulls here): busybox httpd on the template's port 80,
 * answering the template's healthcheck path /misc/ping.
 */
const PGADMIN_STANDIN = `capstan-test/pgadmin-standin-${RUN}:latest`;

let stack: LocalStack;
const { get, answers } = proxyClient(() => stack, DEPLOY_TIMEOUT_S * 1000);
const act = (uuid: string, action: "start" | "restart") => serviceAction(stack.team.api, uuid, action, /^running/, DEPLOY_TIMEOUT_S * 1000);

beforeAll(async () => {
  await buildImage(PGADMIN_STANDIN, [
    `FROM ${BUSYBOX}`,
    "RUN mkdir -p /www/misc && echo pong > /www/misc/ping && echo pgadmin-standin > /www/index.html",
    'CMD ["httpd", "-f", "-p", "80", "-h", "/www"]',
  ]);
  stack = await startLocalStack({
    name: `svc-route-${RUN}`,
    deployTimeoutS: DEPLOY_TIMEOUT_S,
    env: { PLATFORM_TEMPLATE_IMAGE_OVERRIDES: JSON.stringify({ redis: BUSYBOX, "dpage/pgadmin4": PGADMIN_STANDIN }) },
    agentLabels: `capstan.test=1,capstan.test.run=svc-route-${RUN}`,
  });
}, 300_000);

afterAll(async () => {
  await stack?.close();
  // What a failed run left behind (the tests delete their services on success).
  await removeLabelled(`svc-route-${RUN}`);
  await sh("docker", ["rmi", "-f", PGADMIN_STANDIN]).catch(() => {});
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
  it("a built-in catalog template created without a domain is reachable on its generated domain, keeps its passwords across a redeploy, and is deleted cleanly", async () => {
    const { team, server, project } = stack;
    const created = await team.api.post("/services", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destination,
      type: "pgadmin",
      name: `pgadmin-${RUN}`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = created.body.uuid as string;
    // The server is this machine at 127.0.0.1: <component>-<short id>.127.0.0.1.sslip.io over http (docs/services.md).
    const fqdn = `http://pgadmin-${uuid.slice(0, 8)}.127.0.0.1.sslip.io`;
    const host = fqdn.slice("http://".length);
    expect(created.body.domains).toEqual([fqdn]);
    const detail = (await team.api.get(`/services/${uuid}`)).body;
    expect(detail.applications.map((c: { name: string; fqdn: string | null }) => [c.name, c.fqdn])).toEqual([["pgadmin", fqdn]]);
    const stored = Object.fromEntries((detail.envs as { key: string; value: string }[]).map((e) => [e.key, e.value]));
    expect(stored.SERVICE_PASSWORD_PGADMIN).toMatch(/^[A-Za-z0-9]{32}$/);

    await act(uuid, "start");
    await answers(host, 200, { body: "pgadmin-standin" });
    const [first] = await serviceContainers(uuid);
    expect(first!.state).toBe("running");
    expect(envOf(first!, "PGADMIN_DEFAULT_PASSWORD")).toBe(stored.SERVICE_PASSWORD_PGADMIN);
    // SERVICE_URL_PGADMIN_80 follows the generated domain, with the template's port.
    expect(envOf(first!, "SERVICE_URL_PGADMIN_80")).toBe(`${fqdn}:80`);

    // A redeploy recreates the container: the same passwords byte for byte, the same domain, still routed.
    await act(uuid, "restart");
    const [second] = await serviceContainers(uuid);
    expect(second!.id).not.toBe(first!.id);
    expect(envOf(second!, "PGADMIN_DEFAULT_PASSWORD")).toBe(stored.SERVICE_PASSWORD_PGADMIN);
    const after = (await team.api.get(`/services/${uuid}`)).body;
    expect(Object.fromEntries((after.envs as { key: string; value: string }[]).map((e) => [e.key, e.value]))).toEqual(stored);
    expect(after.applications[0].fqdn).toBe(fqdn);
    await answers(host, 200, { body: "pgadmin-standin" });

    // DELETE without delete_volumes: containers, networks and the route go; the volume stays until asked.
    const volumes = (await serviceLeftovers(uuid)).volumes;
    expect(volumes.length).toBeGreaterThan(0);
    const removed = await team.api.delete(`/services/${uuid}`);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    await until("the service's containers and networks to be gone", async () => {
      const left = await serviceLeftovers(uuid);
      return left.containers.length === 0 && left.networks.length === 0;
    }, 60_000, 250);
    await until("the route to be gone", async () => {
      const r = await get(host).catch(() => null);
      return r === null || (r.status !== 200 && !r.body.includes("pgadmin-standin"));
    }, 60_000, 500);
    expect((await serviceLeftovers(uuid)).volumes).toEqual(volumes);
    expect((await team.api.get(`/services/${uuid}`)).status).toBe(404);
    await sh("docker", ["volume", "rm", ...volumes]);
  });
});
