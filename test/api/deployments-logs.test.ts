import { generateKeyPairSync } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeployPayload, type JobEnvelope } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { DeployWorld, deployResult, until, type ServerFixture } from "./support/deployments.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { KeyFactory } from "./support/ssh.js";
import { startFakeGitHub, type FakeGitHub } from "./support/fake-github.js";
import { DEPLOY_LOG_CAP_CHARS } from "../../control-plane/src/jobs/queue.js";

let t: TestInstance;
let team: TeamFixture;
let world: DeployWorld;
let server: ServerFixture;
let agent: ScriptedAgent;
const held: JobEnvelope[] = [];
const keys = new KeyFactory();
let gh: FakeGitHub;

beforeAll(async () => {
  // The fake GitHub listens on loopback, which a default instance refuses to call (lib/outbound.ts).
  t = await startTestInstance({ PLATFORM_ALLOW_PRIVATE_ENDPOINTS: "true" });
  gh = await startFakeGitHub();
  team = await t.newTeam();
  world = await new DeployWorld(t, team).init();
  server = await world.server("logs");
  agent = await world.agent(server, (job) => {
    held.push(job);
    return { hold: true };
  });
});
afterAll(async () => {
  world?.close();
  await gh?.close();
  await t?.close();
  keys.cleanup();
});

const db = () => t.instance.database.prisma;
const nextHeld = async (n: number) => {
  await until(async () => held.length >= n, 5000, `${n} deploy jobs`);
  return held[n - 1]!;
};
const finish = (job: JobEnvelope) => agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: deployResult() });

describe("deployment logs", () => {
  it("keep the most recent 1 MiB, appended batch by batch", async () => {
    const n = held.length + 1;
    const dep = await world.deploy(await world.imageApp(server, "chatty"));
    const job = await nextHeld(n);
    // 3 batches of 200 lines of ~4 KiB: about 2.4 MiB in all.
    const line = (b: number, i: number) => `batch ${b} line ${String(i).padStart(3, "0")} ` + "x".repeat(4000);
    for (let b = 0; b < 3; b++) {
      agent.progress(job.id, Array.from({ length: 200 }, (_, i) => line(b, i)));
      await until(async () => ((await db().job.findUniqueOrThrow({ where: { id: job.id } })).log.includes(`batch ${b} line 199`)), 5000, `batch ${b}`);
    }
    const stored = (await db().job.findUniqueOrThrow({ where: { id: job.id } })).log;
    expect(stored.length).toBe(DEPLOY_LOG_CAP_CHARS);
    expect(stored.endsWith(line(2, 199) + "\n")).toBe(true);
    expect(stored).not.toContain("batch 0 line 000 ");
    await finish(job);
    const detail = await world.waitFor(dep, "finished");
    expect(detail.logs).toBe(stored);
  });

  it("stream live as server-sent events until the deployment ends", async () => {
    const n = held.length + 1;
    const dep = await world.deploy(await world.imageApp(server, "streamed"));
    const job = await nextHeld(n);
    agent.progress(job.id, ["before the stream"]);
    await until(async () => (await team.api.get(`/deployments/${dep}`)).body.logs.includes("before the stream"));

    const res = await fetch(`${t.url}/api/v1/deployments/${dep}/logs/stream`, { headers: { Authorization: `Bearer ${team.token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    const readUntil = async (needle: string) => {
      const end = Date.now() + 5000;
      while (!text.includes(needle)) {
        if (Date.now() > end) throw new Error(`stream did not deliver ${needle}: ${text}`);
        const { value, done } = await reader.read();
        if (done) throw new Error(`stream ended before ${needle}: ${text}`);
        text += decoder.decode(value, { stream: true });
      }
    };
    await readUntil("data: before the stream\n\n");
    agent.progress(job.id, ["live line 1", "live line 2"]);
    await readUntil("data: live line 2\n\n");
    expect(text.indexOf("data: live line 1\n\n")).toBeLessThan(text.indexOf("data: live line 2\n\n"));
    await finish(job);
    await readUntil('event: end\ndata: {"status":"finished"}\n\n');
    expect((await reader.read()).done).toBe(true);

    // A finished deployment: its stored output, then the end at once.
    const again = await fetch(`${t.url}/api/v1/deployments/${dep}/logs/stream`, { headers: { Authorization: `Bearer ${team.token}` } });
    expect(await again.text()).toBe('data: before the stream\n\ndata: live line 1\n\ndata: live line 2\n\nevent: end\ndata: {"status":"finished"}\n\n');

    // Another team: 404, no stream.
    const other = await t.newTeam();
    const foreign = await fetch(`${t.url}/api/v1/deployments/${dep}/logs/stream`, { headers: { Authorization: `Bearer ${other.token}` } });
    expect(foreign.status).toBe(404);
    expect(await foreign.json()).toEqual({ message: "Deployment not found." });
  });
});

describe("secrets in job payloads", () => {
  it("the agent gets env values, the deploy key and the git app token; the job row at rest holds none of them", async () => {
    const envValue = "env-value-7f3c9a1d-visible-only-to-the-agent";
    const image = await world.imageApp(server, "secret-env");
    expect((await team.api.post(`/applications/${image}/envs`, { key: "API_KEY", value: envValue })).status).toBeLessThan(300);
    expect((await team.api.post(`/applications/${image}/envs`, { key: "BUILD_FLAG", value: "build-only-value", is_build_time: true })).status).toBeLessThan(300);
    expect((await team.api.post(`/applications/${image}/envs`, { key: "PREVIEW_ONLY", value: "preview-value", is_preview: true })).status).toBeLessThan(300);

    const deployKey = await keys.generate("ed25519");
    const keyUuid = (await team.api.post("/security/keys", { name: "deploy", private_key: deployKey.privateKey })).body.uuid;
    const byKey = await team.api.post("/applications/private-deploy-key", {
      project_uuid: world.projectUuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      private_key_uuid: keyUuid,
      git_repository: "git@git.example.test:org/private.git",
      git_branch: "main",
      build_pack: "builder_a",
    });
    expect(byKey.status, JSON.stringify(byKey.body)).toBe(201);

    const appKey = generateKeyPairSync("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs1", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } }).privateKey;
    gh.addApp(5151, appKey, [99]);
    const gitApp = await team.api.post("/github-apps", { name: "bot", app_id: 5151, installation_id: 99, private_key: appKey, api_url: gh.url, html_url: "https://github.example.test" });
    expect(gitApp.status, JSON.stringify(gitApp.body)).toBe(201);
    const byApp = await team.api.post("/applications/private-git-app", {
      project_uuid: world.projectUuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      git_app_uuid: gitApp.body.uuid,
      git_repository: "acme/private",
      git_branch: "main",
      build_pack: "builder_a",
    });
    expect(byApp.status, JSON.stringify(byApp.body)).toBe(201);

    const jobs: JobEnvelope[] = [];
    for (const app of [image, byKey.body.uuid, byApp.body.uuid]) {
      const n = held.length + 1;
      await world.deploy(app);
      const job = await nextHeld(n);
      jobs.push(job);
      await finish(job);
    }
    const [imageJob, keyJob, appJob] = jobs.map((j) => DeployPayload.parse(j.payload));
    expect(imageJob!.run.env).toEqual({ API_KEY: envValue, BUILD_FLAG: "build-only-value" });
    expect(imageJob!.build.env).toEqual({ BUILD_FLAG: "build-only-value" });
    expect(keyJob!.source).toEqual({ kind: "git", url: "git@git.example.test:org/private.git", branch: "main", commit: null, auth: { kind: "ssh", private_key: deployKey.privateKey } });
    const token = gh.issued[gh.issued.length - 1]!.token;
    expect(appJob!.source).toEqual({
      kind: "git",
      url: "https://github.example.test/acme/private.git",
      branch: "main",
      commit: null,
      auth: { kind: "token", username: "x-access-token", token },
    });

    const rows = await db().job.findMany({ where: { id: { in: jobs.map((j) => j.id) } } });
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row.payload.startsWith("v1:")).toBe(true);
      for (const secret of [envValue, "build-only-value", deployKey.secretLine, token]) expect(row.payload).not.toContain(secret);
    }
  });

  it("payloads written before sealing (plain JSON) are still delivered", async () => {
    const legacy = await db().job.create({
      data: { id: "legacy-plain-json-job", serverId: server.id, type: "containers.list", payload: "{}", deadlineAt: new Date(Date.now() + 60_000) },
    });
    const job = await agent.nextJob();
    expect(job).toMatchObject({ id: legacy.id, type: "containers.list", payload: {} });
    await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: { containers: [] } });
  });
});

describe("lists", () => {
  it("GET /deployments: newest first, paginated, members see only environments they can see", async () => {
    const staging = await team.api.post(`/projects/${world.projectUuid}/environments`, { name: "staging" });
    expect(staging.status).toBe(201);
    const stagingApp = await world.imageApp(server, "staging-app", { environment_name: "staging" });
    const prodApp = await world.imageApp(server, "prod-app");
    const a = await world.deploy(stagingApp);
    const b = await world.deploy(prodApp);
    const c = await world.deploy(stagingApp);

    const all = (await team.api.get("/deployments")).body.data;
    expect(all.slice(0, 3).map((d: any) => d.uuid)).toEqual([c, b, a]);
    expect(Object.keys(all[0]).sort()).toEqual(["application_name", "application_uuid", "branch", "commit", "commit_message", "created_at", "finished_at", "status", "uuid"]);
    const total = all.length;
    const page1 = await team.api.get("/deployments", { page: 1, per_page: 2 });
    expect(page1.body.meta).toEqual({ current_page: 1, per_page: 2, total, last_page: Math.ceil(total / 2) });
    expect(page1.body.data.map((d: any) => d.uuid)).toEqual([c, b]);
    expect((await team.api.get("/deployments", { page: 2, per_page: 2 })).body.data[0].uuid).toBe(a);

    const perApp = await team.api.get(`/deployments/applications/${stagingApp}`);
    expect(perApp.body.data.map((d: any) => d.uuid)).toEqual([c, a]);
    expect((await team.api.get(`/deployments/applications/${stagingApp}`, { per_page: 1 })).body).toMatchObject({ data: [{ uuid: c }], meta: { total: 2 } });

    // A member with a grant on staging only.
    const member = await t.newMember(team.teamId, "member");
    const env = await team.api.get(`/projects/${world.projectUuid}/staging`);
    expect((await team.api.post("/permissions/environment", { environment_id: env.body.id, user_id: member.userId, permission_level: "view_only" })).status).toBe(201);
    const seen = (await t.api(member.token).get("/deployments")).body;
    expect(seen.data.map((d: any) => d.uuid)).toEqual([c, a]);
    expect((await t.api(member.token).get("/deployments", { per_page: 1 })).body.meta.total).toBe(2);
    expect((await t.api(member.token).get(`/deployments/${b}`)).status).toBe(404);
    expect((await t.api(member.token).get(`/deployments/applications/${prodApp}`)).status).toBe(404);
    expect((await t.api(member.token).get(`/deployments/${a}`)).status).toBe(200);
  });
});
