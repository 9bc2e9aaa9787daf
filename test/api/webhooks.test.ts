import { createHmac, generateKeyPairSync, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeployPayload, type JobEnvelope, type WebhookProvider } from "@capstan/shared";
import { startTestInstance, type TeamFixture, type TestInstance } from "./harness.js";
import { DeployWorld, until, type ServerFixture } from "./support/deployments.js";

let t: TestInstance;
let team: TeamFixture;
let world: DeployWorld;
let server: ServerFixture;

beforeAll(async () => {
  t = await startTestInstance();
  team = await t.newTeam();
  world = await new DeployWorld(t, team).init();
  server = await world.server("hooks");
});
afterAll(async () => {
  world?.close();
  await t?.close();
});

const db = () => t.instance.database.prisma;
const SHA = "0123456789abcdef0123456789abcdef01234567";
const hmac = (secret: string, body: string) => createHmac("sha256", secret).update(body).digest("hex");

/** A push event of the provider, as it sends it: body and the headers that sign and name it. */
function push(provider: WebhookProvider, secret: string, opts: { branch?: string; sha?: string; message?: string; event?: string; ref?: string } = {}) {
  const branch = opts.branch ?? "main";
  const sha = opts.sha ?? SHA;
  const message = opts.message ?? `Fix the thing (${provider})`;
  const ref = opts.ref ?? `refs/heads/${branch}`;
  let payload: unknown;
  const headers: Record<string, string> = { "Content-Type": "application/json" };
  switch (provider) {
    case "github":
      payload = { ref, before: "0".repeat(40), after: sha, head_commit: { id: sha, message }, repository: { full_name: "org/repo" } };
      headers["X-GitHub-Event"] = opts.event ?? "push";
      break;
    case "gitea":
      payload = { ref, before: "0".repeat(40), after: sha, head_commit: { id: sha, message }, commits: [{ id: sha, message }] };
      headers["X-Gitea-Event"] = opts.event ?? "push";
      break;
    case "gitlab":
      payload = { object_kind: "push", ref, before: "0".repeat(40), after: sha, checkout_sha: sha, commits: [{ id: "1".repeat(40), message: "older" }, { id: sha, message }] };
      headers["X-Gitlab-Event"] = opts.event ?? "Push Hook";
      break;
    case "bitbucket":
      payload = { push: { changes: [{ old: null, new: ref.startsWith("refs/tags/") ? { type: "tag", name: "v1", target: { hash: sha } } : { type: "branch", name: branch, target: { hash: sha, message } } }] } };
      headers["X-Event-Key"] = opts.event ?? "repo:push";
      break;
  }
  const body = JSON.stringify(payload);
  const sign = {
    github: () => (headers["X-Hub-Signature-256"] = `sha256=${hmac(secret, body)}`),
    gitlab: () => (headers["X-Gitlab-Token"] = secret),
    gitea: () => (headers["X-Gitea-Signature"] = hmac(secret, body)),
    bitbucket: () => (headers["X-Hub-Signature"] = `sha256=${hmac(secret, body)}`),
  }[provider];
  sign();
  return { body, headers };
}

/** POST to the webhook URL without any token, as a git provider does. */
async function deliver(appUuid: string, provider: string, req: { body: string; headers: Record<string, string> }) {
  const res = await fetch(`${t.url}/api/v1/webhooks/applications/${appUuid}/${provider}`, { method: "POST", body: req.body, headers: req.headers });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

async function rotate(appUuid: string): Promise<string> {
  const r = await team.api.post(`/applications/${appUuid}/webhook-secret`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.secret;
}

const PROVIDERS: WebhookProvider[] = ["github", "gitlab", "gitea", "bitbucket"];
const deploymentsOf = (appUuid: string) => db().deployment.count({ where: { application: { uuid: appUuid } } });

describe("inbound webhooks", () => {
  it.each(PROVIDERS)("%s: a signed push to the branch queues a deployment of the pushed commit", async (provider) => {
    const app = await world.gitApp(server, `hook-${provider}`);
    const secret = await rotate(app);
    const res = await deliver(app, provider, push(provider, secret));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ message: "Deployment queued.", deployment_uuid: expect.any(String) });
    const dep = (await team.api.get(`/deployments/${res.body.deployment_uuid}`)).body;
    expect(dep).toMatchObject({ application_uuid: app, status: "queued", trigger: "webhook", commit: SHA, commit_message: `Fix the thing (${provider})`, branch: "main" });
    const listed = (await team.api.get(`/deployments/applications/${app}`)).body.data[0];
    expect(listed).toMatchObject({ uuid: res.body.deployment_uuid, commit: SHA, commit_message: `Fix the thing (${provider})` });
  });

  it.each(PROVIDERS)("%s: a bad or missing signature is 401 and creates nothing", async (provider) => {
    const app = await world.gitApp(server, `bad-${provider}`);
    const secret = await rotate(app);
    const forged = push(provider, "not-the-secret-" + secret.slice(0, 8));
    const bad = await deliver(app, provider, forged);
    expect(bad.status).toBe(401);
    expect(bad.body).toEqual({ message: "Invalid or missing webhook signature." });

    const unsigned = push(provider, secret);
    for (const h of ["X-Hub-Signature-256", "X-Gitlab-Token", "X-Gitea-Signature", "X-Hub-Signature"]) delete unsigned.headers[h];
    expect((await deliver(app, provider, unsigned)).status).toBe(401);

    // A valid signature over another body: the body was changed on the way.
    const genuine = push(provider, secret);
    const tampered = { ...genuine, body: genuine.body.replace(SHA, "f".repeat(40)) };
    expect((await deliver(app, provider, provider === "gitlab" ? push(provider, secret.toUpperCase()) : tampered)).status).toBe(401);
    expect(await deploymentsOf(app)).toBe(0);
  });

  it.each(PROVIDERS)("%s: pushes to other branches, tags and other events are acknowledged and ignored", async (provider) => {
    const app = await world.gitApp(server, `other-${provider}`);
    const secret = await rotate(app);
    const other = await deliver(app, provider, push(provider, secret, { branch: "feature/x" }));
    expect(other.status).toBe(200);
    expect(other.body.message).toMatch(/^Ignored: the push is not to the application's branch main/);
    expect(other.body.deployment_uuid).toBeUndefined();
    const tag = await deliver(app, provider, push(provider, secret, { ref: "refs/tags/v1" }));
    expect(tag.status).toBe(200);
    expect(tag.body.message).toMatch(/^Ignored/);
    const event = { github: "issues", gitlab: "Issue Hook", gitea: "issues", bitbucket: "repo:fork" }[provider];
    const notPush = await deliver(app, provider, push(provider, secret, { event }));
    expect(notPush.status).toBe(200);
    expect(notPush.body.message).toMatch(/^Ignored: .* events do not deploy/);
    expect(await deploymentsOf(app)).toBe(0);
  });

  it("an unknown application answers exactly like a bad signature (no existence oracle)", async () => {
    const app = await world.gitApp(server, "probe");
    const secret = await rotate(app);
    const unknown = await deliver("00000000-0000-4000-8000-000000000000", "github", push("github", secret));
    const wrong = await deliver(app, "github", push("github", "wrong"));
    expect(unknown.status).toBe(401);
    expect(unknown.body).toEqual(wrong.body);
    expect(await db().deployment.count({ where: { trigger: "webhook", application: { uuid: app } } })).toBe(0);
  });

  it("GitHub pings are answered; form-encoded payloads are read; a branch deletion deploys nothing", async () => {
    const app = await world.gitApp(server, "forms");
    const secret = await rotate(app);
    const ping = push("github", secret, { event: "ping" });
    expect((await deliver(app, "github", ping)).body).toEqual({ message: "Webhook received: pong." });

    const json = push("github", secret).body;
    const form = `payload=${encodeURIComponent(json)}`;
    const res = await deliver(app, "github", {
      body: form,
      headers: { "Content-Type": "application/x-www-form-urlencoded", "X-GitHub-Event": "push", "X-Hub-Signature-256": `sha256=${hmac(secret, form)}` },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.deployment_uuid).toEqual(expect.any(String));

    const deletion = JSON.stringify({ ref: "refs/heads/main", before: SHA, after: "0".repeat(40), deleted: true, head_commit: null });
    const del = await deliver(app, "github", {
      body: deletion,
      headers: { "Content-Type": "application/json", "X-GitHub-Event": "push", "X-Hub-Signature-256": `sha256=${hmac(secret, deletion)}` },
    });
    expect(del.body.message).toBe("Ignored: the push updated no branch.");

    const garbage = "not json";
    const bad = await deliver(app, "github", { body: garbage, headers: { "Content-Type": "application/json", "X-GitHub-Event": "push", "X-Hub-Signature-256": `sha256=${hmac(secret, garbage)}` } });
    expect(bad.status).toBe(400);
    expect(await deploymentsOf(app)).toBe(1);
  });

  it("the deployment a push creates builds the pushed commit", async () => {
    const agentServer = await world.server("hooks-agent");
    const held: JobEnvelope[] = [];
    await world.agent(agentServer, (job) => {
      held.push(job);
      return { hold: true };
    });
    const app = await world.gitApp(agentServer, "built");
    const secret = await rotate(app);
    const res = await deliver(app, "gitea", push("gitea", secret, { sha: "abcdef1234567" }));
    expect(res.status).toBe(200);
    await until(async () => held.length === 1);
    expect(DeployPayload.parse(held[0]!.payload).source).toMatchObject({ kind: "git", branch: "main", commit: "abcdef1234567" });
  });

  it("an application without a git branch ignores pushes", async () => {
    const app = await world.imageApp(server, "image-hook");
    const secret = await rotate(app);
    const res = await deliver(app, "github", push("github", secret));
    expect(res.body).toEqual({ message: "Ignored: the application does not deploy from a git repository." });
  });
});

describe("replayed deliveries (issue 15, item 5)", () => {
  /** Each provider's delivery id header (checked against the providers' documentation). */
  const DELIVERY: Record<WebhookProvider, string> = { github: "X-GitHub-Delivery", gitlab: "X-Gitlab-Event-UUID", gitea: "X-Gitea-Delivery", bitbucket: "X-Request-UUID" };
  const withId = (req: { body: string; headers: Record<string, string> }, name: string, id: string) => ({ body: req.body, headers: { ...req.headers, [name]: id } });

  it.each(PROVIDERS)("%s: the same signed delivery sent again answers 200 and deploys once", async (provider) => {
    const app = await world.gitApp(server, `replay-${provider}`);
    const secret = await rotate(app);
    const delivery = withId(push(provider, secret), DELIVERY[provider], `d-${provider}-${randomUUID()}`);
    const first = await deliver(app, provider, delivery);
    expect(first.body.deployment_uuid).toEqual(expect.any(String));
    for (let i = 0; i < 3; i++) {
      const again = await deliver(app, provider, delivery);
      expect(again.status).toBe(200);
      expect(again.body).toEqual({ message: "Already received: this delivery was acted on before; nothing was deployed again." });
    }
    expect(await deploymentsOf(app)).toBe(1);
    // Another delivery (another push, or the provider's next event) deploys.
    const next = await deliver(app, provider, withId(push(provider, secret), DELIVERY[provider], `d-${provider}-${randomUUID()}`));
    expect(next.body.deployment_uuid).toEqual(expect.any(String));
    expect(await deploymentsOf(app)).toBe(2);
  });

  it("concurrent copies of one delivery deploy once", async () => {
    const app = await world.gitApp(server, "replay-race");
    const secret = await rotate(app);
    const delivery = withId(push("github", secret), "X-GitHub-Delivery", randomUUID());
    const answers = await Promise.all(Array.from({ length: 6 }, () => deliver(app, "github", delivery)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200));
    expect(answers.filter((a) => a.body.deployment_uuid)).toHaveLength(1);
    expect(await deploymentsOf(app)).toBe(1);
  });

  it("GitLab's Idempotency-Key wins over the event UUID; Bitbucket's X-Hook-UUID (the webhook's id) is no delivery id", async () => {
    const lab = await world.gitApp(server, "replay-lab");
    const labSecret = await rotate(lab);
    const key = randomUUID();
    await deliver(lab, "gitlab", { ...push("gitlab", labSecret), headers: { ...push("gitlab", labSecret).headers, "Idempotency-Key": key, "X-Gitlab-Event-UUID": randomUUID() } });
    const retry = await deliver(lab, "gitlab", { ...push("gitlab", labSecret), headers: { ...push("gitlab", labSecret).headers, "Idempotency-Key": key, "X-Gitlab-Event-UUID": randomUUID() } });
    expect(retry.body.deployment_uuid).toBeUndefined();
    expect(await deploymentsOf(lab)).toBe(1);

    const bucket = await world.gitApp(server, "replay-bucket");
    const bucketSecret = await rotate(bucket);
    const hook = randomUUID();
    for (let i = 0; i < 2; i++) {
      const res = await deliver(bucket, "bitbucket", withId(withId(push("bitbucket", bucketSecret), "X-Hook-UUID", hook), "X-Request-UUID", randomUUID()));
      expect(res.body.deployment_uuid).toEqual(expect.any(String));
    }
    expect(await deploymentsOf(bucket)).toBe(2);
  });

  it("a delivery without an id deploys every time (as before); ids are remembered per application", async () => {
    const app = await world.gitApp(server, "replay-noid");
    const secret = await rotate(app);
    const bare = push("github", secret);
    await deliver(app, "github", bare);
    await deliver(app, "github", bare);
    expect(await deploymentsOf(app)).toBe(2);
    // The same id at another application is that application's first delivery.
    const id = randomUUID();
    const other = await world.gitApp(server, "replay-other");
    const otherSecret = await rotate(other);
    await deliver(app, "github", withId(push("github", secret), "X-GitHub-Delivery", id));
    expect((await deliver(other, "github", withId(push("github", otherSecret), "X-GitHub-Delivery", id))).body.deployment_uuid).toEqual(expect.any(String));
  });

  it("a delivery refused for a full deploy queue (429) is not used up: the provider's retry deploys", async () => {
    const full = await world.server("replay-full");
    const app = await world.gitApp(full, "replay-busy");
    const secret = await rotate(app);
    const row = await db().application.findUniqueOrThrow({ where: { uuid: app } });
    const filler = Array.from({ length: t.config.deploy.queueLimit }, () => ({
      uuid: randomUUID(),
      teamId: row.teamId,
      applicationId: row.id,
      serverId: row.serverId,
      status: "queued",
      trigger: "api",
    }));
    await db().deployment.createMany({ data: filler });
    const delivery = withId(push("github", secret), "X-GitHub-Delivery", randomUUID());
    expect((await deliver(app, "github", delivery)).status).toBe(429);
    await db().deployment.deleteMany({ where: { uuid: { in: filler.map((f) => f.uuid) } } });
    const retry = await deliver(app, "github", delivery);
    expect(retry.body.deployment_uuid).toEqual(expect.any(String));
    expect((await deliver(app, "github", delivery)).body.deployment_uuid).toBeUndefined();
  });

  it("ids older than the window are forgotten and swept; bad signatures and ignored events claim nothing", async () => {
    const app = await world.gitApp(server, "replay-window");
    const secret = await rotate(app);
    const id = randomUUID();
    // An ignored event and a bad signature with the id do not use it up.
    await deliver(app, "github", withId(push("github", secret, { event: "issues" }), "X-GitHub-Delivery", id));
    expect((await deliver(app, "github", withId(push("github", "wrong"), "X-GitHub-Delivery", id))).status).toBe(401);
    const delivery = withId(push("github", secret), "X-GitHub-Delivery", id);
    expect((await deliver(app, "github", delivery)).body.deployment_uuid).toEqual(expect.any(String));
    // Eight days later (the window is seven): the row no longer counts.
    await db().webhookDelivery.updateMany({ data: { createdAt: new Date(Date.now() - 8 * 24 * 3600_000) } });
    expect((await deliver(app, "github", delivery)).body.deployment_uuid).toEqual(expect.any(String));
    expect(await deploymentsOf(app)).toBe(2);
    // The sweep (run by deliveries, at most every 10 minutes per process) removes expired rows only.
    await db().webhookDelivery.create({ data: { receiver: "application:0", deliveryId: "x".repeat(64), createdAt: new Date(Date.now() - 8 * 24 * 3600_000) } });
    const fresh = await db().webhookDelivery.count({ where: { createdAt: { gt: new Date(Date.now() - 3600_000) } } });
    expect(await t.instance.services.webhooks.sweepExpired()).toBeGreaterThanOrEqual(1);
    expect(await db().webhookDelivery.count({ where: { receiver: "application:0" } })).toBe(0);
    expect(await db().webhookDelivery.count({ where: { createdAt: { gt: new Date(Date.now() - 3600_000) } } })).toBe(fresh);
  });
});

describe("git app push webhooks", () => {
  const appKey = generateKeyPairSync("rsa", { modulusLength: 2048, privateKeyEncoding: { type: "pkcs1", format: "pem" }, publicKeyEncoding: { type: "spki", format: "pem" } }).privateKey;

  async function gitAppWithApps(secret: string | undefined) {
    const g = await team.api.post("/github-apps", { name: "bot", app_id: 31, installation_id: 41, private_key: appKey, html_url: "https://github.example.test", ...(secret ? { webhook_secret: secret } : {}) });
    expect(g.status, JSON.stringify(g.body)).toBe(201);
    const create = async (name: string, repo: string, branch: string) => {
      const r = await team.api.post("/applications/private-git-app", {
        project_uuid: world.projectUuid,
        environment_name: "production",
        server_uuid: server.uuid,
        destination_uuid: server.destinationUuid,
        name,
        git_app_uuid: g.body.uuid,
        git_repository: repo,
        git_branch: branch,
        build_pack: "builder_a",
      });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      return r.body.uuid as string;
    };
    return {
      gitApp: g.body.uuid as string,
      main: await create("ga-main", "Acme/Shop", "main"),
      mainToo: await create("ga-main-2", "acme/shop", "main"),
      dev: await create("ga-dev", "acme/shop", "dev"),
      other: await create("ga-other", "acme/blog", "main"),
    };
  }

  const signed = (secret: string, payload: unknown, event = "push") => {
    const body = JSON.stringify(payload);
    return { body, headers: { "Content-Type": "application/json", "X-GitHub-Event": event, "X-Hub-Signature-256": `sha256=${hmac(secret, body)}` } };
  };
  const send = async (gitApp: string, req: { body: string; headers: Record<string, string> }) => {
    const res = await fetch(`${t.url}/api/v1/webhooks/git-apps/${gitApp}`, { method: "POST", body: req.body, headers: req.headers });
    return { status: res.status, body: (await res.json()) as any };
  };

  it("a push deploys every application of the git app on that repository and branch", async () => {
    const secret = "git-app-hook-secret";
    const w = await gitAppWithApps(secret);
    const payload = { ref: "refs/heads/main", after: SHA, head_commit: { id: SHA, message: "Ship it" }, repository: { full_name: "acme/shop" } };
    const res = await send(w.gitApp, signed(secret, payload));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.deployment_uuids).toHaveLength(2);
    const deployed = await db().deployment.findMany({ where: { uuid: { in: res.body.deployment_uuids } }, include: { application: true } });
    expect(deployed.map((d) => d.application.uuid).sort()).toEqual([w.main, w.mainToo].sort());
    for (const d of deployed) expect(d).toMatchObject({ trigger: "webhook", commit: SHA, commitMessage: "Ship it", branch: "main" });

    const elsewhere = await send(w.gitApp, signed(secret, { ...payload, repository: { full_name: "acme/unknown" } }));
    expect(elsewhere.body).toEqual({ message: "Ignored: no application deploys acme/unknown from main.", deployment_uuids: [] });
    expect((await send(w.gitApp, signed(secret, payload, "installation"))).body.message).toMatch(/^Ignored/);
    expect(await db().deployment.count({ where: { application: { uuid: { in: [w.dev, w.other] } } } })).toBe(0);
  });

  it("a replayed delivery answers 200 and deploys nothing again", async () => {
    const secret = "git-app-replay-secret";
    const w = await gitAppWithApps(secret);
    const payload = { ref: "refs/heads/main", after: SHA, head_commit: { id: SHA, message: "Ship it" }, repository: { full_name: "acme/shop" } };
    const req = signed(secret, payload);
    const delivery = { body: req.body, headers: { ...req.headers, "X-GitHub-Delivery": randomUUID() } };
    expect((await send(w.gitApp, delivery)).body.deployment_uuids).toHaveLength(2);
    const again = await send(w.gitApp, delivery);
    expect(again).toEqual({ status: 200, body: { message: "Already received: this delivery was acted on before; nothing was deployed again.", deployment_uuids: [] } });
    expect(await db().deployment.count({ where: { application: { uuid: { in: [w.main, w.mainToo] } } } })).toBe(2);
  });

  it("a bad signature, a git app without a webhook secret, or an unknown git app: 401, nothing created", async () => {
    const secret = "another-hook-secret";
    const w = await gitAppWithApps(secret);
    const payload = { ref: "refs/heads/main", after: SHA, head_commit: { id: SHA, message: "m" }, repository: { full_name: "acme/shop" } };
    expect((await send(w.gitApp, signed("wrong", payload))).status).toBe(401);
    const unsigned = signed(secret, payload);
    delete (unsigned.headers as Record<string, string>)["X-Hub-Signature-256"];
    expect((await send(w.gitApp, unsigned)).status).toBe(401);
    const none = await gitAppWithApps(undefined);
    expect((await send(none.gitApp, signed("", payload))).status).toBe(401);
    const unknown = await send("00000000-0000-4000-8000-000000000000", signed(secret, payload));
    expect(unknown).toEqual({ status: 401, body: { message: "Invalid or missing webhook signature." } });
    expect(await db().deployment.count({ where: { application: { gitApp: { uuid: { in: [w.gitApp, none.gitApp] } } } } })).toBe(0);
  });
});

describe("POST /applications/{uuid}/webhook-secret", () => {
  it("rotates the secret (the old one stops working) and shows it with the URLs once", async () => {
    const app = await world.gitApp(server, "rotating");
    const r = await team.api.post(`/applications/${app}/webhook-secret`);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      message: expect.any(String),
      secret: expect.stringMatching(/^[0-9a-f]{64}$/),
      urls: Object.fromEntries(PROVIDERS.map((p) => [p, `${t.config.publicUrl}/api/v1/webhooks/applications/${app}/${p}`])),
    });
    const row = await db().application.findUniqueOrThrow({ where: { uuid: app } });
    expect(row.webhookSecret).not.toContain(r.body.secret);
    expect(JSON.stringify((await team.api.get(`/applications/${app}`)).body)).not.toContain(r.body.secret);

    const next = await rotate(app);
    expect(next).not.toBe(r.body.secret);
    expect((await deliver(app, "github", push("github", r.body.secret))).status).toBe(401);
    expect((await deliver(app, "github", push("github", next))).status).toBe(200);
  });

  it("needs the write scope and full access to the environment; other teams get 404", async () => {
    const app = await world.gitApp(server, "guarded");
    const readOnly = await t.newMember(team.teamId, "owner", ["read", "deploy"]);
    expect((await t.api(readOnly.token).post(`/applications/${app}/webhook-secret`)).status).toBe(403);
    const deployer = await t.newMember(team.teamId, "member");
    await team.api.post("/permissions/project", { project_uuid: world.projectUuid, user_id: deployer.userId, permission_level: "deploy" });
    expect((await t.api(deployer.token).post(`/applications/${app}/webhook-secret`)).status).toBe(403);
    const other = await t.newTeam();
    expect((await other.api.post(`/applications/${app}/webhook-secret`)).status).toBe(404);
  });
});
