import { expect } from "vitest";
import type { ApiClient, TeamFixture, TestInstance } from "../harness.js";
import { KeyFactory } from "./ssh.js";
import { connectAgent, type JobScript, type ScriptedAgent } from "./fake-agent.js";

/** Polls until the check holds (every 50 ms, at most `ms`). */
export async function until(check: () => Promise<boolean>, ms = 10_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} not met within ${ms} ms`);
}

export const deployResult = (commit: string | null = null, status = "running:healthy") => ({
  image: "registry.example.test/app:1",
  container: "app-container",
  commit,
  status,
});

export interface ServerFixture {
  uuid: string;
  id: number;
  agentToken: string;
  destinationUuid: string;
}

/**
 * A team's project, a server and (unless connect is false) its scripted agent, connected and
 * done with its prepare job: what a deployment needs besides an application.
 */
export class DeployWorld {
  private readonly keys = new KeyFactory();
  private readonly open: { close(): void }[] = [];
  projectUuid = "";
  private keyUuid = "";

  constructor(
    readonly t: TestInstance,
    readonly team: TeamFixture,
  ) {}

  async init(): Promise<this> {
    const key = await this.keys.generate("ed25519");
    const k = await this.team.api.post("/security/keys", { name: "k", private_key: key.privateKey });
    expect(k.status).toBe(201);
    this.keyUuid = k.body.uuid;
    const p = await this.team.api.post("/projects", { name: "deploy-project" });
    expect(p.status).toBe(201);
    this.projectUuid = p.body.uuid;
    return this;
  }

  async server(name = "srv"): Promise<ServerFixture> {
    const s = await this.team.api.post("/servers", { name, ip: "10.0.0.9", private_key_uuid: this.keyUuid });
    expect(s.status).toBe(201);
    const detail = await this.team.api.get(`/servers/${s.body.uuid}`);
    const row = await this.t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: s.body.uuid } });
    return { uuid: s.body.uuid, id: row.id, agentToken: s.body.agent_token, destinationUuid: detail.body.destinations[0].uuid };
  }

  /** Connects a scripted agent that answers prepare jobs and, with a script, app.deploy jobs. */
  async agent(server: ServerFixture, deploy?: JobScript): Promise<ScriptedAgent> {
    const a = await connectAgent(this.t.url, server.agentToken);
    this.open.push(a);
    a.serve("server.prepare", () => ({ ok: true, result: { created: [], existing: ["capstan"] } }));
    if (deploy) a.serve("app.deploy", deploy);
    await a.hello();
    await until(async () => (await this.team.api.get(`/servers/${server.uuid}`)).body.status === "reachable", 5000, "server reachable");
    return a;
  }

  /** An application from an image (POST /applications/dockerimage), in the project's production environment. */
  async imageApp(server: ServerFixture, name: string, extra: Record<string, unknown> = {}, api: ApiClient = this.team.api): Promise<string> {
    const r = await api.post("/applications/dockerimage", {
      project_uuid: this.projectUuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      name,
      docker_registry_image_name: "registry.example.test/app:1",
      ports_exposes: "8080",
      ...extra,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.uuid;
  }

  /** An application from a public git repository (webhooks need a branch). */
  async gitApp(server: ServerFixture, name: string, branch = "main"): Promise<string> {
    const r = await this.team.api.post("/applications/public", {
      project_uuid: this.projectUuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destinationUuid,
      name,
      git_repository: "https://git.example.test/org/repo.git",
      git_branch: branch,
      build_pack: "builder_a",
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body.uuid;
  }

  async deploy(appUuid: string, body?: unknown, api: ApiClient = this.team.api): Promise<string> {
    const r = await api.post(`/applications/${appUuid}/deploy`, body);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body).toEqual({ message: "Deployment queued.", deployment_uuid: expect.any(String) });
    return r.body.deployment_uuid;
  }

  async status(deploymentUuid: string): Promise<string> {
    return (await this.team.api.get(`/deployments/${deploymentUuid}`)).body.status;
  }

  async waitFor(deploymentUuid: string, status: string, ms = 10_000): Promise<any> {
    let last: any;
    await until(
      async () => {
        last = (await this.team.api.get(`/deployments/${deploymentUuid}`)).body;
        return last.status === status;
      },
      ms,
      `deployment ${status} (last: ${JSON.stringify(last?.status)} ${last?.reason ?? ""})`,
    );
    return last;
  }

  close(): void {
    for (const o of this.open) o.close();
    this.keys.cleanup();
  }
}
