import { randomUUID } from "node:crypto";
import { expect } from "vitest";
import type { JobEnvelope } from "@capstan/shared";
import type { ApiClient, TeamFixture, TestInstance } from "../harness.js";
import type { KeyFactory } from "./ssh.js";
import { connectAgent, type ScriptedAgent } from "./fake-agent.js";

/** A team with a key, a server (agent token kept), its default destination and a project. */
export interface AppWorld {
  team: TeamFixture;
  api: ApiClient;
  keyUuid: string;
  server: { uuid: string; name: string; agentToken: string; destinationUuid: string };
  project: { uuid: string };
}

export async function ok<T = any>(res: Promise<{ status: number; body: T }>, what: string): Promise<T> {
  const r = await res;
  if (r.status >= 300) throw new Error(`${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function newServer(api: ApiClient, keyUuid: string, name = "web") {
  const s = await ok(api.post("/servers", { name, ip: "10.0.0.5", private_key_uuid: keyUuid }), "server");
  const detail = await ok(api.get(`/servers/${s.uuid}`), "server detail");
  return { uuid: s.uuid as string, name, agentToken: s.agent_token as string, destinationUuid: detail.destinations[0].uuid as string };
}

export async function appWorld(t: TestInstance, keys: KeyFactory): Promise<AppWorld> {
  const team = await t.newTeam();
  const key = await keys.generate("ed25519");
  const keyUuid = (await ok(team.api.post("/security/keys", { name: "deploy", private_key: key.privateKey }), "key")).uuid;
  const server = await newServer(team.api, keyUuid);
  const project = await ok(team.api.post("/projects", { name: "shop" }), "project");
  return { team, api: team.api, keyUuid, server, project: { uuid: project.uuid } };
}

/** The common create parameters pointing at the world's project, production environment and server. */
export function placement(w: AppWorld, environment = "production") {
  return { project_uuid: w.project.uuid, environment_name: environment, server_uuid: w.server.uuid, destination_uuid: w.server.destinationUuid };
}

export async function createImageApp(w: AppWorld, extra: Record<string, unknown> = {}, api = w.api): Promise<{ uuid: string; name: string; fqdn: string | null }> {
  return ok(api.post("/applications/dockerimage", { ...placement(w), docker_registry_image_name: "nginx:1.27", ...extra }), "image app");
}

/** Connects a scripted agent for the world's server and answers its prepare job. */
export async function connectServerAgent(t: TestInstance, w: AppWorld): Promise<ScriptedAgent> {
  const agent = await connectAgent(t.url, w.server.agentToken);
  await agent.hello();
  const prepare = await agent.nextJob();
  expect(prepare.type).toBe("server.prepare");
  await agent.outcome({ id: prepare.id, attempt: prepare.attempt, ok: true, result: { created: ["capstan"], existing: [] } });
  await until(async () => (await w.api.get(`/servers/${w.server.uuid}`)).body.status === "reachable");
  return agent;
}

/** A new world whose server has a connected scripted agent; `agents` keeps it for the suite's afterAll. */
export async function connectedWorld(t: TestInstance, keys: KeyFactory, agents: ScriptedAgent[]): Promise<{ w: AppWorld; agent: ScriptedAgent }> {
  const w = await appWorld(t, keys);
  const agent = await connectServerAgent(t, w);
  agents.push(agent);
  return { w, agent };
}

/** Takes the next job, checks its type, answers it. */
export async function answerNext(agent: ScriptedAgent, type: string, answer: { result: unknown } | { error: string }): Promise<JobEnvelope> {
  const job = await agent.nextJob(10_000);
  expect(job.type).toBe(type);
  if ("error" in answer) await agent.outcome({ id: job.id, attempt: job.attempt, ok: false, error: answer.error });
  else await agent.outcome({ id: job.id, attempt: job.attempt, ok: true, result: answer.result });
  return job;
}

export async function until(fn: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("condition not met in time");
}

/** Marks the application as deployed once (a finished deployment record), as a real deploy would leave it. */
export async function markDeployed(t: TestInstance, appUuid: string): Promise<void> {
  const db = t.instance.database.prisma;
  const app = await db.application.findUniqueOrThrow({ where: { uuid: appUuid } });
  await db.deployment.create({
    data: {
      uuid: randomUUID(),
      teamId: app.teamId,
      applicationId: app.id,
      serverId: app.serverId,
      status: "finished",
      trigger: "api",
      createdAt: new Date(),
      startedAt: new Date(),
      finishedAt: new Date(),
    },
  });
}
