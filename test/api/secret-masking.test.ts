import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppLogsPayload } from "@capstan/shared";
import { startTestInstance, type ApiClient, type TestInstance } from "./harness.js";
import { KeyFactory } from "./support/ssh.js";
import type { ScriptedAgent } from "./support/fake-agent.js";
import { answerNext, connectedWorld, createImageApp, ok, type AppWorld } from "./support/applications.js";
import { createDb } from "./support/standalone-databases.js";

/**
 * Issue 15, item 6 (secrets in logs and mutation responses): what the caller may not read is
 * masked on every response path; logs never carry a resource's known secrets.
 */
let t: TestInstance;
let w: AppWorld;
let agent: ScriptedAgent;
const keys = new KeyFactory();
const agents: ScriptedAgent[] = [];
/** An owner's token with the write scope only: it changes things, it may not read them. */
let writeOnly: ApiClient;

const PASSWORD = "pg-Secret-Passw0rd-123";
const ROOT = "root-Secret-Passw0rd-456";
const ENV_VALUE = "env-secret-value-789";

beforeAll(async () => {
  t = await startTestInstance();
  ({ w, agent } = await connectedWorld(t, keys, agents));
  writeOnly = t.api((await t.newMember(w.team.teamId, "owner", ["write"])).token);
});
afterAll(async () => {
  for (const a of agents) a.close();
  await t?.close();
  keys.cleanup();
});

describe("database logs", () => {
  it("mask the database's passwords and variable values, even when the agent does not", async () => {
    const db = await createDb(w, "mysql", { name: "logged", mysql_password: PASSWORD, mysql_root_password: ROOT });
    await ok(w.api.post(`/databases/${db.uuid}/envs`, { key: "API_TOKEN", value: ENV_VALUE }), "env");
    const reading = w.api.get(`/databases/${db.uuid}/logs`);
    // An agent that does not mask (an older one): the lines come back as the container wrote them.
    const job = await answerNext(agent, "app.logs", {
      result: { container: db.uuid, lines: [`2026-01-01T00:00:00Z user=mysql password=${PASSWORD}`, `2026-01-01T00:00:01Z root ${ROOT} token ${ENV_VALUE}`], truncated: false },
    });
    // The agent is told what to mask.
    expect(AppLogsPayload.parse(job.payload).secrets?.sort()).toEqual([PASSWORD, ROOT, ENV_VALUE].sort());
    const res = await reading;
    expect(res.status).toBe(200);
    expect(res.body.logs).toBe("2026-01-01T00:00:00Z user=mysql password=********\n2026-01-01T00:00:01Z root ******** token ********\n");
  });
});

describe("application logs", () => {
  it("mask the application's variable values", async () => {
    const app = await createImageApp(w, { name: "web" });
    await ok(w.api.post(`/applications/${app.uuid}/envs`, { key: "STRIPE_KEY", value: ENV_VALUE }), "env");
    const reading = w.api.get(`/applications/${app.uuid}/logs`);
    const job = await answerNext(agent, "app.logs", { result: { container: `${app.uuid}-1`, lines: [`2026-01-01T00:00:00Z using key ${ENV_VALUE}`], truncated: false } });
    expect(AppLogsPayload.parse(job.payload).secrets).toEqual([ENV_VALUE]);
    expect((await reading).body.logs).toBe("2026-01-01T00:00:00Z using key ********\n");
  });
});

describe("a write-only token sees secrets masked on every response path", () => {
  it("PATCH /databases/{uuid}: the detail in the answer has no password", async () => {
    const db = await createDb(w, "postgresql", { name: "patched", postgres_password: PASSWORD });
    const res = await writeOnly.patch(`/databases/${db.uuid}`, { description: "changed" });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain(PASSWORD);
    expect(res.body.data.internal_db_url).toBe(`postgres://postgres:********@${db.uuid}:5432/postgres`);
    expect(res.body.data.credentials.postgres_password).toBeNull();
    expect(res.body.data.credentials_masked).toBe(true);
    // A token that may read gets them, on the same path.
    const full = await w.api.patch(`/databases/${db.uuid}`, { description: "again" });
    expect(full.body.data.credentials.postgres_password).toBe(PASSWORD);
    expect(full.body.data.internal_db_url).toContain(PASSWORD);
  });

  it("POST /databases/{engine}: the URL in the answer has no password", async () => {
    const created = await writeOnly.post("/databases/postgresql", { project_uuid: w.project.uuid, environment_name: "production", server_uuid: w.server.uuid, destination_uuid: w.server.destinationUuid, instant_deploy: false, postgres_password: PASSWORD });
    expect(created.status).toBe(201);
    expect(created.body.internal_db_url).not.toContain(PASSWORD);
    expect(created.body.internal_db_url).toContain(":********@");
    // Readers with full access get it afterwards, as before.
    expect((await w.api.get(`/databases/${created.body.uuid}`)).body.credentials.postgres_password).toBe(PASSWORD);
    const withRead = await createDb(w, "postgresql", { postgres_password: PASSWORD });
    expect(withRead.internal_db_url).toContain(PASSWORD);
  });

  it("variable mutations answer without values", async () => {
    const app = await createImageApp(w);
    const res = await writeOnly.patch(`/applications/${app.uuid}/envs/bulk`, { variables: [{ key: "K", value: ENV_VALUE }] });
    expect(res.status).toBe(200);
    expect(JSON.stringify(res.body)).not.toContain(ENV_VALUE);
  });
});
