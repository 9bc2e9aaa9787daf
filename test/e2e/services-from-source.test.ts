/**
 * A service from a template source's template on the real engine (issue 17, spec 4.6 and 4.11;
 * w6/svcproxy): a local git repository (smart HTTP on loopback) holds a template, the source's
 * sync stores it, POST /services with its name creates the service, and it starts through the
 * agent with its generated password and the source's compose file; DELETE removes what it ran.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GitRepos, startHttpGit, type HttpGitServer } from "../support/git-server.js";
import { removeLabelled, sh, until } from "./support/kit.js";
import { startLocalStack, type LocalStack } from "./support/local-server.js";
import { serviceAction, serviceLeftovers } from "./support/services.js";

const RUN = randomBytes(3).toString("hex");
const DEPLOY_TIMEOUT_S = 180;

const TEMPLATE = `# documentation: https://example.org/docs
# slogan: A static page served from a template source.
# tags: test
# port: 8080

services:
  page:
    image: capstan-test/busybox:latest
    command: ["sh", "-c", "mkdir -p /www && echo from-source > /www/index.html && exec httpd -f -p 8080 -h /www"]
    environment:
      - SERVICE_URL_PAGE_8080
      - PAGE_PASSWORD=\${SERVICE_PASSWORD_PAGE}
    volumes:
      - page-data:/data

volumes:
  page-data:
`;

let stack: LocalStack;
let repos: GitRepos;
let http: HttpGitServer;


beforeAll(async () => {
  repos = await GitRepos.create();
  await repos.repo("tpl.git", { [`page-${RUN}.yaml`]: TEMPLATE });
  http = await startHttpGit(repos.base);
  stack = await startLocalStack({ name: `svc-source-${RUN}`, deployTimeoutS: DEPLOY_TIMEOUT_S, agentLabels: `capstan.test=1,capstan.test.run=svc-source-${RUN}` });
}, 300_000);

afterAll(async () => {
  await stack?.close();
  // What a failed run left behind (the test deletes its service on success).
  await removeLabelled(`svc-source-${RUN}`);
  for (const n of (await sh("docker", ["network", "ls", "-q", "--filter", `label=capstan.test.run=svc-source-${RUN}`])).split("\n").filter(Boolean)) await sh("docker", ["network", "rm", n]).catch(() => {});
  await http?.stop();
  await repos?.cleanup();
});

describe("a service from a template source's template", () => {
  it("is created from the synced template and starts on the real engine with its generated password", async () => {
    const { team, t, server, project } = stack;
    const src = await team.api.post("/template-sources", { name: `src-${RUN}`, repository_url: http.url("tpl.git") });
    expect(src.status, JSON.stringify(src.body)).toBe(201);
    await t.instance.services.templateSources.idle();
    const synced = (await team.api.get(`/template-sources/${src.body.data.uuid}`)).body;
    expect(synced.sync_status, synced.sync_error).toBe("synced");

    const created = await team.api.post("/services", {
      project_uuid: project,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: server.destination,
      type: `page-${RUN}`,
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const uuid = created.body.uuid as string;
    const detail = (await team.api.get(`/services/${uuid}`)).body;
    expect(detail.template_source).not.toBeNull();
    expect(detail.applications.map((c: { name: string }) => c.name)).toEqual(["page"]);
    const password = (detail.envs as { key: string; value: string }[]).find((e) => e.key === "SERVICE_PASSWORD_PAGE")!.value;
    expect(password).toMatch(/^.{16,}$/);

    await serviceAction(team.api, uuid, "start", /^running/, DEPLOY_TIMEOUT_S * 1000);
    const container = `${uuid}-page`;
    expect((await sh("docker", ["exec", container, "wget", "-qO-", "http://127.0.0.1:8080/"])).trim()).toBe("from-source");
    const env = JSON.parse(await sh("docker", ["inspect", "--format", "{{json .Config.Env}}", container])) as string[];
    expect(env).toContain(`PAGE_PASSWORD=${password}`);

    const removed = await team.api.delete(`/services/${uuid}?delete_volumes=true`);
    expect(removed.status, JSON.stringify(removed.body)).toBe(200);
    await until("the service's containers and volumes to be gone", async () => {
      const left = await serviceLeftovers(uuid);
      return left.containers.length === 0 && left.volumes.length === 0;
    }, 60_000, 250);
  });
});
