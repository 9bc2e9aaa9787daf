import { describe, expect, it } from "vitest";
import { parseDocument } from "yaml";
import { Invalid } from "../domain/errors.js";
import { errorResponse } from "../http/errors.js";
import { parseCompose } from "./parse.js";
import { type RewriteContext, rewriteCompose } from "./rewrite.js";

const APP = "8f1c2d3e-0a1b-4c5d-8e9f-0123456789ab";
const DEPLOYMENT = "d1e2f3a4-b5c6-4d7e-8f90-a1b2c3d4e5f6";

const ctx = (over: Partial<RewriteContext> = {}): RewriteContext => ({
  appUuid: APP,
  appName: "Shop \"front\"",
  deploymentUuid: DEPLOYMENT,
  network: "capstan",
  routes: [
    { host: "shop.example.com", https: true, path: "/" },
    { host: "shop.example.com", https: true, path: "/api" },
    { host: "www.shop.example.com", https: false, path: "/" },
  ],
  port: null,
  env: { DB_PASSWORD: "s3cr$t ${HOME} `id`", API_KEY: "k-$1${X}", TAG: "2.1" },
  rollout: 1_700_000_000_000,
  ...over,
});

type Rendered = {
  "x-capstan": Record<string, unknown>;
  services: Record<string, Record<string, any>>;
  networks: Record<string, Record<string, unknown>>;
  volumes?: Record<string, Record<string, unknown>>;
};

/** What compose sees: the file read as YAML, then `$$` turned back into `$` (compose's own unescaping). */
function asCompose(rendered: string): Rendered {
  const doc = parseDocument(rendered);
  expect(doc.errors).toEqual([]);
  return JSON.parse(JSON.stringify(doc.toJS()), (_k, v) => (typeof v === "string" ? v.split("$$").join("$") : v)) as Rendered;
}

const RAW = `
x-capstan-public-service: web
services:
  db:
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: \${DB_PASSWORD:?set DB_PASSWORD}
      LITERAL: "cost $$5"
    volumes: [pgdata:/var/lib/postgresql/data]
    labels:
      capstan.proxy.routes: '[{"host":"victim.example.com","https":false,"path":"/"}]'
      capstan.resource.uuid: someone-elses-app
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U \${PGUSER:-postgres}"]
      interval: 2s
      retries: 20
  web:
    image: ghcr.io/example/web:\${TAG:-latest}
    command: ["node", "server.js"]
    environment:
      - DATABASE_URL=postgres://postgres:\${DB_PASSWORD}@db/app
      - API_KEY
      - NOT_SET
      - AGENT_TOKEN=\${CAPSTAN_AGENT_TOKEN}
    expose: ["3000", "9090"]
    volumes:
      - /srv/uploads:/app/uploads:ro
      - cache:/cache
    depends_on:
      db: {condition: service_healthy}
    links: ["db:database"]
    labels: {team: blue}
    deploy: {resources: {limits: {cpus: "0.5", memory: 256m}}}
volumes:
  pgdata:
  cache:
    labels: {backup: daily}
`;

describe("rewriteCompose", () => {
  const out = asCompose(rewriteCompose(parseCompose(RAW), ctx()));
  const web = out.services[`${APP}-web`]!;
  const db = out.services[`${APP}-db`]!;

  it("names the project, containers and volumes after the application", () => {
    expect(out["x-capstan"]).toEqual({
      project: `capstan-${APP}`,
      app_uuid: APP,
      deployment_uuid: DEPLOYMENT,
      network: "capstan",
      public_container: `${APP}-web`,
      containers: [`${APP}-db`, `${APP}-web`],
    });
    expect(Object.keys(out.services)).toEqual([`${APP}-db`, `${APP}-web`]);
    expect(web.container_name).toBe(`${APP}-web`);
    expect(db.container_name).toBe(`${APP}-db`);
    expect(out.volumes).toEqual({
      pgdata: { name: `${APP}-pgdata`, labels: { "capstan.managed": "true", "capstan.resource.uuid": APP } },
      cache: { name: `${APP}-cache`, labels: { backup: "daily", "capstan.managed": "true", "capstan.resource.uuid": APP } },
    });
  });

  it("puts every service on the application's network (by service name) and the destination network", () => {
    expect(out.networks).toEqual({
      app: { name: `capstan-${APP}`, labels: { "capstan.managed": "true", "capstan.resource.uuid": APP } },
      destination: { external: true, name: "capstan" },
    });
    expect(web.networks).toEqual({ app: { aliases: ["web"] }, destination: {} });
    // links: [db:database] -> another name of db, on the application's network only
    expect(db.networks).toEqual({ app: { aliases: ["db", "database"] }, destination: {} });
    expect(web.depends_on).toEqual({ [`${APP}-db`]: { condition: "service_healthy" } });
  });

  it("labels every service for the platform and only the public one for the proxy", () => {
    expect(web.labels).toEqual({
      team: "blue",
      "capstan.managed": "true",
      "capstan.resource.uuid": APP,
      "capstan.resource.name": "Shop \"front\"",
      "capstan.resource.type": "application",
      "capstan.deployment": DEPLOYMENT,
      "capstan.rollout": "1700000000000",
      "capstan.domains": "shop.example.com,www.shop.example.com",
      "capstan.proxy.routes": JSON.stringify(ctx().routes),
      "capstan.proxy.port": "3000",
      "capstan.proxy.network": "capstan",
    });
    // The user's capstan.* labels are gone; the proxy labels are set empty so an image's own
    // labels cannot supply routes.
    expect(db.labels).toEqual({
      "capstan.managed": "true",
      "capstan.resource.uuid": APP,
      "capstan.resource.name": "Shop \"front\"",
      "capstan.resource.type": "application",
      "capstan.deployment": DEPLOYMENT,
      "capstan.rollout": "1700000000000",
      "capstan.domains": "",
      "capstan.proxy.routes": "",
      "capstan.proxy.port": "",
      "capstan.proxy.network": "",
    });
  });

  it("resolves variables from the application's variables only", () => {
    expect(web.image).toBe("ghcr.io/example/web:2.1");
    expect(web.environment).toEqual({
      DATABASE_URL: "postgres://postgres:s3cr$t ${HOME} `id`@db/app",
      API_KEY: "k-$1${X}",
      // NOT_SET has no value anywhere: left out, as compose does.
      AGENT_TOKEN: "",
    });
    expect(db.environment).toEqual({ POSTGRES_PASSWORD: "s3cr$t ${HOME} `id`", LITERAL: "cost $5" });
    expect(db.healthcheck).toEqual({ test: ["CMD-SHELL", "pg_isready -U postgres"], interval: "2s", retries: 20 });
  });

  it("escapes every $ so compose interpolates nothing", () => {
    const rendered = rewriteCompose(parseCompose(RAW), ctx());
    // Outside `$$` pairs no `$` is left: compose has nothing to resolve from its own environment.
    expect(rendered.replaceAll("$$", "")).not.toContain("$");
    expect(rendered).toContain("s3cr$$t $${HOME} `id`");
  });

  it("maps mounts, ports and limits to what compose runs", () => {
    expect(web.volumes).toEqual(["/srv/uploads:/app/uploads:ro", { type: "volume", source: "cache", target: "/cache" }]);
    expect(db.volumes).toEqual([{ type: "volume", source: "pgdata", target: "/var/lib/postgresql/data" }]);
    expect(web.expose).toEqual(["3000", "9090"]);
    expect(web).not.toHaveProperty("ports");
    expect(web.mem_limit).toBe("256m");
    expect(web.cpus).toBe(0.5);
    expect(web.restart).toBe("unless-stopped");
  });

  it("takes the proxy port from the context when given", () => {
    const o = asCompose(rewriteCompose(parseCompose(RAW), ctx({ port: 9090, extraLabels: { "capstan.test": "1" } })));
    const w = o.services[`${APP}-web`]!;
    expect(w.labels["capstan.proxy.port"]).toBe("9090");
    expect(w.labels["capstan.test"]).toBe("1");
    expect(o.networks.app!.labels).toMatchObject({ "capstan.test": "1" });
    expect(o.volumes!.pgdata!.labels).toMatchObject({ "capstan.test": "1" });
  });

  it("writes ASCII only: other characters as escapes compose reads back", () => {
    const env = { ...ctx().env, NOTE: "é\u2028\u0085\u007f😀\ttab\nline" };
    const doc = parseCompose("services:\n  app:\n    image: nginx\n    environment: [NOTE]\n");
    const rendered = rewriteCompose(doc, ctx({ env, routes: [] }));
    expect(/[\u007f-\ud7ff\ue000-\uffff]/.test(rendered)).toBe(false);
    expect(asCompose(rendered).services[`${APP}-app`]!.environment).toEqual({ NOTE: env.NOTE });
    expect(JSON.parse(rendered).services[`${APP}-app`].environment.NOTE).toBe(env.NOTE);
  });

  it("refuses values that only become invalid once resolved", () => {
    const doc = parseCompose("services:\n  app:\n    image: ${IMAGE}\n    user: ${RUN_AS}\n    working_dir: ${DIR:-/app}\n");
    const err = (() => {
      try {
        rewriteCompose(doc, ctx({ routes: [], env: { IMAGE: "alpine --privileged", RUN_AS: "0:0; id", DIR: "relative" } }));
      } catch (e) {
        return e as Invalid;
      }
      throw new Error("accepted");
    })();
    expect(errorResponse(err)?.status).toBe(422);
    expect(err.errors!.docker_compose_raw).toEqual([
      'services.app: image "alpine --privileged" is not an image reference',
      'services.app: working_dir "relative" must be an absolute path',
      'services.app: user "0:0; id" must be NAME, UID or UID:GID',
    ]);
  });

  it("refuses a deploy whose required variable is missing", () => {
    expect(() => rewriteCompose(parseCompose(RAW), ctx({ env: {} }))).toThrow(Invalid);
    try {
      rewriteCompose(parseCompose(RAW), ctx({ env: {} }));
    } catch (e) {
      expect((e as Invalid).errors!.docker_compose_raw).toContain("services.db.environment.POSTGRES_PASSWORD: variable DB_PASSWORD is required: set DB_PASSWORD");
    }
  });

  it("refuses variable values compose could not carry", () => {
    const doc = parseCompose("services:\n  app:\n    image: nginx\n    environment: [BROKEN, \"VIA=${BROKEN}\"]\n");
    try {
      rewriteCompose(doc, ctx({ routes: [], env: { BROKEN: "half \ud800 pair" } }));
      throw new Error("accepted");
    } catch (e) {
      expect((e as Invalid).errors!.docker_compose_raw).toEqual([
        "services.app.environment.BROKEN: the resolved value contains unpaired surrogate characters",
        "services.app.environment.VIA: the resolved value contains unpaired surrogate characters",
      ]);
    }
  });

  it("needs a port for the proxy when the application has domains", () => {
    const doc = parseCompose("services:\n  app:\n    image: nginx\n");
    expect(() => rewriteCompose(doc, ctx())).toThrow(Invalid);
    const noDomains = asCompose(rewriteCompose(doc, ctx({ routes: [] })));
    expect(noDomains.services[`${APP}-app`]!.labels).toMatchObject({ "capstan.proxy.routes": "[]", "capstan.proxy.port": "", "capstan.domains": "" });
    expect(asCompose(rewriteCompose(doc, ctx({ port: 80 }))).services[`${APP}-app`]!.labels["capstan.proxy.port"]).toBe("80");
  });
});

describe("rewriteCompose: networks (services/network-plan.ts)", () => {
  const TWO = "x-capstan-public-service: web\nservices:\n  web:\n    image: nginx\n    expose: [\"80\"]\n  worker:\n    image: busybox\n";

  it("puts every service on the primary network, the public one alone on the proxy network, every one on attached shared networks", () => {
    const out = asCompose(
      rewriteCompose(
        parseCompose(TWO),
        ctx({
          network: "capstan-env-1111",
          networks: [
            { name: "capstan-proxy-net", publicOnly: true },
            { name: "team-shared", publicOnly: false },
          ],
          proxyNetwork: "capstan-proxy-net",
        }),
      ),
    );
    expect(out.networks).toEqual({
      app: { name: `capstan-${APP}`, labels: { "capstan.managed": "true", "capstan.resource.uuid": APP } },
      destination: { external: true, name: "capstan-env-1111" },
      proxy: { external: true, name: "capstan-proxy-net" },
      "shared-2": { external: true, name: "team-shared" },
    });
    expect(out.services[`${APP}-web`]!.networks).toEqual({ app: { aliases: ["web"] }, destination: {}, proxy: {}, "shared-2": {} });
    // An internal service never joins the proxy network: it cannot reach the proxy.
    expect(out.services[`${APP}-worker`]!.networks).toEqual({ app: { aliases: ["worker"] }, destination: {}, "shared-2": {} });
    expect(out.services[`${APP}-web`]!.labels["capstan.proxy.network"]).toBe("capstan-proxy-net");
    expect(out.services[`${APP}-worker`]!.labels["capstan.proxy.network"]).toBe("");
    expect(out["x-capstan"].network).toBe("capstan-env-1111");
  });

  it("labels the public service with the primary network when there is no proxy network", () => {
    const out = asCompose(rewriteCompose(parseCompose(TWO), ctx({ network: "capstan-env-2222" })));
    expect(out.services[`${APP}-web`]!.labels["capstan.proxy.network"]).toBe("capstan-env-2222");
  });

  it("a user's capstan.proxy.network wins over the automatic value (spec section 1, rule 9); other capstan.* labels are dropped", () => {
    const raw = "x-capstan-public-service: web\nservices:\n  web:\n    image: nginx\n    expose: [\"80\"]\n    labels:\n      capstan.proxy.network: my-routing-net\n      capstan.proxy.port: \"9999\"\n";
    const out = asCompose(rewriteCompose(parseCompose(raw), ctx({ networks: [{ name: "capstan-proxy-net", publicOnly: true }], proxyNetwork: "capstan-proxy-net" })));
    expect(out.services[`${APP}-web`]!.labels["capstan.proxy.network"]).toBe("my-routing-net");
    expect(out.services[`${APP}-web`]!.labels["capstan.proxy.port"]).toBe("80");
  });

  it("refuses a user routing-network value that is not a Docker network name", () => {
    const raw = "services:\n  web:\n    image: nginx\n    expose: [\"80\"]\n    labels:\n      capstan.proxy.network: \"bad name;rm\"\n";
    try {
      rewriteCompose(parseCompose(raw), ctx());
      throw new Error("accepted");
    } catch (e) {
      expect((e as Invalid).errors!.docker_compose_raw).toEqual(["services.web.labels.capstan.proxy.network: must name a Docker network (letters, digits, _ . -)"]);
    }
  });
});

// services lifecycle (issue 17)
describe("rewrite for a service", () => {
  it("labels every container with resource type service and its component's uuid; applications keep type application and no component label", () => {
    const doc = parseCompose(`services:\n  web:\n    image: nginx:1.27\n    expose: ["80"]\n  db:\n    image: postgres:16\n`);
    const out = asCompose(rewriteCompose(doc, ctx({ routes: [], resourceType: "service", components: { web: "c-web", db: "c-db" } })));
    expect(out.services[`${APP}-web`]!.labels).toMatchObject({ "capstan.resource.type": "service", "capstan.resource.uuid": APP, "capstan.service.component": "c-web" });
    expect(out.services[`${APP}-db`]!.labels["capstan.service.component"]).toBe("c-db");
    const app = asCompose(rewriteCompose(doc, ctx({ routes: [] })));
    expect(app.services[`${APP}-web`]!.labels["capstan.resource.type"]).toBe("application");
    expect(app.services[`${APP}-web`]!.labels).not.toHaveProperty("capstan.service.component");
  });
});
