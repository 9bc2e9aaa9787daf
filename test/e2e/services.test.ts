/**
 * Services lifecycle on a real engine (issue 17, spec 4.6): a service created from a compose
 * file, started, restarted, stopped and deleted through the public API by a real control plane
 * and agent on this machine's engine. `redis:7` is classified as the service's database from its
 * upstream image and runs a local image through PLATFORM_TEMPLATE_IMAGE_OVERRIDES (no pulls
 * here). Generated passwords reach the containers as stored and stay byte-identical across a
 * restart that recreates them; DELETE with delete_volumes leaves no container, network or volume.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { TeamFixture } from "../api/harness.js";
import { sh, until } from "./support/kit.js";
import { startLocalStack, type LocalStack } from "./support/local-server.js";
import { envOf, serviceContainers as containers, serviceAction, serviceLeftovers } from "./support/services.js";

const RUN = randomBytes(3).toString("hex");
const DEPLOY_TIMEOUT_S = 180;
const BUSYBOX = "capstan-test/busybox:latest";

let stack: LocalStack;
let team: TeamFixture;
let server: { uuid: string; destination: string };
let project: string;

const COMPOSE = `services:
  web:
    image: ${BUSYBOX}
    command: ["sh", "-c", "mkdir -p /www /data && echo web-ok > /www/index.html && exec httpd -f -p 8080 -h /www"]
    environment:
      - ADMIN_PASSWORD=\${SERVICE_PASSWORD_ADMIN}
    volumes:
      - web-data:/data
  cache:
    image: redis:7
    command: ["sh", "-c", "exec sleep 100000"]
    environment:
      - CACHE_PASSWORD=\${SERVICE_PASSWORD_CACHE}
volumes:
  web-data:
`;

const act = (uuid: string, action: "start" | "restart" | "stop", want: RegExp) => serviceAction(team.api, uuid, action, want, DEPLOY_TIMEOUT_S * 1000);

beforeAll(async () => {
  stack = await startLocalStack({ name: `services-${RUN}`, deployTimeoutS: DEPLOY_TIMEOUT_S, env: { PLATFORM_TEMPLATE_IMAGE_OVERRIDES: JSON.stringify({ redis: BUSYBOX }) } });
  ({ team, server, project } = stack);
}, 300_000);

afterAll(async () => {
  await stack?.close();
});

describe("a compose service on the real engine", () => {
  it("starts with its generated passwords, keeps them across a restart, stops, and is deleted with nothing left behind", async () => {
    const created = await team.api.post("/services", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destination,
      docker_compose_raw: COMPOSE,
      name: `stack-${RUN}`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = created.body.uuid as string;
    const detail = (await team.api.get(`/services/${uuid}`)).body;
    expect(detail.applications.map((c: { name: string }) => c.name)).toEqual(["web"]);
    expect(detail.databases.map((c: { name: string }) => c.name)).toEqual(["cache"]);
    const stored = Object.fromEntries((detail.envs as { key: string; value: string }[]).map((e) => [e.key, e.value]));
    expect(stored.SERVICE_PASSWORD_ADMIN).toMatch(/^.{16,}$/);

    await act(uuid, "start", /^running/);
    const first = await containers(uuid);
    expect(first.map((c) => [c.name, c.state])).toEqual([
      [`${uuid}-cache`, "running"],
      [`${uuid}-web`, "running"],
    ]);
    expect(envOf(first[1]!, "ADMIN_PASSWORD")).toBe(stored.SERVICE_PASSWORD_ADMIN);
    expect(envOf(first[0]!, "CACHE_PASSWORD")).toBe(stored.SERVICE_PASSWORD_CACHE);
    expect((await sh("docker", ["exec", `${uuid}-web`, "wget", "-qO-", "http://127.0.0.1:8080/"])).trim()).toBe("web-ok");
    await sh("docker", ["exec", `${uuid}-web`, "sh", "-c", "echo kept > /data/marker"]);

    // A restart recreates the containers: new ids, the same passwords, the volume's data kept.
    await act(uuid, "restart", /^running/);
    const second = await containers(uuid);
    expect(second.map((c) => c.state)).toEqual(["running", "running"]);
    expect(second.map((c) => c.id)).not.toEqual(first.map((c) => c.id));
    expect(envOf(second[1]!, "ADMIN_PASSWORD")).toBe(stored.SERVICE_PASSWORD_ADMIN);
    expect(envOf(second[0]!, "CACHE_PASSWORD")).toBe(stored.SERVICE_PASSWORD_CACHE);
    expect((await sh("docker", ["exec", `${uuid}-web`, "cat", "/data/marker"])).trim()).toBe("kept");

    await act(uuid, "stop", /^exited/);
    expect((await containers(uuid)).every((c) => c.state !== "running")).toBe(true);

    expect((await serviceLeftovers(uuid)).volumes.length).toBeGreaterThan(0);
    const removed = await team.api.delete(`/services/${uuid}?delete_volumes=true`);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    await until("the service's containers to be gone", async () => (await containers(uuid)).length === 0, 60_000, 250);
    await until(
      "the service's volumes and network to be gone",
      async () => {
        const left = await serviceLeftovers(uuid);
        return left.volumes.length === 0 && left.networks.length === 0;
      },
      60_000,
      250,
    );
    expect((await team.api.get(`/services/${uuid}`)).status).toBe(404);
  });
});
