/**
 * Label overrides (spec 4.15, issue 17): GET / PUT {yaml} / DELETE per service application and
 * service database, behind PROXY_LABEL_OVERRIDES (402 when off); stored as YAML on the
 * component; merged into the service's stored rendering (the user's value wins, reserved keys
 * dropped and named); bad YAML and non-scalar values are a 422 that changes nothing.
 */
import { parse } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, ok, placement, type AppWorld } from "./support/applications.js";

let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();

const COMPOSE = `services:
  web:
    image: nginx:1.27
    environment:
      - SERVICE_URL_WEB_80
    labels:
      com.example.tier: generated
      com.example.keep: kept
  db:
    image: postgres:16
    environment:
      - POSTGRES_PASSWORD=\${SERVICE_PASSWORD_DB}
`;

let service: { uuid: string };
let web: string;
let db: string;

const rendered = async (): Promise<{ services: Record<string, { labels?: Record<string, string> }> }> => {
  const row = await t.instance.database.prisma.service.findUniqueOrThrow({ where: { uuid: service.uuid } });
  return parse(t.instance.box.open(row.composeRendered));
};
const appPath = (uuid = web) => `/service-applications/${uuid}/label-overrides`;
const dbPath = (uuid = db) => `/service-databases/${uuid}/label-overrides`;

beforeAll(async () => {
  t = await startTestInstance();
  w = await appWorld(t, keys);
  service = await ok(w.api.post("/services", { ...placement(w), docker_compose_raw: COMPOSE, name: "labelled" }), "service");
  const d = await ok(w.api.get(`/services/${service.uuid}`), "detail");
  web = d.applications.find((a: { name: string }) => a.name === "web").uuid;
  db = d.databases.find((a: { name: string }) => a.name === "db").uuid;
});
afterAll(async () => {
  await t?.close();
  keys.cleanup();
});

describe("label overrides", () => {
  it("are a paid feature: 402 naming PROXY_LABEL_OVERRIDES on every route while the team lacks it, before any lookup", async () => {
    for (const path of [appPath(), dbPath(), appPath("no-such-uuid")]) {
      for (const res of [await w.api.get(path), await w.api.put(path, { yaml: "a: b" }), await w.api.delete(path)]) {
        expect(res.status).toBe(402);
        expect(res.body.message).toContain("PROXY_LABEL_OVERRIDES");
      }
    }
    await t.instance.admin.setTeamFeatures(w.team.teamId, { enable: ["PROXY_LABEL_OVERRIDES"] });
  });

  it("GET answers none at first", async () => {
    const res = await w.api.get(appPath());
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ uuid: web, service_uuid: service.uuid, name: "web", yaml: "", labels: {}, dropped: [] });
  });

  it("PUT stores the YAML, merges it into the rendered compose file (the user wins), drops reserved keys and says which", async () => {
    const yaml = [
      "com.example.tier: user",
      "proxy.headers.response.X-Price: 5$ or ${HOME}",
      "capstan.proxy.routes: evil.example.com",
      "com.docker.compose.project: other",
      "com.example.replicas: 3",
      "",
    ].join("\n");
    const res = await w.api.put(appPath(), { yaml });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.message).toMatch(/capstan\.proxy\.routes, com\.docker\.compose\.project/);
    expect(res.body.message).toMatch(/next start/);
    expect(res.body.data).toEqual({
      uuid: web,
      service_uuid: service.uuid,
      name: "web",
      yaml,
      labels: { "com.example.tier": "user", "proxy.headers.response.X-Price": "5$ or ${HOME}", "com.example.replicas": "3" },
      dropped: ["capstan.proxy.routes", "com.docker.compose.project"],
    });
    expect((await w.api.get(appPath())).body).toEqual(res.body.data);

    const r = await rendered();
    // `$` is written `$$`: compose gives the container the literal text, never a server variable.
    expect(r.services.web!.labels).toEqual({
      "com.example.tier": "user",
      "com.example.keep": "kept",
      "proxy.headers.response.X-Price": "5$$ or $${HOME}",
      "com.example.replicas": "3",
    });
    expect(JSON.stringify(r)).not.toContain("evil.example.com");
    expect(r.services.db!.labels).toBeUndefined();
  });

  it("a service database has its own overrides; the other kind's path does not find it", async () => {
    const res = await w.api.put(dbPath(), { yaml: "com.example.backup: nightly\n" });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ uuid: db, name: "db", labels: { "com.example.backup": "nightly" }, dropped: [] });
    expect((await rendered()).services.db!.labels).toEqual({ "com.example.backup": "nightly" });
    // Both overrides stay in the rendering.
    expect((await rendered()).services.web!.labels!["com.example.tier"]).toBe("user");
    expect((await w.api.get(appPath(db))).status).toBe(404);
    expect((await w.api.put(dbPath(web), { yaml: "a: b" })).status).toBe(404);
  });

  it("invalid YAML, non-scalar values and bad keys are a 422 under yaml that changes nothing", async () => {
    const before = { get: (await w.api.get(appPath())).body, rendered: await rendered() };
    for (const yaml of ["a: [unclosed", "a:\n  nested: map\n", "a: [1, 2]\n", "- a list\n", "'bad key!': x\n", "a: &x 1\nb: *x\n"]) {
      const res = await w.api.put(appPath(), { yaml });
      expect(res.status, yaml).toBe(422);
      expect(res.body.errors.yaml, yaml).toEqual(expect.arrayContaining([expect.any(String)]));
    }
    expect((await w.api.put(appPath(), { yaml: 5 })).status).toBe(422);
    expect((await w.api.put(appPath(), {})).status).toBe(422);
    expect((await w.api.get(appPath())).body).toEqual(before.get);
    expect(await rendered()).toEqual(before.rendered);
  });

  it("a PATCH of the compose file keeps the overrides of the components it keeps", async () => {
    const patched = await w.api.patch(`/services/${service.uuid}`, { docker_compose_raw: COMPOSE.replace("nginx:1.27", "nginx:1.27-alpine") });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    const r = await rendered();
    expect(r.services.web!.labels!["com.example.tier"]).toBe("user");
    expect(r.services.db!.labels).toEqual({ "com.example.backup": "nightly" });
  });

  it("DELETE removes them: the rendering has the compose file's own labels again", async () => {
    const res = await w.api.delete(appPath());
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ yaml: "", labels: {}, dropped: [] });
    expect((await rendered()).services.web!.labels).toEqual({ "com.example.tier": "generated", "com.example.keep": "kept" });
    expect((await w.api.get(appPath())).body.yaml).toBe("");
  });

  it("concurrent PUTs on two components of one service both end up in the rendering", async () => {
    await Promise.all([
      w.api.put(appPath(), { yaml: "com.example.a: one\n" }),
      w.api.put(dbPath(), { yaml: "com.example.b: two\n" }),
      w.api.put(appPath(), { yaml: "com.example.a: one\n" }),
    ]);
    const r = await rendered();
    expect(r.services.web!.labels!["com.example.a"]).toBe("one");
    expect(r.services.db!.labels).toEqual({ "com.example.b": "two" });
  });

  it("a burst of PUTs on one component all succeed, one after another under the render lock, and the rendering holds one of them", async () => {
    // More PUTs than one transaction's default time budget can wait out behind the others (a
    // PostgreSQL 500 the authorization matrix found): each waits its turn for the lock instead.
    const sent = Array.from({ length: 48 }, (_, i) => `com.example.burst: b${i}\n`);
    const answers = await Promise.all(sent.map((yaml) => w.api.put(appPath(), { yaml })));
    expect(answers.map((a) => a.status), JSON.stringify(answers.find((a) => a.status !== 200)?.body)).toEqual(sent.map(() => 200));
    const stored = (await ok(w.api.get(appPath()), "overrides")).yaml as string;
    expect(sent).toContain(stored);
    expect((await rendered()).services.web!.labels!["com.example.burst"]).toBe(stored.slice("com.example.burst: ".length).trim());
  });

  it("a PATCH of the compose file racing a PUT never drops the PUT from the rendering (both re-render under the service's render lock)", async () => {
    for (let round = 0; round < 16; round++) {
      const image = round % 2 ? "nginx:1.27-alpine" : "nginx:1.27";
      const patch = () => w.api.patch(`/services/${service.uuid}`, { docker_compose_raw: COMPOSE.replace("nginx:1.27", image) });
      const putOne = () => w.api.put(appPath(), { yaml: `com.example.round: r${round}\n` });
      // Both orders of sending: the PUT landing inside the PATCH's render and the other way round.
      const [patched, put] = round % 4 < 2 ? await Promise.all([patch(), putOne()]) : await Promise.all([putOne(), patch()]).then(([a, b]) => [b, a] as const);
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      expect(put.status, JSON.stringify(put.body)).toBe(200);
      const r = (await rendered()) as { services: Record<string, { image?: string; labels?: Record<string, string> }> };
      expect(r.services.web!.image).toBe(image);
      expect(r.services.web!.labels!["com.example.round"], `round ${round}`).toBe(`r${round}`);
    }
  });

  it("another team's caller gets 404 and changes nothing", async () => {
    const other = await appWorld(t, keys);
    await t.instance.admin.setTeamFeatures(other.team.teamId, { enable: ["PROXY_LABEL_OVERRIDES"] });
    const before = await rendered();
    expect((await other.api.get(appPath())).status).toBe(404);
    expect((await other.api.put(appPath(), { yaml: "a: b" })).status).toBe(404);
    expect((await other.api.delete(dbPath())).status).toBe(404);
    expect(await rendered()).toEqual(before);
  });
});
