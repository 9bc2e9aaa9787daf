import { randomBytes } from "node:crypto";
import {
  AppActionResult,
  DELETE_DEFAULTS,
  OPEN_DEPLOYMENT_STATUSES,
  PublicGitUrl,
  RepoSlug,
  SshGitUrl,
  GitUrl,
  imageReference,
  createMasker,
  type ApplicationSource,
  type BuildPack,
  type CreateApplicationCommon,
  type ProxySettings,
  type UpdateApplicationBody,
} from "@capstan/shared";
import type { z } from "zod";
import type { Db, Prisma } from "../db/client.js";
import { openRunJobs } from "./backups/common.js";
import { placedListSql, toInt, toIso, type SqlReader, type Window } from "../db/reader.js";
import { whole } from "../db/relations.js";
import type { ApplicationRef, TeamScope } from "../domain/scope.js";
import { Invalid, Conflict, Unavailable, UpstreamFailed, removedMeanwhile, type FieldErrors } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { CancelledJob, JobQueue, JobRow } from "../jobs/queue.js";
import { bindSources, parseCompose } from "../compose/index.js";
import { assertMayAddBindMounts } from "./bind-mounts.js";
import { ServerService } from "./servers.js";
import { forgetAttachments } from "./network-plan.js";
import { assertDomainsFree, hostsOnCreate, hostsOnUpdate } from "./domain-ownership.js";
import { lockInTransaction } from "../db/locks.js";

type Tx = Prisma.TransactionClient;

/** The proxy settings of a server, for jobs that end with a proxy sync (services/deploy-spec.ts). */
/** The proxy settings for a job on the server; `removing`: ids of applications the job removes. */
export type ProxySource = (serverId: number, removing?: number[]) => Promise<ProxySettings>;

/** start/stop/restart: the job's deadline, and how long the request waits for its outcome. */
const ACTION_TIMEOUT_MS = 120_000;
const ACTION_WAIT_MS = 30_000;
/** Removal waits this long for an agent that is away: it runs once the server is back. */
const REMOVE_TIMEOUT_MS = 24 * 3600_000;
const LOGS_TIMEOUT_MS = 30_000;

export type AppAction = "start" | "stop" | "restart";
const ACTION_WORDS: Record<AppAction, { done: string; doing: string }> = {
  start: { done: "started", doing: "Starting" },
  stop: { done: "stopped", doing: "Stopping" },
  restart: { done: "restarted", doing: "Restarting" },
};

export type { ApplicationRef };

const withDetail = {
  environment: { include: { project: { select: { uuid: true, name: true } } } },
  server: { select: { uuid: true } },
  destination: { select: { uuid: true } },
  gitApp: { select: { uuid: true } },
  privateKey: { select: { uuid: true } },
  envs: { orderBy: { id: "asc" } },
  volumes: { orderBy: { id: "asc" } },
  deployments: { orderBy: { id: "desc" }, take: 10 },
} satisfies Prisma.ApplicationInclude;
export type ApplicationWithDetail = Prisma.ApplicationGetPayload<{ include: typeof withDetail }>;
/** The required relations of withDetail (db/relations.ts: without one, the application was deleted meanwhile). */
const DETAIL_RELATIONS = ["environment", "environment.project", "server", "destination"];

/** A row of the list query, in select-list order. */
type ListRow = [
  uuid: string,
  name: string,
  fqdn: string | null,
  status: string,
  buildPack: string,
  gitRepository: string | null,
  gitBranch: string | null,
  createdAt: unknown,
  projectUuid: string,
  environmentName: string,
  serverUuid: string,
];

export interface ApplicationListItem {
  uuid: string;
  name: string;
  fqdn: string | null;
  status: string;
  buildPack: string;
  gitRepository: string | null;
  gitBranch: string | null;
  createdAt: string;
  projectUuid: string;
  environmentName: string;
  serverUuid: string;
}

/** What every create path adds to the common parameters, by source. */
export type CreateSource =
  | { source: "public"; git_repository: string; git_branch: string; build_pack: BuildPack; base_directory?: string | undefined }
  | { source: "private_git_app"; git_app_uuid: string; git_repository: string; git_branch: string; build_pack: BuildPack; base_directory?: string | undefined }
  | { source: "private_deploy_key"; private_key_uuid: string; git_repository: string; git_branch: string; build_pack: BuildPack; base_directory?: string | undefined }
  | { source: "dockerfile"; dockerfile: string }
  | { source: "dockerimage"; docker_registry_image_name: string; docker_registry_image_tag?: string | undefined }
  | { source: "dockercompose"; docker_compose_raw: string };

export interface DeleteFlags {
  delete_configurations: boolean;
  delete_volumes: boolean;
  docker_cleanup: boolean;
}

const GIT_SOURCES: readonly ApplicationSource[] = ["public", "private_git_app", "private_deploy_key"];

/** A repository name out of a URL or slug, for a default application name. */
function repoName(url: string): string {
  const last = url.replace(/\/+$/, "").split(/[/:]/).pop() ?? "";
  return last.replace(/\.git$/, "") || "application";
}

/** Bind sources of a stored compose file (one that no longer parses binds nothing that counts as approved). */
export function storedBindSources(raw: string | null): string[] {
  if (!raw) return [];
  try {
    return bindSources(parseCompose(raw));
  } catch {
    return [];
  }
}

/** The clone URL of `owner/name` on a git app's host. */
export function gitAppCloneUrl(htmlUrl: string, slug: string): string {
  return `${htmlUrl}/${slug.replace(/\.git$/, "")}.git`;
}

/**
 * Applications (spec 4.4): records, settings, and the start/stop/restart/remove/logs work the
 * agent does for them. Every id a client sends is resolved inside the caller's team; what an
 * action needs is checked on the application's environment (the team scope, domain/scope.ts).
 */
export class ApplicationService {
  /** How long start/stop/restart wait for the agent before answering 202 (tests shorten it). */
  actionWaitMs = ACTION_WAIT_MS;

  constructor(
    private readonly db: Db,
    private readonly reader: SqlReader,
    private readonly jobs: JobQueue,
    private readonly box: SecretBox,
    private readonly proxy: ProxySource,
    /** Inbound webhook URL per git provider of an application (services/webhooks.ts). */
    readonly webhookUrls: (appUuid: string) => Record<string, string>,
    /**
     * w5/dns: an application's hostnames changed (created with an fqdn, fqdn changed, deleted):
     * given the fqdn values before and after, the DNS service dispatches the reconcile of the
     * managed domains they fall under (services/dns/). Called after the change is stored.
     */
    private readonly hostsChanged: (teamId: number, fqdns: (string | null)[]) => Promise<void> = async () => undefined,
  ) {}

  /** Outcome of app.action (jobs/outcome-map.ts): the agent's answer to start/stop/restart is the application's new engine status. */
  async actionEnded(job: JobRow): Promise<void> {
    if (job.status !== "succeeded" || !job.result) return;
    const payload = JSON.parse(job.payload) as { app?: { uuid?: string }; action?: string } | null;
    const result = AppActionResult.safeParse(JSON.parse(job.result));
    if (!payload?.app?.uuid || payload.action === "remove" || !result.success) return;
    await this.db.application.updateMany({ where: { uuid: payload.app.uuid, serverId: job.serverId }, data: { status: result.data.status } });
  }

  // -------------------------------------------------------------------------------------------
  // Reads

  /**
   * The caller's applications, one SQL statement: the team, the environment visibility rule
   * (TeamScope.visibleRows), the page window. No IN list, no per-row query.
   */
  async list(scope: TeamScope, window: Window, filter: { environmentId?: number } = {}): Promise<ApplicationListItem[]> {
    const { where, params } = this.listFilter(scope, filter);
    const columns = `a."uuid", a."name", a."fqdn", a."status", a."buildPack", a."gitRepository", a."gitBranch", a."createdAt",
        p."uuid", e."name", s."uuid"`;
    const sql = placedListSql("Application", "a", columns, where, window, params);
    const rows = await this.reader.rows<ListRow>(sql, params);
    return rows.map(([uuid, name, fqdn, status, buildPack, gitRepository, gitBranch, createdAt, projectUuid, environmentName, serverUuid]) => ({
      uuid,
      name,
      fqdn,
      status,
      buildPack,
      gitRepository,
      gitBranch,
      createdAt: toIso(createdAt),
      projectUuid,
      environmentName,
      serverUuid,
    }));
  }

  async count(scope: TeamScope): Promise<number> {
    const { where, params } = this.listFilter(scope);
    const [row] = await this.reader.all<{ n: unknown }>(
      `SELECT COUNT(*) AS "n" FROM "Application" a JOIN "Environment" e ON e."id" = a."environmentId" WHERE ${where}`,
      params,
    );
    return toInt(row!.n);
  }

  private listFilter(scope: TeamScope, filter: { environmentId?: number } = {}): { where: string; params: (string | number)[] } {
    let { sql: where, params } = scope.visibleRows(`a."teamId"`, "environment");
    if (filter.environmentId !== undefined) {
      where += ` AND a."environmentId" = ?`;
      params.push(filter.environmentId);
    }
    return { where, params };
  }

  async detail(scope: TeamScope, uuid: string): Promise<ApplicationWithDetail> {
    const app = await scope.application(uuid, "view");
    const row = whole(await this.db.application.findUnique({ where: { id: app.id }, include: withDetail }), DETAIL_RELATIONS);
    if (!row) throw removedMeanwhile("Application");
    return row;
  }

  // -------------------------------------------------------------------------------------------
  // Create and update

  /** fqdn and its alias domains: one value, or a 422 when both are given and differ. */
  private domainsOf(input: { fqdn?: string | null | undefined; domains?: string | null | undefined }): string | null | undefined {
    if (input.fqdn !== undefined && input.domains !== undefined && input.fqdn !== input.domains) {
      throw new Invalid({ domains: ["Give fqdn or domains (its alias), not both with different values."] });
    }
    return input.fqdn !== undefined ? input.fqdn : input.domains;
  }

  /** Settings shared by create and PATCH, as columns; only what the input carries. */
  private settings(input: Partial<CreateApplicationCommon> & { name?: string | undefined }): Prisma.ApplicationUncheckedUpdateInput {
    const data: Prisma.ApplicationUncheckedUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    if (input.ports_exposes !== undefined) data.portsExposes = input.ports_exposes;
    const fqdn = this.domainsOf(input);
    if (fqdn !== undefined) data.fqdn = fqdn;
    if (input.health_check_enabled !== undefined) data.healthCheckEnabled = input.health_check_enabled;
    if (input.health_check_path !== undefined) data.healthCheckPath = input.health_check_path;
    if (input.health_check_port !== undefined) data.healthCheckPort = input.health_check_port;
    if (input.health_check_interval !== undefined) data.healthCheckInterval = input.health_check_interval;
    if (input.health_check_timeout !== undefined) data.healthCheckTimeout = input.health_check_timeout;
    if (input.health_check_retries !== undefined) data.healthCheckRetries = input.health_check_retries;
    if (input.health_check_start_period !== undefined) data.healthCheckStartPeriod = input.health_check_start_period;
    if (input.limits_memory !== undefined) data.limitsMemory = input.limits_memory;
    if (input.limits_cpus !== undefined) data.limitsCpus = input.limits_cpus;
    return data;
  }

  /** Compose content checked by the compose module; its field errors come back as a 422. Returns its bind sources. */
  private checkCompose(raw: string): string[] {
    return bindSources(parseCompose(raw));
  }


  private image(name: string, tag: string | undefined): string {
    const r = imageReference(name, tag);
    if ("error" in r) throw new Invalid({ docker_registry_image_tag: [r.error] });
    return r.ref;
  }

  async create(scope: TeamScope, input: CreateApplicationCommon & CreateSource): Promise<{ uuid: string; name: string; fqdn: string | null }> {
    const where = await scope.placement(input);
    const source: Prisma.ApplicationUncheckedCreateInput = {
      uuid: newUuid(),
      teamId: scope.teamId,
      ...where,
      name: "",
      source: input.source,
      buildPack: "containerfile",
      webhookSecret: this.box.seal(randomBytes(32).toString("hex")),
    };
    let defaultName: string;
    switch (input.source) {
      case "public":
      case "private_git_app":
      case "private_deploy_key": {
        let url = input.git_repository;
        if (input.source === "private_git_app") {
          const gitApp = await scope.gitApp(input.git_app_uuid);
          source.gitAppId = gitApp.id;
          url = gitAppCloneUrl(gitApp.htmlUrl, input.git_repository);
          if (!GitUrl.safeParse(url).success) throw new Invalid({ git_repository: [`The git app's html_url and this repository do not form a valid clone URL (${url}).`] });
        }
        if (input.source === "private_deploy_key") {
          const key = await scope.privateKey(input.private_key_uuid);
          source.privateKeyId = key.id;
        }
        source.gitRepository = url;
        source.gitBranch = input.git_branch;
        source.buildPack = input.build_pack;
        if (input.base_directory !== undefined) source.baseDirectory = input.base_directory;
        defaultName = repoName(input.git_repository);
        break;
      }
      case "dockerfile":
        source.dockerfile = input.dockerfile;
        source.buildPack = "containerfile";
        defaultName = "dockerfile-app";
        break;
      case "dockerimage": {
        source.dockerImage = this.image(input.docker_registry_image_name, input.docker_registry_image_tag);
        source.buildPack = "containerimage";
        defaultName = repoName(source.dockerImage.replace(/@.*$/, "").replace(/:[^:/]*$/, ""));
        break;
      }
      case "dockercompose":
        await assertMayAddBindMounts(this.db, scope, this.checkCompose(input.docker_compose_raw));
        source.composeRaw = input.docker_compose_raw;
        source.buildPack = "containercompose";
        defaultName = "compose-app";
        break;
    }
    const settings = this.settings(input) as Partial<Prisma.ApplicationUncheckedCreateInput>;
    const data: Prisma.ApplicationUncheckedCreateInput = { ...source, ...settings, name: input.name ?? defaultName };
    const environment = await this.db.environment.findUniqueOrThrow({ where: { id: where.environmentId }, select: { id: true, projectId: true } });
    // w7/svcroute: the host rule's check and the write hold the team's domain lock (service applications' domains take it too).
    const app = await this.withDomainLock(scope.teamId, data.fqdn ?? null, async (db) => {
      await assertDomainsFree(db, scope, { serverId: where.serverId, environment }, (data.fqdn as string | null | undefined) ?? null);
      return db.application.create({ data: { ...data, hosts: hostsOnCreate(data.fqdn ?? null) }, select: { uuid: true, name: true, fqdn: true } });
    });
    if (app.fqdn) await this.hostsChanged(scope.teamId, [app.fqdn]);
    return app;
  }

  /**
   * w7/svcroute: a write that claims domains (`fqdn` set) runs with its host-rule check in one
   * transaction holding the team's domain lock (db/locks.ts teamDomains), which service
   * applications' domain writes hold too: two claims of one host never both pass the check.
   */
  private async withDomainLock<T>(teamId: number, fqdn: string | null, write: (db: Db | Prisma.TransactionClient) => Promise<T>): Promise<T> {
    if (!fqdn) return write(this.db);
    return this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.reader.kind, "teamDomains", teamId);
      return write(tx);
    });
  }

  /** PATCH: only the fields given change; each must fit the application's source. */
  async update(scope: TeamScope, uuid: string, input: UpdateApplicationBody): Promise<void> {
    const ref = await scope.application(uuid, "manage");
    const app = await this.db.application.findUniqueOrThrow({ where: { id: ref.id }, include: { gitApp: { select: { htmlUrl: true } } } });
    const data = this.settings(input);
    const errors: FieldErrors = {};
    const only = (field: keyof UpdateApplicationBody, sources: readonly string[], what: string) => {
      if (input[field] !== undefined && !sources.includes(app.source)) (errors[field] ??= []).push(`Only ${what} have this setting.`);
      return input[field] !== undefined && sources.includes(app.source);
    };
    const gitWhat = "applications built from a git repository";
    if (only("git_branch", GIT_SOURCES, gitWhat)) data.gitBranch = input.git_branch!;
    if (only("build_pack", GIT_SOURCES, gitWhat)) data.buildPack = input.build_pack!;
    if (only("base_directory", GIT_SOURCES, gitWhat)) data.baseDirectory = input.base_directory!;
    if (only("git_repository", GIT_SOURCES, gitWhat)) {
      const url = this.repositoryFor(app.source, input.git_repository!, app.gitApp?.htmlUrl ?? null, errors);
      if (url) data.gitRepository = url;
    }
    if (only("dockerfile", ["dockerfile"], "applications created from a Dockerfile")) data.dockerfile = input.dockerfile!;
    const imageWhat = "applications created from an image";
    const name = only("docker_registry_image_name", ["dockerimage"], imageWhat);
    const tag = only("docker_registry_image_tag", ["dockerimage"], imageWhat);
    if (name || tag) {
      const base = input.docker_registry_image_name ?? app.dockerImage!.replace(/(@.*|:[^:/]*)$/, "");
      data.dockerImage = this.image(base, input.docker_registry_image_tag);
    }
    let addedBinds: string[] = [];
    if (only("docker_compose_raw", ["dockercompose"], "applications created from a compose file")) {
      // Binds the stored file already had were approved when it was stored; only new ones need the right.
      const before = new Set(storedBindSources(app.composeRaw));
      addedBinds = this.checkCompose(input.docker_compose_raw!).filter((p) => !before.has(p));
      data.composeRaw = input.docker_compose_raw!;
    }
    if (Object.keys(errors).length) throw new Invalid(errors);
    await assertMayAddBindMounts(this.db, scope, addedBinds);
    await this.withDomainLock(app.teamId, (data.fqdn as string | null | undefined) ?? null, async (db) => {
      if (data.fqdn !== undefined) await assertDomainsFree(db, scope, { id: app.id, serverId: app.serverId, environment: ref.environment }, data.fqdn as string | null);
      await db.application.update({ where: { id: app.id }, data: data.fqdn !== undefined ? { ...data, hosts: hostsOnUpdate(data.fqdn as string | null) } : data });
    });
    if (data.fqdn !== undefined && data.fqdn !== app.fqdn) await this.hostsChanged(app.teamId, [app.fqdn, data.fqdn as string | null]);
  }

  /** A new git_repository, validated as the application's create path validates it. */
  private repositoryFor(source: string, value: string, htmlUrl: string | null, errors: FieldErrors): string | null {
    const check = (schema: z.ZodType<string>, transform: (v: string) => string = (v) => v) => {
      const r = schema.safeParse(value);
      if (!r.success) {
        errors.git_repository = r.error.issues.map((i) => i.message);
        return null;
      }
      return transform(r.data);
    };
    if (source === "public") return check(PublicGitUrl);
    if (source === "private_deploy_key") return check(SshGitUrl);
    return check(RepoSlug, (slug) => gitAppCloneUrl(htmlUrl!, slug));
  }

  // -------------------------------------------------------------------------------------------
  // Delete

  /** Refuses while a deployment of one of these applications is queued or running. */
  private async assertNoOpenDeployment(appIds: number[]): Promise<void> {
    if (!appIds.length) return;
    const open = await this.db.deployment.findFirst({
      where: { applicationId: { in: appIds }, status: { in: [...OPEN_DEPLOYMENT_STATUSES] } },
      select: { application: { select: { name: true } } },
    });
    if (open) throw new Conflict(`Application ${open.application.name} has a deployment queued or in progress; cancel it or wait for it to end first.`);
  }

  private removalPayload(app: { uuid: string; name: string }, flags: DeleteFlags, proxy: ProxySettings) {
    return {
      app: { uuid: app.uuid, name: app.name },
      action: "remove" as const,
      delete_volumes: flags.delete_volumes,
      docker_cleanup: flags.docker_cleanup,
      delete_configurations: flags.delete_configurations,
      proxy,
    };
  }

  /**
   * Everything needed to remove the applications of some environments along with them: read
   * (and checked) before the caller's transaction, enqueued inside it, delivered after it.
   */
  async planRemoval(where: { environmentIds: number[] }): Promise<{ enqueue(tx: Tx): Promise<void>; kick(): void }> {
    const apps = await this.db.application.findMany({
      where: { environmentId: { in: where.environmentIds } },
      select: { id: true, uuid: true, name: true, serverId: true, teamId: true },
    });
    await this.assertNoOpenDeployment(apps.map((a) => a.id));
    const proxies = new Map<number, ProxySettings>();
    for (const serverId of new Set(apps.map((a) => a.serverId))) proxies.set(serverId, await this.proxy(serverId, apps.map((a) => a.id)));
    const cancelled: CancelledJob[] = [];
    return {
      enqueue: async (tx) => {
        // A deployment admitted after the check above (its record goes with the application)
        // must not run afterwards: its build or deploy job ends with the environment, here.
        const now = await tx.application.findMany({ where: { environmentId: { in: where.environmentIds } }, select: { uuid: true, teamId: true } });
        // One created after the read above would go with the environment without a removal job
        // (its server's proxy settings were not read): the whole deletion is refused instead.
        const planned = new Set(apps.map((a) => a.uuid));
        const added = now.find((a) => !planned.has(a.uuid));
        if (added) throw new Conflict("An application was created in this environment while it was being deleted; nothing was deleted, try again.");
        if (now.length) {
          const uuids = new Set(now.map((a) => a.uuid));
          const servers = await tx.server.findMany({ where: { teamId: now[0]!.teamId }, select: { id: true } }); // build servers too
          cancelled.push(
            ...(await this.jobs.cancelWithin(
              tx,
              { serverIds: servers.map((s) => s.id), types: ["app.deploy", "app.build"] },
              (payload) => uuids.has((payload as { app?: { uuid?: string } } | null)?.app?.uuid ?? ""),
              "cancelled: the application's environment was deleted",
            )),
          );
        }
        for (const app of apps) {
          await this.jobs.enqueue(tx, app.serverId, "app.action", this.removalPayload(app, DELETE_DEFAULTS, proxies.get(app.serverId)!), REMOVE_TIMEOUT_MS);
        }
        await forgetAttachments(tx, "application", apps.map((a) => a.id));
      },
      // Delivery after commit (the agents hear of the cancels first); a kick that fails is retried by the queue's pump.
      kick: () => {
        void this.jobs.cancelled(cancelled).catch(() => {});
        for (const serverId of proxies.keys()) this.jobs.nudge(serverId);
      },
    };
  }

  /**
   * DELETE: the record goes (with its variables, storages and history), and in the same
   * transaction a removal job for the server: its containers and its proxy routes always go (a
   * deleted application must not keep serving: issue 15). The flags decide the rest:
   * delete_configurations whether the files the agent keeps for it (a compose file) go too,
   * delete_volumes its volumes, docker_cleanup its images and build cache.
   */
  async remove(scope: TeamScope, uuid: string, flags: DeleteFlags): Promise<void> {
    const app = await scope.application(uuid, "delete");
    await this.assertNoOpenDeployment([app.id]);
    const proxy = await this.proxy(app.serverId, [app.id]);
    const backupJobs = await this.db.$transaction(async (tx) => {
      await this.jobs.enqueue(tx, app.serverId, "app.action", this.removalPayload(app, flags, proxy), REMOVE_TIMEOUT_MS);
      await forgetAttachments(tx, "application", [app.id]);
      // resource restores (w7/restore): the open resource.backup / resource.restore jobs of its resource backups (their rows go with it).
      const open = await openRunJobs(tx, { applicationId: app.id });
      await tx.application.delete({ where: { id: app.id } });
      return open;
    });
    // After the commit: the agent stops them (a stopped application's containers are started again; its removal waits for the application's lock).
    for (const id of backupJobs) await this.jobs.cancel(id, "the application was deleted");
    this.jobs.nudge(app.serverId);
    if (app.fqdn) await this.hostsChanged(app.teamId, [app.fqdn]);
  }

  // -------------------------------------------------------------------------------------------
  // Start, stop, restart, logs

  private requireAgent(app: ApplicationRef): void {
    if (!ServerService.agentConnected(app.server)) {
      throw new Unavailable(`Server ${app.server.name} is unreachable: its agent is not connected.`);
    }
  }

  /**
   * Runs start/stop/restart on the server and waits up to 30 s for the agent's answer. The
   * answer carries the new status; a slower agent gets a 202 and the status follows later.
   */
  async action(scope: TeamScope, uuid: string, action: AppAction): Promise<{ status: number; message: string; appStatus: string }> {
    const app = await scope.application(uuid, "deploy");
    await this.assertNoOpenDeployment([app.id]);
    if (action !== "stop") {
      const deployed = await this.db.deployment.findFirst({ where: { applicationId: app.id, status: "finished" }, select: { id: true } });
      if (!deployed) throw new Conflict(`Application ${app.name} has not been deployed yet: deploy it first (POST /applications/${app.uuid}/deploy).`);
    }
    this.requireAgent(app);
    const proxy = await this.proxy(app.serverId);
    const jobId = await this.jobs.enqueue(
      this.db,
      app.serverId,
      "app.action",
      { app: { uuid: app.uuid, name: app.name }, action, delete_volumes: false, docker_cleanup: false, proxy },
      ACTION_TIMEOUT_MS,
    );
    this.jobs.nudge(app.serverId);
    const words = ACTION_WORDS[action];
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      this.jobs.wait<"app.action">(jobId),
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), this.actionWaitMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!outcome) {
      return { status: 202, message: `${words.doing} ${app.name}: the agent is still at it; the status will follow.`, appStatus: app.status };
    }
    if (outcome.status !== "succeeded") throw new UpstreamFailed(`${words.doing} ${app.name} failed: ${outcome.error}`);
    return { status: 200, message: `Application ${words.done}.`, appStatus: outcome.result.status };
  }

  /**
   * Recent log lines of the application's serving container, its variables' values masked for
   * every caller (as deployment logs mask them): by the agent before the lines leave the server,
   * and here again (an older agent).
   */
  async logs(scope: TeamScope, uuid: string, since: number, tail: number) {
    const app = await scope.application(uuid, "view");
    this.requireAgent(app);
    const envs = await this.db.envVar.findMany({ where: { applicationId: app.id }, select: { value: true } });
    const secrets = envs.map((e) => this.box.open(e.value));
    const job = await this.jobs.run(app.serverId, "app.logs", { app: { uuid: app.uuid, name: app.name }, since_s: since, tail, secrets }, LOGS_TIMEOUT_MS);
    if (job.status !== "succeeded") throw new UpstreamFailed(`Reading the logs of ${app.name} failed: ${job.error}`);
    const mask = createMasker(secrets);
    return { ...job.result, lines: job.result.lines.map(mask) };
  }
}
