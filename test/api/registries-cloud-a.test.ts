/**
 * cloud_a registries' tokens (issue 18, docs/registries.md): the control plane exchanges the
 * access key for a registry token through the vendor's GetAuthorizationToken call, here a local
 * stand-in speaking its request and response shapes and checking the Signature Version 4 with
 * the vendor SDK's signer (test/support/fake-cloud-a.ts). A fake clock drives expiry: tokens are
 * refreshed 6 hours into their 12, by one of two replicas ticking together, and at once when a
 * pull answered 401, whichever job pulled (application deploys and builds, databases, services:
 * one path, the jobs' outcomes). The secret access key and the tokens never appear in a
 * response or in a plaintext column.
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { JobType } from "@capstan/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { startReplica, type Replica } from "./support/replica.js";
import { KeyFactory } from "./support/ssh.js";
import { connectAgent, type ScriptedAgent } from "./support/fake-agent.js";
import { startFakeCloudA, type FakeCloudA } from "../support/fake-cloud-a.js";
import { refusedPullRegistry } from "../../control-plane/src/services/registries/refused-pull.js";
import { TOKEN_TICK_MS } from "../../control-plane/src/services/registries/index.js";
import { outcomeMap } from "../../control-plane/src/jobs/outcome-map.js";
import type { EndedJob } from "../../control-plane/src/jobs/outcomes.js";

const KEY_ID = `AKIA${randomBytes(8).toString("hex").toUpperCase()}`;
const SECRET = `sk-${randomBytes(16).toString("hex")}`;
const REGION = "eu-central-1";
const REGISTRY = "123456789012.dkr.ecr.eu-central-1.amazonaws.com";

let now = new Date("2026-11-27T00:00:00.000Z");
const clock = () => now;
let fake: FakeCloudA;
let t: TestInstance;
let replica: Replica;
let team: TeamFixture;
let agent: ScriptedAgent;
let serverUuid = "";
const keys = new KeyFactory();
const seen: string[] = [];
/** The control plane's log (debug level). */
const logLines: string[] = [];

const cloud = (secret = SECRET) => ({
  name: `cloud-${randomBytes(3).toString("hex")}`,
  type: "cloud_a",
  url: `https://${REGISTRY}`,
  credentials: { cloud_access_key_id: KEY_ID, cloud_secret_access_key: secret, cloud_region: REGION },
});

async function nextLogin() {
  for (;;) {
    const job = await agent.nextJob();
    if (job.type === "registry.login") return job as typeof job & { payload: { registry: string; username: string; password: string; fingerprint: string } };
  }
}

beforeAll(async () => {
  fake = await startFakeCloudA({ accessKeyId: KEY_ID, secretAccessKey: SECRET, region: REGION }, clock);
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true", PLATFORM_REGISTRY_CLOUD_A_ENDPOINT: fake.url }, { logTo: { write: (line) => void logLines.push(line) } });
  replica = await startReplica(t);
  t.instance.services.registries.clock = clock;
  replica.instance.services.registries.clock = clock;
  team = await t.newTeam();
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: ["REGISTRY_MANAGEMENT"] });
  const key = (await team.api.post("/security/keys", { name: "k", private_key: (await keys.generate("ed25519")).privateKey })).body;
  const server = (await team.api.post("/servers", { name: "cloud-web", ip: "10.0.0.9", private_key_uuid: key.uuid })).body;
  serverUuid = server.uuid;
  agent = await connectAgent(t.url, server.agent_token);
  await agent.hello();
}, 120_000);

afterAll(async () => {
  agent?.close();
  await replica?.close();
  await t?.close();
  await fake?.stop();
  keys.cleanup();
});

describe("cloud_a: the vendor's token exchange, refreshed before expiry and after a 401", () => {
  let id = 0;
  let first = "";

  it("sync exchanges the access key for a registry token and logs the server in with it", async () => {
    const created = await team.api.post("/registries", cloud());
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.data.id;
    await team.api.patch(`/registries/${id}`, { server_ids: [serverUuid] });
    const sync = await team.api.post(`/registries/${id}/sync`);
    seen.push(JSON.stringify(sync.body));
    expect(sync.body.count).toBe(1);
    expect(fake.issued).toHaveLength(1);
    first = fake.issued[0]!;
    const job = await nextLogin();
    expect(job.payload).toMatchObject({ registry: REGISTRY, username: "AWS", password: first });
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { registry: REGISTRY, fingerprint: job.payload.fingerprint, status: "Login Succeeded" } });
    const row = await t.instance.database.prisma.registry.findUniqueOrThrow({ where: { id } });
    expect(row.tokenExpiresAt?.toISOString()).toBe("2026-11-27T12:00:00.000Z");
    expect(JSON.stringify(row)).not.toContain(first);
    expect(JSON.stringify(row)).not.toContain(SECRET);
    const detail = await team.api.get(`/registries/${id}`);
    seen.push(JSON.stringify(detail.body));
    expect(detail.body.username).toBe(`****${KEY_ID.slice(-4)}`);
  });

  it("refreshes 6 hours into the token's 12, once with two replicas ticking together", async () => {
    expect(id).toBeGreaterThan(0);
    now = new Date("2026-11-27T05:59:00.000Z");
    expect(await t.instance.services.registries.refreshDueTokens()).toEqual([]);
    expect(fake.issued).toHaveLength(1);

    now = new Date("2026-11-27T06:00:30.000Z");
    const [a, b] = await Promise.all([t.instance.services.registries.refreshDueTokens(), replica.instance.services.registries.refreshDueTokens()]);
    expect([...a, ...b]).toEqual([id]);
    expect(fake.issued).toHaveLength(2);
    const job = await nextLogin();
    expect(job.payload.password).toBe(fake.issued[1]);
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { registry: REGISTRY, fingerprint: job.payload.fingerprint, status: "Login Succeeded" } });
    expect((await t.instance.database.prisma.registry.findUniqueOrThrow({ where: { id } })).tokenExpiresAt?.toISOString()).toBe("2026-11-27T18:00:30.000Z");
    // A tick later nothing is due.
    now = new Date("2026-11-27T06:05:00.000Z");
    expect(await t.instance.services.registries.refreshDueTokens()).toEqual([]);
    expect(fake.issued).toHaveLength(2);
  });

  it("a pull that answered 401 gets a new token at once", async () => {
    const reason = `image ${REGISTRY}/team/app:3 is not on this server and could not be pulled: pull image ${REGISTRY}/team/app:3: (HTTP code 500) server error - Head "https://${REGISTRY}/v2/team/app/manifests/3": no basic auth credentials`;
    expect(refusedPullRegistry(reason)).toBe(REGISTRY);
    expect(refusedPullRegistry(`pull image ${REGISTRY}/team/app:3: manifest unknown`)).toBeNull();
    // compose's pulls (services) say it in the daemon's words.
    expect(refusedPullRegistry(`docker compose pull failed (exit 18): web Error Head "https://${REGISTRY}/v2/team/app/manifests/3": unauthorized: authentication required`)).toBe(REGISTRY);
    expect(refusedPullRegistry(`docker compose pull failed (exit 18): web Error Head "https://${REGISTRY}/v2/team/app/manifests/3": manifest unknown`)).toBeNull();
    expect(refusedPullRegistry("container exited with code 1")).toBeNull();
    now = new Date("2026-11-27T07:00:00.000Z");
    expect(await t.instance.services.registries.pullUnauthorized(team.teamId, REGISTRY)).toBe(true);
    expect(fake.issued).toHaveLength(3);
    const job = await nextLogin();
    expect(job.payload.password).toBe(fake.issued[2]);
    // Another team's 401 for the same address refreshes nothing of this team's.
    const other = await t.newTeam();
    expect(await t.instance.services.registries.pullUnauthorized(other.teamId, REGISTRY)).toBe(false);
    expect(fake.issued).toHaveLength(3);
  });

  it("every job that pulls takes the same path: a pull the registry refused refreshes the token at once (application, build, database, service)", async () => {
    const serverId = (await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: serverUuid } })).id;
    const outcomes = outcomeMap(t.instance.services);
    const engine = `image ${REGISTRY}/team/app:3 is not on this server and could not be pulled: pull image ${REGISTRY}/team/app:3: (HTTP code 500) server error - Head "https://${REGISTRY}/v2/team/app/manifests/3": no basic auth credentials`;
    const build = `build failed: Head "https://${REGISTRY}/v2/team/base/manifests/1": unauthorized: authentication required`;
    const compose = `docker compose pull failed (exit 18): web Error Head "https://${REGISTRY}/v2/team/app/manifests/3": no basic auth credentials`;
    const kinds: [JobType, string][] = [
      ["app.deploy", engine],
      ["app.build", build],
      ["app.action", engine],
      ["db.deploy", engine],
      ["db.action", engine],
      ["service.deploy", compose],
      ["service.action", compose],
    ];
    const ended = (type: JobType, status: string, error: string | null): EndedJob =>
      ({ id: randomUUID(), serverId, type, payload: "null", status, attempt: 1, deadlineAt: now, result: null, error, finishedAt: now });
    for (const [i, [type, reason]] of kinds.entries()) {
      // Each a tick after the last refresh (a claim holds for one tick).
      now = new Date(Date.parse("2026-11-27T08:00:00.000Z") + i * 2 * TOKEN_TICK_MS);
      const before = fake.issued.length;
      await outcomes[type]!(ended(type, "failed", reason) as never);
      expect(fake.issued, `${type}: ${reason}`).toHaveLength(before + 1);
      const job = await nextLogin();
      expect(job.payload.password).toBe(fake.issued[before]);
      // Not a refusal, or not a failure: nothing is exchanged.
      now = new Date(now.getTime() + TOKEN_TICK_MS + 1000);
      await outcomes[type]!(ended(type, "failed", `pull image ${REGISTRY}/team/app:3: manifest unknown`) as never);
      await outcomes[type]!(ended(type, "succeeded", null) as never);
      expect(fake.issued, type).toHaveLength(before + 1);
    }
    // Twice within a tick (a redelivered outcome, or two replicas): one exchange.
    now = new Date("2026-11-27T09:00:00.000Z");
    const before = fake.issued.length;
    await Promise.all([outcomes["db.deploy"]!(ended("db.deploy", "failed", engine) as never), outcomes["service.deploy"]!(ended("service.deploy", "failed", compose) as never)]);
    expect(fake.issued).toHaveLength(before + 1);
    await nextLogin();
  });

  it("a wrong secret: the test and the sync say the vendor's reason, and nothing is dispatched", async () => {
    const created = await team.api.post("/registries", cloud(`wrong-${randomBytes(8).toString("hex")}`));
    const wrong = created.body.data.id;
    const res = await team.api.post(`/registries/${wrong}/test`);
    seen.push(JSON.stringify(res.body));
    expect(res.status).toBe(200);
    expect(res.body.authenticated).toBe(false);
    expect(res.body.error).toMatch(/^The token exchange answered 403 InvalidSignatureException: The request signature we calculated does not match/);
    await team.api.patch(`/registries/${wrong}`, { server_ids: [serverUuid] });
    expect((await team.api.post(`/registries/${wrong}/sync`)).body.count).toBe(0);
    const detail = await team.api.get(`/registries/${wrong}`);
    expect(detail.body.servers[0]).toMatchObject({ sync_status: "failed", error: expect.stringMatching(/InvalidSignatureException/) });
  });

  it("no response and no line of the control plane's log (debug level) carried the secret access key or a token", () => {
    const log = logLines.join("");
    expect(log).toContain("/registries");
    for (const all of [seen.join("\n"), log]) {
      expect(all).not.toContain(SECRET);
      for (const token of fake.issued) expect(all).not.toContain(token);
    }
  });
});
