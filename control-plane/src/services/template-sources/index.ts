import { isIP } from "node:net";
import type { Logger } from "pino";
import { TemplateSummary, templateSourceSlug, type CreateTemplateSourceBody, type UpdateTemplateSourceBody } from "@capstan/shared";
import { isRefusedAddress } from "@capstan/shared/net";
import type { Db, Prisma } from "../../db/client.js";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, Invalid, NotFound } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import { loadTemplateDir, templateSummary, TemplateDirError, TEMPLATE_DIR_LIMITS, type TemplateDirLimits } from "../../templates/index.js";
import { CHECKOUT_LIMITS, CheckoutError, checkout, folderInside, scrub, type CheckoutLimits } from "./checkout.js";
import { keepAlive, RowJobRunner, type RowJobOptions } from "../../jobs/row-jobs.js";

/** A source as routes show it: everything but the stored template files (megabytes for a big catalog; read only by a create). */
export type TemplateSourceRecord = Omit<Prisma.TemplateSourceGetPayload<object>, "templateFiles">;
/** Leaves the stored template files out of a read. */
export const WITHOUT_FILES = { templateFiles: true } as const;

/** What a sync stores per template that passed (the detail's `templates`, GET /services/templates). */
export type StoredTemplate = TemplateSummary;

/** Concurrency, heartbeat and recovery of the syncs (jobs/row-jobs.ts), and the checkout's limits. */
export interface TemplateSyncOptions extends RowJobOptions {
  allowPrivate: boolean;
  checkoutLimits: CheckoutLimits;
  dirLimits: TemplateDirLimits;
  /** Bytes of template files a sync stores (the texts of the templates that passed): more fails the sync. */
  storedBytes: number;
}

export const TEMPLATE_SYNC_DEFAULTS: Omit<TemplateSyncOptions, "allowPrivate"> = {
  concurrency: 2,
  checkoutLimits: CHECKOUT_LIMITS,
  dirLimits: TEMPLATE_DIR_LIMITS,
  heartbeatMs: 5_000,
  staleMs: 30_000,
  sweepMs: 15_000,
  // Coolify's whole catalog (~370 files) is about 1.5 MB.
  storedBytes: 16 * 1024 * 1024,
};

export type SyncDispatch = "dispatched" | "already";

const ADMIN = "manage template sources";

/**
 * Template sources of a team (spec 4.11, docs/templates.md): git repositories of compose
 * templates. Every member reads them; owners and admins change and sync them (a sync makes
 * the control plane clone a URL the caller chose). The token is sealed with the instance key.
 *
 * Syncs run in this process (the control plane needs the files itself), at most `concurrency`
 * at once. The row is the durable record: `pending` is a sync that is due (just created, asked
 * for, or put back), `syncing` one a process claimed and keeps alive with a heartbeat. On start
 * and every sweep, `syncing` rows whose heartbeat is old (their process died) go back to
 * `pending`, and every `pending` row is synced: an interrupted sync is never stuck.
 */
export class TemplateSourceService {
  private readonly runner: RowJobRunner;
  private abort = new AbortController();
  private log: Pick<Logger, "warn" | "error"> | null = null;
  private readonly opts: TemplateSyncOptions;

  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    opts: Partial<TemplateSyncOptions> & { allowPrivate: boolean },
  ) {
    this.opts = { ...TEMPLATE_SYNC_DEFAULTS, ...opts };
    this.runner = new RowJobRunner(
      { name: "template source sync", idKey: "templateSourceId" },
      {
        recoverStale: (staleBefore, live) =>
          db.templateSource.updateMany({
            where: { syncStatus: "syncing", OR: [{ syncHeartbeatAt: null }, { syncHeartbeatAt: { lt: staleBefore } }], id: { notIn: live } },
            data: { syncStatus: "pending", syncHeartbeatAt: null },
          }),
        due: async () => (await db.templateSource.findMany({ where: { syncStatus: "pending" }, select: { id: true }, orderBy: { id: "asc" } })).map((p) => p.id),
      },
      async (id) => {
        await this.run(id);
        return false;
      },
      this.opts,
    );
  }

  count(scope: TeamScope) {
    return this.db.templateSource.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, window: { skip?: number; take?: number }): Promise<TemplateSourceRecord[]> {
    return this.db.templateSource.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, omit: WITHOUT_FILES, ...window });
  }

  get(scope: TeamScope, uuid: string): Promise<TemplateSourceRecord> {
    return scope.templateSource(uuid);
  }

  /** Literal loopback/link-local/metadata hosts are refused when saved (names are checked at each sync). */
  private checkUrl(url: string): void {
    if (this.opts.allowPrivate) return;
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
    if ((isIP(host) !== 0 && isRefusedAddress(host)) || host === "localhost" || host.endsWith(".localhost")) {
      throw new Invalid({
        repository_url: [`${host} is a loopback, link-local or metadata address; refused (the instance setting PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it).`],
      });
    }
  }

  /** Creates the source (pending) and dispatches its first sync at once. */
  async create(scope: TeamScope, input: CreateTemplateSourceBody): Promise<TemplateSourceRecord> {
    scope.requireTeamAdmin(ADMIN);
    this.checkUrl(input.repository_url);
    const slug = templateSourceSlug(input.name);
    let source: TemplateSourceRecord;
    try {
      source = await this.db.templateSource.create({
        data: {
          uuid: newUuid(),
          teamId: scope.teamId,
          name: input.name,
          slug,
          repositoryUrl: input.repository_url,
          branch: input.branch,
          folderPath: input.folder_path,
          authToken: input.auth_token === undefined ? null : this.box.seal(input.auth_token),
        },
      });
    } catch (err) {
      if ((err as { code?: string }).code === "P2002") throw new Conflict(`A template source with the slug ${slug} already exists in this team: choose another name.`);
      throw err;
    }
    this.runner.enqueue(source.id);
    return source;
  }

  /**
   * Changes the fields given. A change of what is cloned (URL, branch, folder, token) makes the
   * stored templates stale: the source goes back to pending and syncs again. The slug stays.
   */
  async update(scope: TeamScope, uuid: string, input: UpdateTemplateSourceBody): Promise<TemplateSourceRecord> {
    scope.requireTeamAdmin(ADMIN);
    const s = await this.get(scope, uuid);
    if (input.repository_url !== undefined) this.checkUrl(input.repository_url);
    const data: Prisma.TemplateSourceUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.repository_url !== undefined) data.repositoryUrl = input.repository_url;
    if (input.branch !== undefined) data.branch = input.branch;
    if (input.folder_path !== undefined) data.folderPath = input.folder_path;
    if (input.auth_token !== undefined) data.authToken = input.auth_token === null ? null : this.box.seal(input.auth_token);
    if (input.is_enabled !== undefined) data.isEnabled = input.is_enabled;
    const resync =
      (input.repository_url !== undefined && input.repository_url !== s.repositoryUrl) ||
      (input.branch !== undefined && input.branch !== s.branch) ||
      (input.folder_path !== undefined && input.folder_path !== s.folderPath) ||
      input.auth_token !== undefined;
    // A running sync is left alone: it sees the change when it stores its result and syncs again.
    if (resync && s.syncStatus !== "syncing") data.syncStatus = "pending";
    const updated = await this.db.templateSource.update({ where: { id: s.id }, data });
    if (resync && updated.syncStatus === "pending") this.runner.enqueue(updated.id);
    return updated;
  }

  /** Deletes the source and what it found. Services created from its templates keep their own copy. */
  async remove(scope: TeamScope, uuid: string): Promise<void> {
    scope.requireTeamAdmin(ADMIN);
    const s = await this.get(scope, uuid);
    const { count } = await this.db.templateSource.deleteMany({ where: { id: s.id } });
    if (count === 0) throw new NotFound("Template source");
  }

  /** POST /{uuid}/sync: "already" when a sync of it is waiting or running (no second clone). */
  async sync(scope: TeamScope, uuid: string): Promise<SyncDispatch> {
    scope.requireTeamAdmin("sync template sources");
    const s = await this.get(scope, uuid);
    return this.requestSync(s.id);
  }

  /** POST /sync-all: every enabled source of the team; counts the syncs dispatched and those already under way. */
  async syncAll(scope: TeamScope): Promise<{ dispatched: number; already: number }> {
    scope.requireTeamAdmin("sync template sources");
    const sources = await this.db.templateSource.findMany({ where: { ...scope.inTeam, isEnabled: true }, select: { id: true }, orderBy: { id: "asc" } });
    let dispatched = 0;
    let already = 0;
    for (const s of sources) {
      if ((await this.requestSync(s.id)) === "dispatched") dispatched++;
      else already++;
    }
    return { dispatched, already };
  }

  private async requestSync(id: number): Promise<SyncDispatch> {
    if (this.runner.has(id)) return "already";
    // A row another process is syncing (alive) is not synced twice.
    const { count } = await this.db.templateSource.updateMany({ where: { id, syncStatus: { not: "syncing" } }, data: { syncStatus: "pending" } });
    if (count === 0) return "already";
    this.runner.enqueue(id);
    return "dispatched";
  }

  // -------------------------------------------------------------------------------------------
  // The sync runner

  /** Starts the recovery sweep (instance start). */
  start(log: Pick<Logger, "warn" | "error">): void {
    this.log = log;
    if (this.abort.signal.aborted) this.abort = new AbortController();
    this.runner.start(log);
  }

  /** Stops: running clones are killed and their rows put back to pending (the next start syncs them). */
  stop(): Promise<void> {
    return this.runner.stop(() => {
      this.abort.abort();
    });
  }

  /** Resolves when no sync is waiting or running here (tests read settled states). */
  idle(): Promise<void> {
    return this.runner.idle();
  }

  /** Stale `syncing` rows back to pending, then every pending row dispatched. */
  sweep(): Promise<void> {
    return this.runner.sweep();
  }

  private async run(id: number): Promise<void> {
    // The claim: only one process turns a pending row into syncing.
    const claimed = await this.db.templateSource.updateMany({
      where: { id, syncStatus: "pending" },
      data: { syncStatus: "syncing", syncHeartbeatAt: new Date() },
    });
    if (claimed.count === 0) return;
    const source = await this.db.templateSource.findUnique({ where: { id } });
    if (!source) return;
    const stopBeating = keepAlive(() => this.db.templateSource.updateMany({ where: { id, syncStatus: "syncing" }, data: { syncHeartbeatAt: new Date() } }), this.opts.heartbeatMs);
    let token: string | null = null;
    try {
      token = source.authToken === null ? null : this.box.open(source.authToken);
      const result = await this.fetch(source, token);
      // Stored only if what was cloned is still what the source names; else it syncs again.
      const same = { id, syncStatus: "syncing", repositoryUrl: source.repositoryUrl, branch: source.branch, folderPath: source.folderPath, authToken: source.authToken };
      const stored = await this.db.templateSource.updateMany({
        where: same,
        data: {
          syncStatus: "synced",
          syncError: null,
          syncHeartbeatAt: null,
          lastSyncedAt: new Date(),
          syncedCommit: result.commit,
          templateCount: result.templates.length,
          templates: JSON.stringify(result.templates),
          brokenTemplates: JSON.stringify(result.broken),
          ignoredTemplates: JSON.stringify(result.ignored),
          templateFiles: JSON.stringify(result.files),
        },
      });
      if (stored.count === 0) await this.changedMeanwhile(id);
    } catch (err) {
      if (this.abort.signal.aborted) {
        // Shutdown, not a failure: the next start syncs it again.
        await this.db.templateSource.updateMany({ where: { id, syncStatus: "syncing" }, data: { syncStatus: "pending", syncHeartbeatAt: null } }).catch(() => undefined);
        return;
      }
      const reason =
        err instanceof CheckoutError || err instanceof TemplateDirError ? scrub(err.message, token, 500) : "internal error (see the control plane's log)";
      if (!(err instanceof CheckoutError || err instanceof TemplateDirError)) this.log?.error({ templateSourceId: id, err: scrub(String(err), token) }, "template source sync failed");
      const failed = await this.db.templateSource.updateMany({
        where: { id, syncStatus: "syncing", repositoryUrl: source.repositoryUrl, branch: source.branch, folderPath: source.folderPath, authToken: source.authToken },
        data: { syncStatus: "failed", syncError: reason, syncHeartbeatAt: null },
      });
      if (failed.count === 0) await this.changedMeanwhile(id);
    } finally {
      stopBeating();
    }
  }

  /** The source was changed (or deleted) during its sync: the result is dropped and, if it still exists, it syncs again. */
  private async changedMeanwhile(id: number): Promise<void> {
    const { count } = await this.db.templateSource.updateMany({ where: { id, syncStatus: "syncing" }, data: { syncStatus: "pending", syncHeartbeatAt: null } });
    // Asked for while it runs: the runner runs it once more as soon as this run ends.
    if (count > 0) this.runner.enqueue(id);
  }

  /** Clone, find the folder, load the templates; the checkout is always removed. */
  private async fetch(source: TemplateSourceRecord, token: string | null) {
    const co = await checkout({
      url: source.repositoryUrl,
      branch: source.branch,
      token,
      allowPrivate: this.opts.allowPrivate,
      limits: this.opts.checkoutLimits,
      signal: this.abort.signal,
    });
    try {
      const dir = await folderInside(co.dir, source.folderPath);
      const loaded = await loadTemplateDir(dir, this.opts.dirLimits);
      const templates: StoredTemplate[] = loaded.templates.map(templateSummary);
      // What POST /services creates from: the text of each template that passed (parsed again then).
      const files: Record<string, string> = {};
      let bytes = 0;
      for (const t of loaded.templates) {
        files[t.name] = t.text;
        bytes += Buffer.byteLength(t.text, "utf8");
      }
      if (bytes > this.opts.storedBytes) throw new TemplateDirError(`the templates that passed hold ${bytes} bytes; at most ${this.opts.storedBytes} are stored`);
      return { commit: co.commit, templates, broken: loaded.broken, ignored: loaded.ignored, files };
    } finally {
      await co.remove();
    }
  }
}

/** The stored JSON columns, read back (a row written by this code; anything else reads as empty). */
export function storedTemplates(s: Pick<TemplateSourceRecord, "templates" | "brokenTemplates" | "ignoredTemplates">): { templates: StoredTemplate[]; broken: { file: string; reason: string }[]; ignored: string[] } {
  const parse = <T>(text: string): T[] => {
    try {
      const v = JSON.parse(text) as unknown;
      return Array.isArray(v) ? (v as T[]) : [];
    } catch {
      return [];
    }
  };
  // Read back through the schema: a row from an older sync lacks fields it has now.
  const templates = parse<unknown>(s.templates).flatMap((t) => {
    const ok = TemplateSummary.safeParse({ category: null, port: null, logo: null, ...(t as object) });
    return ok.success ? [ok.data] : [];
  });
  return { templates, broken: parse<{ file: string; reason: string }>(s.brokenTemplates), ignored: parse<string>(s.ignoredTemplates) };
}

// w5/svcextras: services from a source's templates

/** The stored text of one template of a source (as its last sync found it), or null. */
export function storedTemplateFile(s: { templateFiles: string }, name: string): string | null {
  try {
    const v = JSON.parse(s.templateFiles) as unknown;
    if (typeof v !== "object" || v === null || Array.isArray(v) || !Object.hasOwn(v, name)) return null;
    const text = (v as Record<string, unknown>)[name];
    return typeof text === "string" ? text : null;
  } catch {
    return null;
  }
}
