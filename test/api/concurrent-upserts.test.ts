/**
 * Race-free upserts (w5 follow-ups): requests that create-or-change rows by key, fired several
 * at a time with identical bodies, all succeed and leave exactly one row per key. On PostgreSQL
 * (CAPSTAN_TEST_PG_URL) they run really concurrently; before the per-owner transaction lock
 * (db/locks.ts) two of them could both miss the key and one fail on the unique index (a 409).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiResponse, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import { appWorld, createImageApp, newServer, ok, placement, type AppWorld } from "./support/applications.js";

let t: TestInstance;
let w: AppWorld;
const keys = new KeyFactory();
/** How many identical requests go out at once: enough that, unguarded, two miss the key together. */
const AT_ONCE = 12;

beforeAll(async () => {
  t = await startTestInstance({ PLATFORM_NETWORK_MANAGEMENT: "true" });
  w = await appWorld(t, keys);
  await t.instance.admin.setTeamFeatures(w.team.teamId, { enable: ["REGISTRY_MANAGEMENT"] });
});
afterAll(async () => {
  await t?.close();
  keys.cleanup();
});

const prisma = () => t.instance.database.prisma;
let round = 0;

async function allAtOnce(fire: () => Promise<ApiResponse>): Promise<void> {
  const answers = await Promise.all(Array.from({ length: AT_ONCE }, fire));
  expect(answers.map((a) => `${a.status} ${a.status === 200 ? "" : JSON.stringify(a.body)}`)).toEqual(answers.map(() => "200 "));
}

describe("concurrent identical variable upserts all succeed, one row per key", () => {
  const owners = {
    application: async () => ({ uuid: (await createImageApp(w, { name: `race-app-${++round}` })).uuid, where: (uuid: string) => ({ application: { uuid } }) }),
    database: async () => ({
      uuid: (await ok(w.api.post("/databases/postgresql", { ...placement(w), name: `race-db-${++round}`, postgres_password: "race-secret", instant_deploy: false }), "database")).uuid as string,
      where: (uuid: string) => ({ database: { uuid } }),
    }),
    service: async () => ({
      uuid: (await ok(w.api.post("/services", { ...placement(w), type: "uptime-kuma", name: `race-svc-${++round}` }), "service")).uuid as string,
      where: (uuid: string) => ({ service: { uuid } }),
    }),
  };

  for (const [kind, make] of Object.entries(owners)) {
    it(`PATCH /${kind}s/{uuid}/envs/bulk`, async () => {
      const owner = await make();
      const before = await prisma().envVar.count({ where: owner.where(owner.uuid) });
      await allAtOnce(() => w.api.patch(`/${kind}s/${owner.uuid}/envs/bulk`, { variables: [{ key: "RACE_A", value: "1" }, { key: "RACE_B", value: "2" }] }));
      const rows = await prisma().envVar.findMany({ where: { ...owner.where(owner.uuid), key: { in: ["RACE_A", "RACE_B"] } } });
      expect(rows.map((r) => r.key).sort()).toEqual(["RACE_A", "RACE_B"]);
      expect(await prisma().envVar.count({ where: owner.where(owner.uuid) })).toBe(before + 2);
    });
  }

  it("PATCH /services/{uuid}/envs (create or change by key)", async () => {
    const owner = await owners.service();
    await allAtOnce(() => w.api.patch(`/services/${owner.uuid}/envs`, { key: "RACE_ONE", value: "x" }));
    expect(await prisma().envVar.count({ where: { ...owner.where(owner.uuid), key: "RACE_ONE" } })).toBe(1);
  });
});

describe("concurrent identical registry server assignments", () => {
  it("PATCH /registries/{id} with the same server_ids: all succeed, each server assigned once", async () => {
    const a = await newServer(w.api, w.keyUuid, "race-a");
    const b = await newServer(w.api, w.keyUuid, "race-b");
    const id = (
      await ok(w.api.post("/registries", { name: "race", type: "custom", url: "https://registry.example.com", credentials: { username: "ci", password: "pw" } }), "registry")
    ).data.id as number;
    await allAtOnce(() => w.api.patch(`/registries/${id}`, { server_ids: [a.uuid, b.uuid] }));
    const assigned = await prisma().registryServer.findMany({ where: { registryId: id } });
    expect(assigned.length).toBe(2);
    expect((await ok(w.api.get(`/registries/${id}`), "registry")).servers.map((s: { uuid: string }) => s.uuid).sort()).toEqual([a.uuid, b.uuid].sort());
  });
});
