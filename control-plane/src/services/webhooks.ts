import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { CommitSha, webhookUrls, type WebhookProvider } from "@capstan/shared";
import type { Db } from "../db/client.js";
import { isUniqueViolation } from "../db/errors.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { TeamScope } from "../domain/scope.js";
import { Invalid, Busy, Rejected, Unauthenticated } from "../domain/errors.js";
import type { DeploymentService } from "./deployments/index.js";
import { gitAppCloneUrl } from "./applications.js";

/**
 * How long a delivery id is remembered: a replay within it answers 200 without deploying. Seven
 * days: longer than GitHub keeps deliveries redeliverable (3 days), and one row per deploying
 * push costs next to nothing. Older rows are swept (at most every SWEEP_EVERY_MS, by whichever
 * replica receives a webhook).
 */
export const REPLAY_WINDOW_MS = 7 * 24 * 3600_000;
const SWEEP_EVERY_MS = 10 * 60_000;
const DELIVERY_ID_MAX = 1024;

/** One answer for an unknown application and a bad or missing signature: no existence oracle. */
export const BAD_SIGNATURE = "Invalid or missing webhook signature.";
const COMMIT_MESSAGE_MAX = 1000;
/** The answer to a delivery already acted on (200: the provider must not retry it). */
export const ALREADY_RECEIVED = "Already received: this delivery was acted on before; nothing was deployed again.";

/** What a push event says, once the provider's shape is read. */
export interface PushEvent {
  branch: string;
  commit: string;
  message: string | null;
}

/** GitHub's `repository.full_name` of a push (owner/name), when it has one. */
export function repositoryOf(payload: unknown): string | null {
  const name = str(obj(obj(payload).repository).full_name);
  return name && /^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/.test(name) ? name : null;
}

export type WebhookOutcome = { message: string; deployment_uuid?: string };

type Headers = Record<string, string | string[] | undefined>;
const header = (h: Headers, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/**
 * Compares in constant time. Both sides are hashed first, so the buffers compared have equal
 * length whatever the caller sent, and the time taken says nothing about the secret.
 */
export function safeEqual(expected: string, given: string | undefined): boolean {
  const a = createHash("sha256").update(expected, "utf8").digest();
  const b = createHash("sha256").update(given ?? "", "utf8").digest();
  return timingSafeEqual(a, b) && given !== undefined;
}

const hmacHex = (secret: string, body: Buffer) => createHmac("sha256", secret).update(body).digest("hex");

/**
 * Signature schemes of the providers:
 * - GitHub: X-Hub-Signature-256 = "sha256=" + hex HMAC-SHA256 of the raw body.
 * - GitLab: X-Gitlab-Token = the secret itself.
 * - Gitea: X-Gitea-Signature = hex HMAC-SHA256 of the raw body.
 * - Bitbucket Cloud: X-Hub-Signature = "sha256=" + hex HMAC-SHA256 of the raw body.
 */
export function verifySignature(provider: WebhookProvider, secret: string, headers: Headers, body: Buffer): boolean {
  switch (provider) {
    case "github":
      return safeEqual(`sha256=${hmacHex(secret, body)}`, header(headers, "x-hub-signature-256")?.trim().toLowerCase());
    case "gitlab":
      return safeEqual(secret, header(headers, "x-gitlab-token"));
    case "gitea":
      return safeEqual(hmacHex(secret, body), header(headers, "x-gitea-signature")?.trim().toLowerCase());
    case "bitbucket":
      return safeEqual(`sha256=${hmacHex(secret, body)}`, header(headers, "x-hub-signature")?.trim().toLowerCase());
  }
}

/**
 * The provider's id of this delivery, the same when the provider (or anyone) sends it again:
 * - GitHub: X-GitHub-Delivery (one GUID per event, kept on redelivery).
 * - Gitea: X-Gitea-Delivery (Gitea also sends it as X-Gogs-Delivery and X-GitHub-Delivery).
 * - GitLab: Idempotency-Key (17.4+, kept across retries), else X-Gitlab-Event-UUID.
 * - Bitbucket Cloud: X-Request-UUID (X-Hook-UUID names the webhook, the same for every event).
 * null when the request carries none (then it deploys, as before: docs/deployments.md).
 */
export function deliveryIdOf(provider: WebhookProvider, headers: Headers): string | null {
  const names = {
    github: ["x-github-delivery"],
    gitea: ["x-gitea-delivery", "x-gogs-delivery", "x-github-delivery"],
    gitlab: ["idempotency-key", "x-gitlab-event-uuid"],
    bitbucket: ["x-request-uuid"],
  }[provider];
  for (const name of names) {
    const v = header(headers, name)?.trim();
    if (v) return v.slice(0, DELIVERY_ID_MAX);
  }
  return null;
}

/** The event name the provider puts in its headers, and whether it is a push. */
function isPush(provider: WebhookProvider, headers: Headers): { push: boolean; event: string } {
  const event =
    provider === "github"
      ? header(headers, "x-github-event")
      : provider === "gitlab"
        ? header(headers, "x-gitlab-event")
        : provider === "gitea"
          ? (header(headers, "x-gitea-event") ?? header(headers, "x-github-event"))
          : header(headers, "x-event-key");
  const name = (event ?? "").slice(0, 64);
  const push = { github: "push", gitlab: "Push Hook", gitea: "push", bitbucket: "repo:push" }[provider] === name;
  return { push, event: name || "unknown" };
}

const obj = (v: unknown): Record<string, unknown> => (v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const str = (v: unknown): string | null => (typeof v === "string" ? v : null);
const ZERO_SHA = /^0+$/;

/**
 * Reads the pushes of a provider's push payload (one per branch updated). Tag pushes and
 * branch deletions carry no branch head to deploy and give none.
 */
export function pushesOf(provider: WebhookProvider, payload: unknown): PushEvent[] {
  const p = obj(payload);
  if (provider === "bitbucket") {
    const changes = Array.isArray(obj(p.push).changes) ? (obj(p.push).changes as unknown[]) : [];
    return changes.flatMap((c) => {
      const n = obj(obj(c).new);
      const target = obj(n.target);
      const branch = str(n.name);
      const commit = str(target.hash);
      if (n.type !== "branch" || !branch || !commit) return [];
      return [{ branch, commit, message: str(target.message) }];
    });
  }
  const ref = str(p.ref);
  if (!ref?.startsWith("refs/heads/")) return [];
  const branch = ref.slice("refs/heads/".length);
  const commit = provider === "gitlab" ? (str(p.checkout_sha) ?? str(p.after)) : str(p.after);
  if (!commit || ZERO_SHA.test(commit) || p.deleted === true) return [];
  let message: string | null = null;
  if (provider === "gitlab") {
    const commits = Array.isArray(p.commits) ? p.commits.map(obj) : [];
    message = str((commits.find((c) => c.id === commit) ?? commits[commits.length - 1])?.message);
  } else {
    message = str(obj(p.head_commit).message);
  }
  return [{ branch, commit, message }];
}

/** The JSON of a webhook body: sent as application/json, or form-encoded in a `payload` field. */
function parseBody(body: Buffer, contentType: string | undefined): unknown {
  const text = body.toString("utf8");
  const json = /application\/x-www-form-urlencoded/i.test(contentType ?? "") ? new URLSearchParams(text).get("payload") : text;
  if (json === null) throw new Rejected("The form-encoded webhook has no payload field.");
  try {
    return JSON.parse(json);
  } catch {
    throw new Rejected("The webhook payload is not valid JSON.");
  }
}

/**
 * Inbound git webhooks of applications (spec 6.2): a signed push to the application's branch
 * creates a deployment (trigger webhook) of the pushed commit; anything else is acknowledged
 * and ignored.
 */
export class WebhookService {
  /** A secret for unknown applications, so that case does the same work as a wrong signature. */
  private readonly decoy = randomBytes(32).toString("hex");
  private lastSweep = 0;

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly deployments: DeploymentService,
    private readonly publicUrl: string,
  ) {}

  async receive(provider: WebhookProvider, applicationUuid: string, headers: Headers, body: Buffer): Promise<WebhookOutcome> {
    const app = await this.db.application.findUnique({
      where: { uuid: applicationUuid },
      select: { id: true, teamId: true, serverId: true, gitBranch: true, webhookSecret: true },
    });
    let secret = this.decoy;
    if (app?.webhookSecret) {
      try {
        secret = this.box.open(app.webhookSecret);
      } catch {
        secret = this.decoy;
      }
    }
    const verified = verifySignature(provider, secret, headers, body);
    if (!app || secret === this.decoy || !verified) throw new Unauthenticated(BAD_SIGNATURE);

    const { push, event } = isPush(provider, headers);
    if (event === "ping" || event === "diagnostics:ping") return { message: "Webhook received: pong." };
    if (!push) return { message: `Ignored: ${event} events do not deploy.` };
    if (!app.gitBranch) return { message: "Ignored: the application does not deploy from a git repository." };

    const pushes = pushesOf(provider, parseBody(body, header(headers, "content-type")));
    const match = pushes.find((p) => p.branch === app.gitBranch);
    if (!match) {
      return { message: pushes.length ? `Ignored: the push is not to the application's branch ${app.gitBranch}.` : "Ignored: the push updated no branch." };
    }
    const commit = CommitSha.safeParse(match.commit);
    if (!commit.success) throw new Invalid({ commit: ["Use a hexadecimal commit id."] }, "The push names no valid commit id.");
    const queued = await this.once(`application:${app.id}`, deliveryIdOf(provider, headers), () =>
      this.deployments.enqueue(app, {
        trigger: "webhook",
        force: false,
        commit: commit.data,
        commitMessage: match.message?.trim().slice(0, COMMIT_MESSAGE_MAX) || null,
      }),
    );
    if (!queued) return { message: ALREADY_RECEIVED };
    return { message: "Deployment queued.", deployment_uuid: queued.uuid };
  }

  /**
   * Runs `act` for the first arrival of a delivery id at this receiver (an application or a git
   * app, whose secret signed it) within REPLAY_WINDOW_MS; a later arrival gets null without
   * running it. The id is claimed by a row with a unique key before acting, so concurrent
   * arrivals on any replica act once; when `act` fails (a full deploy queue), the claim is
   * released so the provider's retry can act. A delivery without an id always acts.
   */
  private async once<T>(receiver: string, deliveryId: string | null, act: () => Promise<T>): Promise<T | null> {
    this.sweepSoon();
    if (deliveryId === null) return act();
    const key = createHash("sha256").update(deliveryId, "utf8").digest("hex");
    const since = new Date(Date.now() - REPLAY_WINDOW_MS);
    // A row past the window no longer counts (the sweep may not have run yet): replace it.
    await this.db.webhookDelivery.deleteMany({ where: { receiver, deliveryId: key, createdAt: { lt: since } } });
    let claimed: { id: number };
    try {
      claimed = await this.db.webhookDelivery.create({ data: { receiver, deliveryId: key }, select: { id: true } });
    } catch (err) {
      if (isUniqueViolation(err)) return null;
      throw err;
    }
    try {
      return await act();
    } catch (err) {
      await this.db.webhookDelivery.deleteMany({ where: { id: claimed.id } }).catch(() => {});
      throw err;
    }
  }

  /** Sweeps expired delivery ids at most every SWEEP_EVERY_MS per process, without waiting for it. */
  private sweepSoon(now = Date.now()): void {
    if (now - this.lastSweep < SWEEP_EVERY_MS) return;
    this.lastSweep = now;
    void this.sweepExpired(now).catch(() => {});
  }

  /** Forgets delivery ids older than the window (bounded storage); returns how many went. */
  async sweepExpired(now = Date.now()): Promise<number> {
    const { count } = await this.db.webhookDelivery.deleteMany({ where: { createdAt: { lt: new Date(now - REPLAY_WINDOW_MS) } } });
    return count;
  }

  /**
   * A push webhook of a git app (spec 6.2: applications connected through a git app deploy on
   * a push to their branch). Signed like GitHub's (X-Hub-Signature-256) with the git app's
   * webhook secret; every application of the git app cloning the pushed repository from the
   * pushed branch gets a deployment of the pushed commit.
   */
  async receiveGitApp(gitAppUuid: string, headers: Headers, body: Buffer): Promise<{ message: string; deployment_uuids: string[] }> {
    const gitApp = await this.db.gitApp.findUnique({ where: { uuid: gitAppUuid }, select: { id: true, htmlUrl: true, webhookSecret: true } });
    let secret = this.decoy;
    if (gitApp?.webhookSecret) {
      try {
        secret = this.box.open(gitApp.webhookSecret);
      } catch {
        secret = this.decoy;
      }
    }
    const verified = verifySignature("github", secret, headers, body);
    if (!gitApp || secret === this.decoy || !verified) throw new Unauthenticated(BAD_SIGNATURE);

    const { push, event } = isPush("github", headers);
    if (event === "ping") return { message: "Webhook received: pong.", deployment_uuids: [] };
    if (!push) return { message: `Ignored: ${event} events do not deploy.`, deployment_uuids: [] };
    const payload = parseBody(body, header(headers, "content-type"));
    const repo = repositoryOf(payload);
    const [pushed] = pushesOf("github", payload);
    if (!repo || !pushed) return { message: "Ignored: the push updated no branch.", deployment_uuids: [] };
    const commit = CommitSha.safeParse(pushed.commit);
    if (!commit.success) throw new Invalid({ commit: ["Use a hexadecimal commit id."] }, "The push names no valid commit id.");

    // GitHub treats owner and repository names without regard to case.
    const cloneUrl = gitAppCloneUrl(gitApp.htmlUrl, repo).toLowerCase();
    const apps = (
      await this.db.application.findMany({
        where: { gitAppId: gitApp.id, gitBranch: pushed.branch },
        select: { id: true, teamId: true, serverId: true, gitBranch: true, gitRepository: true },
        orderBy: { id: "asc" },
      })
    ).filter((a) => a.gitRepository?.toLowerCase() === cloneUrl);
    if (!apps.length) return { message: `Ignored: no application deploys ${repo} from ${pushed.branch}.`, deployment_uuids: [] };
    const queued = await this.once(`git-app:${gitApp.id}`, deliveryIdOf("github", headers), () => this.deployAll(apps, commit.data, pushed.message));
    return queued ?? { message: ALREADY_RECEIVED, deployment_uuids: [] };
  }

  /** A git app's push: a deployment for each application; a full queue of one does not stop the others. */
  private async deployAll(
    apps: { id: number; teamId: number; serverId: number; gitBranch: string | null }[],
    commit: string,
    message: string | null,
  ): Promise<{ message: string; deployment_uuids: string[] }> {
    const uuids: string[] = [];
    let full: Busy | null = null;
    for (const app of apps) {
      try {
        const { uuid } = await this.deployments.enqueue(app, {
          trigger: "webhook",
          force: false,
          commit,
          commitMessage: message?.trim().slice(0, COMMIT_MESSAGE_MAX) || null,
        });
        uuids.push(uuid);
      } catch (err) {
        // One application's full queue does not keep the others from deploying.
        if (!(err instanceof Busy)) throw err;
        full ??= err;
      }
    }
    if (!uuids.length && full) throw full;
    const skipped = apps.length - uuids.length;
    return {
      message: `Deployment queued for ${uuids.length} application(s).${skipped ? ` ${skipped} not queued: their server's deploy queue is full.` : ""}`,
      deployment_uuids: uuids,
    };
  }

  /** A new webhook secret (32 random bytes, hex), shown once; the old one stops working at once. */
  async rotateSecret(scope: TeamScope, applicationUuid: string): Promise<{ secret: string; urls: Record<WebhookProvider, string> }> {
    const app = await scope.application(applicationUuid, "manage");
    const secret = randomBytes(32).toString("hex");
    await this.db.application.update({ where: { id: app.id }, data: { webhookSecret: this.box.seal(secret) } });
    return { secret, urls: webhookUrls(this.publicUrl, app.uuid) };
  }
}
