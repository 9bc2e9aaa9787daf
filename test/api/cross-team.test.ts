/**
 * THE MATRIX: every route of the route table, called by team B on team A's objects, answers
 * 404 and changes nothing. Cases are derived from the route table itself, so a new route is
 * covered the day it is added — or this file fails, telling what it needs (a resource kind
 * fixture, a request body, a query parameter mapping).
 */
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { routes as allRoutes } from "../../control-plane/src/http/routes/index.js";
import { startTestInstance, type ApiClient, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import {
  BODIES,
  OWN_STATUS,
  PAGINATION,
  PREPARE_OWN,
  QUERY_OPTIONS,
  QUERY_REFS,
  QUERY_TARGETS,
  RESOURCE_VALUES,
  UNOWNED_KINDS,
  buildFixtures,
  changedKeys,
  expectOwnStatus,
  initFixtures,
  keyOf,
  kindOf,
  pathParams,
  snapshot,
  withQuery,
  type Fixtures,
} from "./support/fixtures.js";
import { requiredScope, type AnyRoute } from "../../control-plane/src/http/route.js";

let t: TestInstance;
const keys = new KeyFactory();
/**
 * Routes a token reaches. Tokenless routes (inbound webhooks) have no team to cross: they are
 * authenticated by a per-application signature, checked at the end of this file.
 */
const routes = allRoutes.filter((r) => r.auth !== "none");

// ---------------------------------------------------------------------------------------------
// Cases, derived from the route table when the file is collected.

type Owner = "A" | "B";
interface Slot {
  param: string;
  kind: string;
  owner: Owner;
  variant: string;
}
interface MatrixCase {
  route: AnyRoute;
  slots: Slot[];
  label: string;
}

/** Problems that make the matrix incomplete: reported by one failing test naming what to add. */
const gaps: string[] = [];
const gapRoutes = new Set<string>();
const gap = (r: AnyRoute, message: string) => {
  gaps.push(`${keyOf(r)}: ${message}`);
  gapRoutes.add(keyOf(r));
};

for (const r of routes) {
  const spec = BODIES[keyOf(r)];
  if (r.body && !spec) gap(r, `takes a body: add BODIES["${keyOf(r)}"] with a valid body${pathParams(r).length ? "" : " and its foreign-id variants"}.`);
  if (r.body && spec && !pathParams(r).length && !spec.foreign) {
    gap(r, `has no path parameters: BODIES["${keyOf(r)}"].foreign must list bodies naming another team's ids ("none" if the body names no object).`);
  }
  for (const name of Object.keys(r.query?.shape ?? {})) {
    if (!PAGINATION.has(name) && !QUERY_OPTIONS.has(name) && !QUERY_REFS[name] && !QUERY_TARGETS[keyOf(r)]?.params.includes(name)) {
      gap(r, `query parameter ${name}: add it to QUERY_REFS (a list filter), QUERY_TARGETS (the objects an action acts on) or QUERY_OPTIONS.`);
    }
  }
  for (const param of pathParams(r)) {
    const kind = kindOf(r, param);
    if (!kind) gap(r, `path parameter {${param}} has no x-capstan-resource (declare it with resourceId() from shared/src/api/common.ts).`);
    else if (!RESOURCE_VALUES[kind]) gap(r, `unknown resource kind "${kind}" of {${param}}: add a fixture and RESOURCE_VALUES["${kind}"].`);
  }
}

/** Routes the matrix can drive. */
const covered = routes.filter((r) => !gapRoutes.has(keyOf(r)));
const paramRoutes = covered.filter((r) => pathParams(r).length > 0);

/** Path values all taken from one owner, first variant of each kind. */
const ownSlots = (r: AnyRoute, owner: Owner): Slot[] =>
  pathParams(r).map((param) => {
    const kind = kindOf(r, param)!;
    return { param, kind, owner, variant: Object.keys(RESOURCE_VALUES[kind]!)[0]! };
  });

const cases: MatrixCase[] = [];
for (const r of paramRoutes) {
  const options = pathParams(r).map((param) => {
    const kind = kindOf(r, param)!;
    const owners: Owner[] = UNOWNED_KINDS.has(kind) ? ["B"] : ["A", "B"];
    return owners.flatMap((owner) => Object.keys(RESOURCE_VALUES[kind]!).map((variant) => ({ param, kind, owner, variant })));
  });
  let combos: Slot[][] = [[]];
  for (const o of options) combos = combos.flatMap((c) => o.map((slot) => [...c, slot]));
  // Every combination in which at least one object is team A's.
  for (const slots of combos.filter((c) => c.some((s) => s.owner === "A"))) {
    const parts = slots.map((s) => `${s.param}=${s.owner}:${s.kind}${Object.keys(RESOURCE_VALUES[s.kind]!).length > 1 ? `(${s.variant})` : ""}`);
    cases.push({ route: r, slots, label: `${r.method.toUpperCase()} ${r.path} [${parts.join(", ")}]` });
  }
}

function buildPath(r: AnyRoute, slots: Slot[], fixtures: Record<Owner, Fixtures>): string {
  let path = r.path;
  for (const s of slots) path = path.replace(`{${s.param}}`, encodeURIComponent(String(RESOURCE_VALUES[s.kind]![s.variant]!(fixtures[s.owner]))));
  return path;
}

async function call(api: ApiClient, r: AnyRoute, path: string, body: unknown): Promise<ApiResponse> {
  if (r.method === "get") return api.get(path);
  return r.body ? api[r.method](path, body) : api[r.method](path);
}

function expectNoMarkers(res: ApiResponse, f: Fixtures, label: string) {
  const text = JSON.stringify(res.body) ?? "";
  for (const m of f.markers) expect(text, `${label} leaks ${m}`).not.toContain(m);
}

// ---------------------------------------------------------------------------------------------

let A: Fixtures;
let B: Fixtures;
beforeAll(async () => {
  // Network management and proxy isolation on: the network routes get past "disabled" (409).
  t = await startTestInstance({ PLATFORM_NETWORK_MANAGEMENT: "true", PLATFORM_PROXY_ISOLATION: "true" });
  await initFixtures(t, keys);
  A = await buildFixtures("alpha");
  B = await buildFixtures("beta");
});
afterAll(async () => {
  await t?.close();
  keys.cleanup();
});

type Snapshot = Awaited<ReturnType<typeof snapshot>>;
/**
 * Both teams as the last refused request left them. Refusals change nothing, so one request's
 * "after" is the next one's "before" (half the snapshots); a failed check, or any test that may
 * change a team (those after the refusals), drops it.
 */
let lastSeen: { a: Snapshot; b: Snapshot } | undefined;

/** Runs one request of team B and checks: 404, no trace of A, neither team changed. */
async function expectRefusedByB(r: AnyRoute, path: string, body: unknown, label: string) {
  const before = lastSeen ?? { a: await snapshot(A), b: await snapshot(B) };
  lastSeen = undefined;
  const res = await call(B.api, r, path, body);
  expect(res.status, `${label} ${JSON.stringify(body) ?? ""} -> ${JSON.stringify(res.body)}`).toBe(404);
  expect(res.body, label).toEqual({ message: expect.any(String) });
  expectNoMarkers(res, A, label);
  const after = { a: await snapshot(A), b: await snapshot(B) };
  expect(after.a, `${label}: team A changed (${changedKeys(before.a, after.a).join(", ")})`).toEqual(before.a);
  expect(after.b, `${label}: team B changed (${changedKeys(before.b, after.b).join(", ")})`).toEqual(before.b);
  lastSeen = after;
}

describe("the matrix is complete", () => {
  it("knows how to build requests for every route", () => {
    expect(gaps, `cross-team matrix is missing entries:\n  ${gaps.join("\n  ")}\n`).toEqual([]);
  });

  it("has no stale entries", () => {
    const known = new Set(routes.map(keyOf));
    expect(Object.keys(BODIES).filter((k) => !known.has(k))).toEqual([]);
    expect(Object.keys(OWN_STATUS).filter((k) => !known.has(k))).toEqual([]);
    expect(Object.keys(PREPARE_OWN).filter((k) => !known.has(k))).toEqual([]);
    expect(Object.keys(QUERY_TARGETS).filter((k) => !known.has(k))).toEqual([]);
  });

  it("drives every route with path parameters in several combinations", () => {
    expect(paramRoutes.length).toBeGreaterThan(10);
    expect(new Set(cases.map((c) => keyOf(c.route)))).toEqual(new Set(paramRoutes.map(keyOf)));
  });
});

describe("team B with team A's objects in the path: 404, nothing changes", () => {
  it.each(cases.map((c) => [c.label, c] as const))("%s", async (label, c) => {
    const body = c.route.body ? BODIES[keyOf(c.route)]!.valid(B) : undefined;
    await expectRefusedByB(c.route, buildPath(c.route, c.slots, { A, B }), body, label);
  });
});

describe("team B naming team A's ids in a request body: 404, nothing changes", () => {
  const withForeign = covered.filter((r) => r.body && typeof BODIES[keyOf(r)]?.foreign === "function");
  it.each(withForeign.map((r) => [keyOf(r), r] as const))("%s", async (key, r) => {
    // The path names B's own objects: only the body points into team A.
    const path = buildPath(r, ownSlots(r, "B"), { A, B });
    const bodies = (BODIES[key]!.foreign as (a: Fixtures, b: Fixtures) => unknown[])(A, B);
    expect(bodies.length).toBeGreaterThan(0);
    for (const body of bodies) await expectRefusedByB(r, path, body, key);
  });
});

describe("team B naming team A's ids in the query string: 404, nothing changes", () => {
  const withTargets = covered.filter((r) => QUERY_TARGETS[keyOf(r)]);
  it.each(withTargets.map((r) => [keyOf(r), r] as const))("%s", async (key, r) => {
    const queries = QUERY_TARGETS[key]!.foreign(A, B);
    expect(queries.length).toBeGreaterThan(0);
    // No body: the query string alone points into team A.
    for (const query of queries) await expectRefusedByB(r, withQuery(buildPath(r, ownSlots(r, "B"), { A, B }), query), undefined, `${key} ?${new URLSearchParams(query)}`);
  });
});

describe("team B's reads never include team A's objects", () => {
  // GETs that change state (Coolify's GET forms of start, stop, restart, deploy) are actions,
  // driven with the other actions (positive control, fresh fixtures), not reads.
  const reads = covered.filter((r) => r.method === "get" && requiredScope(r) === "read");

  it.each(reads.map((r) => [keyOf(r), r] as const))("%s", async (key, r) => {
    const path = buildPath(r, ownSlots(r, "B"), { A, B });
    const plain = await B.api.get(path);
    expectOwnStatus(key, plain);
    expectNoMarkers(plain, A, path);
    const paged = await B.api.get(path, { page: 1, per_page: 100 });
    expectOwnStatus(key, paged);
    expectNoMarkers(paged, A, path);

    for (const q of Object.keys(r.query?.shape ?? {}).filter((name) => QUERY_REFS[name])) {
      const filtered = await B.api.get(path, { [q]: QUERY_REFS[q]!(A) });
      expect(filtered.status, `${path}?${q}=<team A's>`).toBe(200);
      expect(filtered.body.data, `${path}?${q}=<team A's>`).toEqual([]);
      expectNoMarkers(filtered, A, `${path}?${q}`);
    }
  });

  it("does list team B's own objects (the reads above are not empty by accident)", async () => {
    const text = JSON.stringify([
      (await B.api.get("/projects")).body,
      (await B.api.get("/permissions/project")).body,
      (await B.api.get("/permissions/environment")).body,
      (await B.api.get("/security/keys")).body,
      (await B.api.get("/servers")).body,
      (await B.api.get("/teams/current/members")).body,
      (await B.api.get(`/servers/${B.server.uuid}`)).body,
      (await B.api.get("/applications")).body,
      (await B.api.get(`/applications/${B.application.uuid}`)).body,
      (await B.api.get("/github-apps")).body,
      (await B.api.get("/deployments")).body,
      (await B.api.get("/databases")).body,
      (await B.api.get(`/databases/${B.database.uuid}`)).body,
      (await B.api.get(`/databases/${B.database.uuid}/envs`)).body,
      (await B.api.get(`/networks/${B.server.uuid}`)).body,
      (await B.api.get("/s3-storages")).body,
      (await B.api.get("/template-sources")).body,
      (await B.api.get(`/databases/${B.database.uuid}/backups`)).body,
      (await B.api.get(`/databases/${B.database.uuid}/backups/${B.backupSchedule.uuid}/executions`)).body,
      // services (issue 17)
      (await B.api.get("/services")).body,
      (await B.api.get(`/services/${B.service.uuid}`)).body,
      (await B.api.get(`/services/${B.service.uuid}/envs`)).body,
      (await B.api.get(`/services/${B.service.uuid}/storages`)).body,
      // DNS (issue 21)
      (await B.api.get("/dns-providers")).body,
      (await B.api.get("/domains")).body,
      // clusters (issue 20)
      (await B.api.get("/clusters")).body,
      (await B.api.get(`/clusters/${B.cluster.uuid}/nodes`)).body,
    ]);
    for (const m of B.markers) expect(text).toContain(m);
  });
});

describe("positive control: the same requests on a team's own objects succeed", () => {
  beforeAll(() => {
    lastSeen = undefined;
  });
  // Fresh fixtures per case, in another team, so a delete does not affect other cases.
  const all = covered.filter((r) => pathParams(r).length > 0 || r.body || QUERY_TARGETS[keyOf(r)] || requiredScope(r) !== "read");
  it.each(all.map((r) => [keyOf(r), r] as const))("%s", async (key, r) => {
    const C = await buildFixtures("gamma");
    await PREPARE_OWN[key]?.(C);
    const body = r.body ? BODIES[key]!.valid(C) : undefined;
    // A route that takes its targets in the query and a body gets them in the body (BODIES).
    const query = QUERY_TARGETS[key] && !r.body ? QUERY_TARGETS[key]!.valid(C) : undefined;
    const res = await call(C.api, r, withQuery(buildPath(r, ownSlots(r, "A"), { A: C, B: C }), query), body);
    expectOwnStatus(key, res);
  });
});

describe("paid features (RouteSpec.feature)", () => {
  // The fixture teams have every feature (above). A team without the route's feature is
  // stopped by the gate (402) before anything is looked up, with team A's ids as much as with
  // its own: the gate says nothing about another team's objects either.
  const gated = covered.filter((r) => r.feature !== undefined);
  it(`a team without the feature gets 402 on every gated route (${gated.length} today), team A unchanged`, { timeout: 180_000 }, async () => {
    const { api } = await t.newTeam("poor-team");
    // One request's "after" is the next one's "before", as for the refusals above.
    let before = await snapshot(A);
    for (const r of gated) {
      const body = r.body ? BODIES[keyOf(r)]!.valid(A) : undefined;
      const res = await call(api, r, buildPath(r, ownSlots(r, "A"), { A, B }), body);
      expect(res.status, keyOf(r)).toBe(402);
      expect(res.body, keyOf(r)).toEqual({ message: expect.stringContaining(r.feature!) });
      expectNoMarkers(res, A, keyOf(r));
      const after = await snapshot(A);
      expect(after, `${keyOf(r)}: team A changed (${changedKeys(before, after).join(", ")})`).toEqual(before);
      before = after;
    }
  });
});

describe("tokenless routes (inbound webhooks)", () => {
  it("a push signed with another application's secret, or with none, is refused and changes nothing", async () => {
    const tokenless = allRoutes.filter((r) => r.auth === "none");
    expect(tokenless.map(keyOf).sort()).toEqual(["post /webhooks/applications/{uuid}/{provider}", "post /webhooks/git-apps/{uuid}"]);
    const secretOfB = (await B.api.post(`/applications/${B.application.uuid}/webhook-secret`)).body.secret as string;
    const body = JSON.stringify({ ref: "refs/heads/main", after: "a".repeat(40), head_commit: { id: "a".repeat(40), message: "m" } });
    const before = await snapshot(A);
    for (const signature of [`sha256=${createHmac("sha256", secretOfB).update(body).digest("hex")}`, undefined]) {
      const res = await fetch(`${t.url}/api/v1/webhooks/applications/${A.application.uuid}/github`, {
        method: "POST",
        body,
        headers: { "Content-Type": "application/json", "X-GitHub-Event": "push", ...(signature ? { "X-Hub-Signature-256": signature } : {}) },
      });
      expect(res.status).toBe(401);
      const text = await res.text();
      for (const m of A.markers) expect(text).not.toContain(m);
    }
    // The git app's push webhook, signed with team B's git app secret, naming team A's git app.
    const signed = `sha256=${createHmac("sha256", `${B.tag}-whsec`).update(body).digest("hex")}`;
    const res = await fetch(`${t.url}/api/v1/webhooks/git-apps/${A.gitApp.uuid}`, {
      method: "POST",
      body,
      headers: { "Content-Type": "application/json", "X-GitHub-Event": "push", "X-Hub-Signature-256": signed },
    });
    expect(res.status).toBe(401);
    expect(await snapshot(A)).toEqual(before);
  });
});
