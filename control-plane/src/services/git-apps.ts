import type { OutboundFetch } from "../lib/outbound.js";
import { createPrivateKey, sign, type KeyObject } from "node:crypto";
import type { CreateGitAppBody, UpdateGitAppBody } from "@capstan/shared";
import type { Db, Prisma } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict, UpstreamFailed } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import type { SecretBox } from "../crypto/secret-box.js";

type Window = { skip?: number; take?: number };

/** A cached token is handed out until this long before it expires. */
const TOKEN_MARGIN_MS = 5 * 60_000;
/** The token request may take this long before it fails with a reason. */
const TOKEN_TIMEOUT_MS = 15_000;

export interface InstallationToken {
  token: string;
  expiresAt: Date;
}

/** Checks that a PEM text is an unencrypted RSA private key of at least 2048 bits. */
export function parseAppKey(pem: string): { key: KeyObject } | { error: string } {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem.trim() + "\n", format: "pem" });
  } catch {
    return { error: "Not a PEM private key (or it is passphrase-protected): paste the key the git app's settings page generated." };
  }
  if (key.asymmetricKeyType !== "rsa") return { error: `Git apps sign with RSA keys; this is an ${key.asymmetricKeyType ?? "unknown"} key.` };
  if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) return { error: "The RSA key must have at least 2048 bits." };
  return { key };
}

const b64url = (v: string | Buffer) => Buffer.from(v).toString("base64url");

/** The app's JWT as GitHub specifies it: RS256, issued a minute ago (clock drift), valid 9 minutes. */
export function appJwt(appId: number, key: KeyObject, now = Date.now()): string {
  const iat = Math.floor(now / 1000) - 60;
  const head = b64url(JSON.stringify({ alg: "RS256", typ: "JWT" }));
  const body = b64url(JSON.stringify({ iat, exp: iat + 60 + 9 * 60, iss: appId }));
  const signature = sign("RSA-SHA256", Buffer.from(`${head}.${body}`), key);
  return `${head}.${body}.${b64url(signature)}`;
}

/**
 * Git apps of a team (/github-apps): GitHub App style installations used to clone private
 * repositories. The private key and the webhook secret are sealed with the instance key and
 * never leave the control plane through the API.
 */
export class GitAppService {
  private readonly tokens = new Map<number, InstallationToken & { version: string }>();
  private readonly inflight = new Map<number, Promise<InstallationToken>>();

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    /** Guarded against loopback, link-local and metadata addresses (lib/outbound.ts). */
    private readonly fetch: OutboundFetch,
  ) {}

  count(scope: TeamScope) {
    return this.db.gitApp.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, window: Window) {
    return this.db.gitApp.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, ...window });
  }

  get(scope: TeamScope, uuid: string) {
    return scope.gitApp(uuid);
  }

  private sealKey(pem: string): string {
    const parsed = parseAppKey(pem);
    if ("error" in parsed) throw new Invalid({ private_key: [parsed.error] });
    return this.box.seal(pem.trim() + "\n");
  }

  async create(scope: TeamScope, input: CreateGitAppBody) {
    scope.requireTeamAdmin("manage git apps");
    return this.db.gitApp.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        name: input.name,
        appId: BigInt(input.app_id),
        installationId: BigInt(input.installation_id),
        privateKey: this.sealKey(input.private_key),
        apiUrl: input.api_url,
        htmlUrl: input.html_url,
        webhookSecret: input.webhook_secret === undefined ? null : this.box.seal(input.webhook_secret),
      },
    });
  }

  async update(scope: TeamScope, uuid: string, input: UpdateGitAppBody) {
    scope.requireTeamAdmin("manage git apps");
    const app = await this.get(scope, uuid);
    const data: Prisma.GitAppUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.app_id !== undefined) data.appId = BigInt(input.app_id);
    if (input.installation_id !== undefined) data.installationId = BigInt(input.installation_id);
    if (input.private_key !== undefined) data.privateKey = this.sealKey(input.private_key);
    if (input.api_url !== undefined) data.apiUrl = input.api_url;
    if (input.html_url !== undefined) data.htmlUrl = input.html_url;
    if (input.webhook_secret !== undefined) data.webhookSecret = input.webhook_secret === null ? null : this.box.seal(input.webhook_secret);
    this.tokens.delete(app.id);
    return this.db.gitApp.update({ where: { id: app.id }, data });
  }

  async remove(scope: TeamScope, uuid: string): Promise<void> {
    scope.requireTeamAdmin("manage git apps");
    const app = await this.get(scope, uuid);
    const users = await this.db.application.count({ where: { gitAppId: app.id } });
    if (users > 0) throw new Conflict(`This git app is used by ${users} application(s); delete them first.`);
    await this.db.gitApp.delete({ where: { id: app.id } });
    this.tokens.delete(app.id);
  }

  /** The webhook secret in clear, for verifying the app's push webhooks; null when none is set. */
  async webhookSecret(gitAppId: number): Promise<string | null> {
    const app = await this.db.gitApp.findUnique({ where: { id: gitAppId }, select: { webhookSecret: true } });
    return app?.webhookSecret ? this.box.open(app.webhookSecret) : null;
  }

  /**
   * An installation access token for cloning: cached until 5 minutes before it expires,
   * one request at a time per app. Fails with UpstreamFailed, whose message says why.
   */
  async installationToken(gitAppId: number): Promise<InstallationToken> {
    const app = await this.db.gitApp.findUnique({ where: { id: gitAppId } });
    if (!app) throw new NotFound("Git app");
    // A changed key, id or URL makes a cached token stale.
    const version = `${app.updatedAt.getTime()}`;
    const cached = this.tokens.get(app.id);
    if (cached && cached.version === version && cached.expiresAt.getTime() - TOKEN_MARGIN_MS > Date.now()) {
      return { token: cached.token, expiresAt: cached.expiresAt };
    }
    let pending = this.inflight.get(app.id);
    if (!pending) {
      pending = this.requestToken(app).finally(() => this.inflight.delete(app.id));
      this.inflight.set(app.id, pending);
    }
    const fresh = await pending;
    this.tokens.set(app.id, { ...fresh, version });
    return fresh;
  }

  private async requestToken(app: { name: string; appId: bigint; installationId: bigint; privateKey: string; apiUrl: string }): Promise<InstallationToken> {
    const fail = (why: string) => new UpstreamFailed(`Git app ${app.name}: could not get an installation token: ${why}`);
    const parsed = parseAppKey(this.box.open(app.privateKey));
    if ("error" in parsed) throw fail(parsed.error);
    const url = `${app.apiUrl}/app/installations/${app.installationId}/access_tokens`;
    let res: Awaited<ReturnType<OutboundFetch>>;
    try {
      res = await this.fetch(url, {
        method: "POST",
        headers: {
          Accept: "application/vnd.github+json",
          Authorization: `Bearer ${appJwt(Number(app.appId), parsed.key)}`,
          "X-GitHub-Api-Version": "2022-11-28",
          "User-Agent": "capstan",
        },
        redirect: "error",
        signal: AbortSignal.timeout(TOKEN_TIMEOUT_MS),
      });
    } catch (err) {
      const e = err as Error;
      throw fail(e.name === "TimeoutError" ? `${app.apiUrl} did not answer within ${TOKEN_TIMEOUT_MS / 1000} s` : `${app.apiUrl} is not reachable (${(e.cause as Error | undefined)?.message ?? e.message})`);
    }
    const text = await res.text().catch(() => "");
    let body: { token?: unknown; expires_at?: unknown; message?: unknown } = {};
    try {
      body = JSON.parse(text);
    } catch {
      /* reported below */
    }
    if (res.status !== 201 && res.status !== 200) {
      // Only the API's own short message: never echo arbitrary response bodies.
      const message = typeof body.message === "string" ? `: ${body.message.slice(0, 200)}` : "";
      const hint = res.status === 401 ? " (check app_id and the private key)" : res.status === 404 ? " (check installation_id and that the app is installed)" : "";
      throw fail(`the API answered ${res.status}${message}${hint}`);
    }
    const expiresAt = typeof body.expires_at === "string" ? new Date(body.expires_at) : new Date(NaN);
    if (typeof body.token !== "string" || !/^[A-Za-z0-9._~+/=-]{1,512}$/.test(body.token) || Number.isNaN(expiresAt.getTime())) {
      throw fail("the API's answer has no usable token and expires_at");
    }
    return { token: body.token, expiresAt };
  }
}
