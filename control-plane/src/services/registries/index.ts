import { createHash } from "node:crypto";
import { isIP } from "node:net";
import {
  RegistryType,
  registryCredentialIssues,
  registryCredentials,
  type CreateRegistryBody,
  type RegistryCredentials,
  type UpdateRegistryBody,
} from "@capstan/shared";
import { isRefusedAddress } from "@capstan/shared/net";
import type { Database, Db, Prisma } from "../../db/client.js";
import { lockInTransaction } from "../../db/locks.js";
import type { TeamScope } from "../../domain/scope.js";
import { Invalid, NotFound } from "../../domain/errors.js";
import type { JobQueue } from "../../jobs/queue.js";
import type { EndedJob } from "../../jobs/outcomes.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import type { OutboundFetch } from "../../lib/outbound.js";
import { shortReason } from "../s3-storages.js";
import { registryHandshake, type HandshakeResult } from "./handshake.js";
import { exchangeCloudAToken } from "./cloud-a.js";
import { refusedPullRegistry } from "./refused-pull.js";

type Window = { skip?: number; take?: number };
const withServers = {
  servers: { include: { server: { select: { id: true, uuid: true, name: true, facts: true } } }, orderBy: { serverId: "asc" } },
  _count: { select: { servers: true } },
} satisfies Prisma.RegistryInclude;
const withCount = { _count: { select: { servers: true } } } satisfies Prisma.RegistryInclude;
/** A registry row with its server count (lists). */
export type RegistryRecord = Prisma.RegistryGetPayload<{ include: typeof withCount }>;
/** A registry with its assigned servers and their login state (detail, mutations). */
export type RegistryDetailRecord = Prisma.RegistryGetPayload<{ include: typeof withServers }>;

/** A login job: the engine's /auth round trip and a file write; the registry may be slow. */
const LOGIN_TIMEOUT_MS = 120_000;
const LOGOUT_TIMEOUT_MS = 60_000;

/**
 * The registry as the engine's auth config and image names name it: host[:port]; the hub's
 * names are docker.io (image names without a host are the hub's).
 */
export function registryAddress(url: string): string {
  const u = new URL(url);
  if (["docker.io", "index.docker.io", "registry-1.docker.io", "registry.hub.docker.com"].includes(u.hostname)) return "docker.io";
  return u.host;
}

/** Which credentials a login wrote: a hash of the sealed form and the URL (never of the secret itself: no guessing oracle). */
function fingerprintOf(r: { url: string; credentials: string }): string {
  return createHash("sha256").update(`${r.url}\n${r.credentials}`).digest("hex").slice(0, 16);
}

/** cloud_a tokens live 12 hours; they are exchanged again when at most 6 are left (every 6 hours, as the spec says). */
export const TOKEN_REFRESH_BEFORE_MS = 6 * 3600_000;
/** How often the control plane looks for cloud_a tokens due (and how long a claim holds). */
export const TOKEN_TICK_MS = 60_000;

/** How long a connection test may take (every request of the handshake together). */
export const REGISTRY_TEST_TIMEOUT_MS = 20_000;

/** The value of `defaultSlot` on the team's default registry (null elsewhere; unique per team). */
const DEFAULT_SLOT = 1;

/** A cloud_a access key id as responses show it: the last 4 characters. */
export function maskKeyId(id: string): string {
  return id.length >= 12 ? `****${id.slice(-4)}` : "****";
}

/**
 * Registries of a team (/registries, spec 4.9, issue 18): container registry logins. The
 * credentials object is sealed whole with the instance key (one column), never returned; the
 * `username` column holds what responses show (a login name is not a secret: `docker login`
 * prints it; a cloud_a access key id is stored there masked only). Team-level like S3 storages:
 * every member reads, owners and admins change and test. The route table gates every route on
 * REGISTRY_MANAGEMENT.
 *
 * The connection test is an outbound request to an address of the caller's choice: literal
 * loopback/link-local/metadata addresses are refused when the registry is saved, and every
 * address a name (also the token realm the registry names) resolves to is checked when
 * connecting, unless the instance allows private endpoints (PLATFORM_ALLOW_PRIVATE_ENDPOINTS).
 */
export class RegistryService {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly jobs: JobQueue,
    private readonly opts: {
      allowPrivate: boolean;
      fetch: OutboundFetch;
      dialect: Database["kind"];
      testTimeoutMs?: number;
      /** cloud_a's token API (null: the vendor's regional endpoint). */
      cloudAEndpoint?: string | null;
    },
  ) {}

  count(scope: TeamScope) {
    return this.db.registry.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, window: Window): Promise<RegistryRecord[]> {
    return this.db.registry.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, include: withCount, ...window });
  }

  async get(scope: TeamScope, id: number): Promise<RegistryDetailRecord> {
    const r = await scope.registry(id);
    const detail = await this.db.registry.findUnique({ where: { id: r.id }, include: withServers });
    if (!detail) throw new NotFound("Registry");
    return detail;
  }

  /**
   * Drift (docs/registries.md): a server synced with these credentials whose agent last
   * reported the login gone or different (its facts carry each stored login's fingerprint, null
   * once changed by hand). Unknown (false) for agents that do not report logins.
   */
  drift(r: { url: string }, a: { status: string; fingerprint: string | null; server: { facts: string | null } }): boolean {
    if (a.status !== "synced" || !a.server.facts) return false;
    let reported: { registry: string; fingerprint: string | null }[] | undefined;
    try {
      reported = (JSON.parse(a.server.facts) as { registries?: { registry: string; fingerprint: string | null }[] }).registries;
    } catch {
      return false;
    }
    if (!Array.isArray(reported)) return false;
    const address = registryAddress(r.url);
    return reported.find((x) => x.registry === address)?.fingerprint !== a.fingerprint;
  }

  /** The stored credentials, opened (the test, and later the agents' logins). */
  credentials(r: { credentials: string }): RegistryCredentials {
    return JSON.parse(this.box.open(r.credentials)) as RegistryCredentials;
  }

  /** cloud_a: the region (not a secret; shown in responses). */
  region(r: { type: string; credentials: string }): string | null {
    if (r.type !== "cloud_a") return null;
    const c = this.credentials(r);
    return "cloud_region" in c ? c.cloud_region : null;
  }

  /** The same rule as S3 endpoints and template sources: a literal local address can never work, so it is not saved. */
  private checkUrl(url: string): void {
    if (this.opts.allowPrivate) return;
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
    if ((isIP(host) !== 0 && isRefusedAddress(host)) || host === "localhost" || host.endsWith(".localhost")) {
      throw new Invalid({
        url: [`${host} is a loopback, link-local or metadata address; refused (the instance setting PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it).`],
      });
    }
  }

  private sealed(c: RegistryCredentials): { credentials: string; username: string } {
    const username = "username" in c ? c.username : maskKeyId(c.cloud_access_key_id);
    return { credentials: this.box.seal(JSON.stringify(c)), username };
  }

  async create(scope: TeamScope, input: CreateRegistryBody): Promise<RegistryDetailRecord> {
    this.checkUrl(input.url);
    const secret = this.sealed(registryCredentials(input.type, input.credentials));
    const { created, previousDefault } = await this.db.$transaction(async (tx) => {
      // The default moves: the team's previous default stops being one (the unique index
      // on (teamId, defaultSlot) turns a concurrent second default into a 409).
      const previousDefault = input.is_default ? await tx.registry.findMany({ where: { teamId: scope.teamId, defaultSlot: DEFAULT_SLOT }, select: { id: true } }) : [];
      if (input.is_default) await tx.registry.updateMany({ where: { teamId: scope.teamId, defaultSlot: DEFAULT_SLOT }, data: { defaultSlot: null } });
      const created = await tx.registry.create({
        data: {
          teamId: scope.teamId,
          name: input.name,
          type: input.type,
          url: input.url,
          ...secret,
          defaultSlot: input.is_default ? DEFAULT_SLOT : null,
        },
        include: withServers,
      });
      return { created, previousDefault };
    });
    // The servers of the registry that stopped being the default learn it at once.
    for (const other of previousDefault) await this.redispatch(other.id);
    return created;
  }

  /**
   * Only the fields given change. `server_ids` replaces the assignment: every id is resolved in
   * the caller's team first (one foreign or unknown id is a 404 and nothing changes); a server
   * that leaves gets a logout job, a new one waits for the next sync (`pending`), as the spec
   * says ("after changing server assignment, call sync").
   */
  async update(scope: TeamScope, id: number, input: UpdateRegistryBody): Promise<RegistryDetailRecord> {
    const r = await this.get(scope, id);
    const servers = input.server_ids !== undefined ? await scope.serversByIds(input.server_ids) : undefined;
    const type = RegistryType.parse(r.type);
    if (input.credentials !== undefined) {
      const issues = registryCredentialIssues(type, input.credentials);
      if (Object.keys(issues).length) throw new Invalid(issues);
    }
    if (input.url !== undefined) this.checkUrl(input.url);
    const data: Prisma.RegistryUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.url !== undefined) data.url = input.url;
    if (input.credentials !== undefined) Object.assign(data, this.sealed(registryCredentials(type, input.credentials)));
    if (input.is_default !== undefined) data.defaultSlot = input.is_default ? DEFAULT_SLOT : null;
    const address = registryAddress(r.url);
    const { updated, leaving, moved, previousDefault } = await this.db.$transaction(async (tx) => {
      // One assignment change per registry at a time, read under the lock: concurrent PATCHes
      // of the same server_ids both succeed (the second finds the rows the first created)
      // rather than one failing on the primary key.
      await lockInTransaction(tx, this.opts.dialect, "registryServers", r.id);
      const assigned = (await tx.registryServer.findMany({ where: { registryId: r.id }, select: { serverId: true } })).map((a) => a.serverId);
      const leaving = servers ? assigned.filter((sid) => !servers.some((s) => s.id === sid)) : [];
      // A new address: the servers that stay forget the login written under the old one too.
      const moved = input.url !== undefined && registryAddress(input.url) !== address ? assigned.filter((sid) => !leaving.includes(sid)) : [];
      const previousDefault = input.is_default
        ? await tx.registry.findMany({ where: { teamId: scope.teamId, defaultSlot: DEFAULT_SLOT, id: { not: r.id } }, select: { id: true } })
        : [];
      if (input.is_default) await tx.registry.updateMany({ where: { teamId: scope.teamId, defaultSlot: DEFAULT_SLOT, id: { not: r.id } }, data: { defaultSlot: null } });
      if (servers) {
        await tx.registryServer.deleteMany({ where: { registryId: r.id, serverId: { in: leaving } } });
        const joining = servers.filter((s) => !assigned.includes(s.id));
        if (joining.length) await tx.registryServer.createMany({ data: joining.map((s) => ({ registryId: r.id, serverId: s.id })) });
        // A server that leaves forgets the login it was given (the address it was written under).
        for (const serverId of leaving) await this.jobs.enqueue(tx, serverId, "registry.logout", { registry: address }, LOGOUT_TIMEOUT_MS);
      }
      for (const serverId of moved) await this.jobs.enqueue(tx, serverId, "registry.logout", { registry: address }, LOGOUT_TIMEOUT_MS);
      // A changed login or address makes every server's login stale until the next sync.
      if (input.credentials !== undefined || input.url !== undefined) {
        await tx.registryServer.updateMany({ where: { registryId: r.id }, data: { status: "pending", jobId: null } });
      }
      return { updated: await tx.registry.update({ where: { id: r.id }, data, include: withServers }), leaving, moved, previousDefault };
    });
    for (const serverId of [...leaving, ...moved]) this.jobs.nudge(serverId);
    // What the servers hold changed (the login, its address, the default): they are logged in
    // again at once, not left stale until someone syncs; so are the servers of the registry
    // that stopped being the default.
    const defaultChanged = input.is_default !== undefined && (input.is_default !== (r.defaultSlot !== null));
    if (input.credentials !== undefined || input.url !== undefined || defaultChanged) {
      const assigned = updated.servers.filter((a) => !servers || servers.some((s) => s.id === a.serverId));
      if (assigned.length) {
        await this.dispatchLogins({ ...updated, servers: assigned });
        for (const other of previousDefault) await this.redispatch(other.id);
        const fresh = await this.db.registry.findUnique({ where: { id: r.id }, include: withServers });
        if (fresh) return fresh;
      } else {
        for (const other of previousDefault) await this.redispatch(other.id);
      }
    }
    return updated;
  }

  /** Logs the servers of another registry of the team in again (it stopped being the default). */
  private async redispatch(registryId: number): Promise<void> {
    const other = await this.db.registry.findUnique({ where: { id: registryId }, include: withServers });
    if (other && other.servers.length) await this.dispatchLogins(other);
  }

  /**
   * Sync (spec 4.9): a registry.login job for every assigned server, each carrying the login in
   * its (sealed) payload; the count is what was dispatched. cloud_a needs its token exchange
   * first, which this release lacks: its servers are marked failed saying so, nothing dispatched.
   */
  async sync(scope: TeamScope, id: number): Promise<number> {
    return this.dispatchLogins(await this.get(scope, id));
  }

  /** The login jobs of a sync, one per assigned server (also after a PATCH that changed what the servers hold). */
  private async dispatchLogins(r: RegistryDetailRecord, opts: { fresh?: boolean } = {}): Promise<number> {
    let login: { username: string; password: string };
    try {
      login = await this.loginOf(r, { refresh: opts.fresh ?? true });
    } catch (err) {
      // cloud_a without a token (the exchange failed): every server says why, nothing dispatched.
      await this.db.registryServer.updateMany({ where: { registryId: r.id }, data: { status: "failed", jobId: null, error: shortReason((err as Error).message) } });
      return 0;
    }
    const fingerprint = r.type === "cloud_a" ? fingerprintOf({ url: r.url, credentials: (await this.db.registry.findUnique({ where: { id: r.id }, select: { token: true } }))?.token ?? r.credentials }) : fingerprintOf(r);
    const payload = { registry: registryAddress(r.url), username: login.username, password: login.password, fingerprint, is_default: r.defaultSlot !== null };
    await this.db.$transaction(async (tx) => {
      for (const a of r.servers) {
        const jobId = await this.jobs.enqueue(tx, a.serverId, "registry.login", payload, LOGIN_TIMEOUT_MS);
        await tx.registryServer.updateMany({ where: { registryId: r.id, serverId: a.serverId }, data: { status: "syncing", jobId } });
      }
    });
    for (const a of r.servers) this.jobs.nudge(a.serverId);
    return r.servers.length;
  }

  /** The clock of cloud_a token expiry and refresh (tests set a fake one). */
  clock: () => Date = () => new Date();

  private now(): Date {
    return this.clock();
  }

  /**
   * The login servers get: the stored username and password, or for cloud_a the registry token
   * of the vendor's exchange (cloud-a.ts). A cloud_a token is exchanged again when `refresh`,
   * when there is none, or when it is due (6 hours before it expires, as the spec says).
   */
  private async loginOf(r: { id: number; type: string; credentials: string }, opts: { refresh: boolean }): Promise<{ username: string; password: string }> {
    const c = this.credentials(r);
    if ("username" in c) return { username: c.username, password: c.password };
    if (!opts.refresh) {
      const row = await this.db.registry.findUnique({ where: { id: r.id }, select: { token: true, tokenExpiresAt: true } });
      if (row?.token && row.tokenExpiresAt && row.tokenExpiresAt.getTime() - this.now().getTime() > TOKEN_REFRESH_BEFORE_MS) {
        return JSON.parse(this.box.open(row.token)) as { username: string; password: string };
      }
    }
    return this.exchange(r.id, c);
  }

  /** The vendor's token exchange; the token is stored sealed with its expiry (or the reason it failed). */
  private async exchange(id: number, keys: { cloud_access_key_id: string; cloud_secret_access_key: string; cloud_region: string }): Promise<{ username: string; password: string }> {
    const now = this.now();
    try {
      const t = await exchangeCloudAToken(this.opts.fetch, keys, { endpoint: this.opts.cloudAEndpoint ?? null, now, signal: AbortSignal.timeout(REGISTRY_TEST_TIMEOUT_MS) });
      const login = { username: t.username, password: t.password };
      await this.db.registry.updateMany({ where: { id }, data: { token: this.box.seal(JSON.stringify(login)), tokenExpiresAt: t.expiresAt, tokenClaimedAt: now, tokenError: null } });
      return login;
    } catch (err) {
      const reason = shortReason(connectReason(err));
      await this.db.registry.updateMany({ where: { id }, data: { tokenError: reason, tokenClaimedAt: now } });
      throw new Error(reason);
    }
  }

  /**
   * cloud_a tokens due (none yet, or within 6 hours of expiry: refreshed every 6 hours of their
   * 12) are exchanged again and the servers logged in with the new token. Each registry's
   * refresh is claimed with one conditional update of `tokenClaimedAt`, so with several
   * replicas ticking together one of them refreshes it. Answers the registries refreshed.
   */
  async refreshDueTokens(): Promise<number[]> {
    const now = this.now();
    const due = await this.db.registry.findMany({
      where: {
        type: "cloud_a",
        servers: { some: {} },
        OR: [{ tokenExpiresAt: null }, { tokenExpiresAt: { lte: new Date(now.getTime() + TOKEN_REFRESH_BEFORE_MS) } }],
      },
      select: { id: true, tokenClaimedAt: true },
    });
    const done: number[] = [];
    for (const d of due) {
      // A claim younger than a tick is another replica's refresh of this same state (or a failed one retried next tick).
      if (d.tokenClaimedAt && now.getTime() - d.tokenClaimedAt.getTime() < TOKEN_TICK_MS) continue;
      const claimed = await this.db.registry.updateMany({ where: { id: d.id, tokenClaimedAt: d.tokenClaimedAt }, data: { tokenClaimedAt: now } });
      if (claimed.count !== 1) continue;
      const r = await this.db.registry.findUnique({ where: { id: d.id }, include: withServers });
      if (!r) continue;
      if ((await this.dispatchLogins(r, { fresh: true })) > 0) done.push(r.id);
    }
    return done;
  }

  private tick: NodeJS.Timeout | null = null;

  /** Looks for cloud_a tokens due every TOKEN_TICK_MS (instance.attach; stop on close). */
  startTokenRefresh(log: { error(obj: object, msg: string): void }): void {
    if (this.tick) return;
    this.tick = setInterval(() => {
      this.refreshDueTokens().catch((err) => log.error({ err: { message: (err as Error).message } }, "refreshing cloud_a registry tokens failed"));
    }, TOKEN_TICK_MS);
    this.tick.unref();
  }

  stopTokenRefresh(): void {
    if (this.tick) clearInterval(this.tick);
    this.tick = null;
  }

  /**
   * A pull on a server answered 401 for `registry` (host[:port]): a cloud_a registry of the
   * team at that address gets a new token at once and its servers the new login (the token
   * may have been revoked or expired early). Other types: nothing (their login is what it is).
   */
  async pullUnauthorized(teamId: number, registry: string): Promise<boolean> {
    const rows = await this.db.registry.findMany({ where: { teamId, type: "cloud_a" }, include: withServers });
    const r = rows.find((x) => registryAddress(x.url) === registry);
    if (!r || !r.servers.length) return false;
    const now = this.now();
    if (r.tokenClaimedAt && now.getTime() - r.tokenClaimedAt.getTime() < TOKEN_TICK_MS) return false;
    const claimed = await this.db.registry.updateMany({ where: { id: r.id, tokenClaimedAt: r.tokenClaimedAt }, data: { tokenClaimedAt: now } });
    if (claimed.count !== 1) return false;
    return (await this.dispatchLogins(r, { fresh: true })) > 0;
  }

  /**
   * The end of any job that pulls images (application deploys and builds, database and service
   * deploys and actions; jobs/outcome-map.ts): a pull the registry refused (refused-pull.ts) is
   * pullUnauthorized for the team of the job's server. Never throws: the job's own outcome
   * stands whatever the refresh does.
   */
  async pullJobEnded(job: { serverId: number; status: string; error: string | null }): Promise<boolean> {
    const registry = job.status === "failed" && job.error ? refusedPullRegistry(job.error) : null;
    if (!registry) return false;
    try {
      const server = await this.db.server.findUnique({ where: { id: job.serverId }, select: { teamId: true } });
      return server ? await this.pullUnauthorized(server.teamId, registry) : false;
    } catch {
      return false;
    }
  }

  /**
   * The end of a registry.login job: the server's login state, if that job is still the one
   * the row waits for (a later sync or a changed login wins; safe to run twice).
   */
  async loginEnded(job: EndedJob<"registry.login">): Promise<void> {
    const ok = job.status === "succeeded";
    let fingerprint: string | null = null;
    if (ok && job.result) fingerprint = (JSON.parse(job.result) as { fingerprint?: string }).fingerprint ?? null;
    const at = job.finishedAt ?? new Date();
    const rows = await this.db.registryServer.findMany({ where: { jobId: job.id }, select: { registryId: true } });
    await this.db.registryServer.updateMany({
      where: { jobId: job.id },
      data: ok
        ? { status: "synced", syncedAt: at, error: null, fingerprint, jobId: null }
        : { status: "failed", error: shortReason(job.error ?? (job.status === "cancelled" ? "cancelled" : "failed")), jobId: null },
    });
    if (ok && rows.length) await this.db.registry.updateMany({ where: { id: { in: rows.map((x) => x.registryId) } }, data: { lastSyncedAt: at } });
  }

  /** Logs out on every assigned server (a job each), then forgets the registry and its credentials. */
  async remove(scope: TeamScope, id: number): Promise<number> {
    const r = await this.get(scope, id);
    const address = registryAddress(r.url);
    await this.db.$transaction(async (tx) => {
      for (const a of r.servers) await this.jobs.enqueue(tx, a.serverId, "registry.logout", { registry: address }, LOGOUT_TIMEOUT_MS);
      await tx.registry.delete({ where: { id: r.id } });
    });
    for (const a of r.servers) this.jobs.nudge(a.serverId);
    return r.servers.length;
  }

  /**
   * The connection test (spec 4.9): the registry's V2 login handshake from the control plane
   * (handshake.ts). Never an HTTP error for a failed login: the registry's reason comes back.
   * Owners and admins only: it sends the team's credentials to an outside address.
   */
  async test(scope: TeamScope, id: number): Promise<{ authenticated: boolean; error?: string; note?: string }> {
    const r = await this.get(scope, id);
    let c: { username: string; password: string };
    try {
      // cloud_a: the vendor's token exchange first; its refusal is the test's answer.
      c = await this.loginOf(r, { refresh: false });
    } catch (err) {
      return { authenticated: false, error: (err as Error).message };
    }
    const timeoutMs = this.opts.testTimeoutMs ?? REGISTRY_TEST_TIMEOUT_MS;
    const signal = AbortSignal.timeout(timeoutMs);
    let result: HandshakeResult;
    try {
      result = await registryHandshake(this.opts.fetch, r.url, c, signal);
    } catch (err) {
      result = { ok: false, error: signal.aborted ? `${r.url} did not answer within ${Math.round(timeoutMs / 1000)} s` : connectReason(err) };
    }
    return result.ok ? { authenticated: true, ...(result.note ? { note: result.note } : {}) } : { authenticated: false, error: shortReason(mask(result.error, c.password)) };
  }
}

/** fetch's "fetch failed" hides the reason in `cause` (refused, unknown host, the outbound guard's refusal). */
function connectReason(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e?.cause;
  if (cause?.message) return cause.code && !cause.message.includes(cause.code) ? `${cause.code}: ${cause.message}` : cause.message;
  return e?.message ?? String(err);
}

/** A registry's reason never echoes the password back (some put the request into their error text). */
function mask(text: string, secret: string): string {
  return secret ? text.split(secret).join("****") : text;
}
