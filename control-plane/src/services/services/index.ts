import { MAX_SERVICE_STORAGES, ServiceActionResult, type ProxySettings, type ServiceComponentKind, type CreateServiceBody, type CreateServiceStorageBody, type ImageOverrides, type UpdateServiceBody } from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import { placedListSql, toInt, toIso, type SqlReader, type Window } from "../../db/reader.js";
import { whole } from "../../db/relations.js";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, DomainError, Invalid, NotFound, removedMeanwhile, Unavailable, UpstreamFailed } from "../../domain/errors.js";
import { isUniqueViolation } from "../../db/errors.js";
import { lockInTransaction } from "../../db/locks.js";
import { newUuid } from "../../lib/ids.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import { FIELD, LABEL_OVERRIDES_FIELD, applyLabelOverrides, bindSources, loadYaml, parseCompose, parseLabelOverrides } from "../../compose/index.js";
import {
  builtInCatalog,
  generateValues,
  parseHeader,
  parseTemplate,
  renderTemplate,
  TemplateRenderError,
  type LoadedTemplates,
  type Template,
} from "../../templates/index.js";
import { assertMayAddBindMounts } from "../bind-mounts.js";
import { assertDomainsFree, hostsOnUpdate } from "../domain-ownership.js";
import { routesOf } from "../deploy-spec.js";
import { forgetAttachments } from "../network-plan.js";
import type { EnvOwnerResolver } from "../env-vars.js";
import { BUILT_IN, type ServiceTemplateService } from "../service-templates.js";
import { storedTemplateFile, storedTemplates } from "../template-sources/index.js";
import { aggregateServiceStatus } from "./status.js";
import { generatedFqdn, generationBaseFor } from "./generated-domains.js";
// services lifecycle (issue 17)
import type { CancelledJob, JobQueue } from "../../jobs/queue.js";
import type { JobRow } from "../../jobs/queue.js";
import { lockServersNetworks, recordPlannedNetworks, type NetworkPlanContext } from "../network-plan.js";
import { ServerService } from "../servers.js";
import { buildServicePayload, ServicePayloadError, type ServiceRuntime } from "./lifecycle.js";
import { ServiceConfigurationKind } from "./configuration.js";

type Tx = Prisma.TransactionClient;

const withDetail = {
  environment: { include: { project: { select: { uuid: true, name: true } } } },
  server: { select: { uuid: true } },
  destination: { select: { uuid: true } },
  components: { orderBy: { id: "asc" } },
  envs: { orderBy: { id: "asc" } },
} satisfies Prisma.ServiceInclude;
export type ServiceWithDetail = Prisma.ServiceGetPayload<{ include: typeof withDetail }>;
const DETAIL_RELATIONS = ["environment", "environment.project", "server", "destination"];

type ListRow = [uuid: string, name: string, status: string, type: string | null, createdAt: unknown, projectUuid: string, environmentName: string, serverUuid: string];

export interface ServiceListItem {
  uuid: string;
  name: string;
  status: string;
  type: string | null;
  createdAt: string;
  projectUuid: string;
  environmentName: string;
  serverUuid: string;
}

export interface ServiceDeleteFlags {
  delete_configurations: boolean;
  delete_volumes: boolean;
  docker_cleanup: boolean;
}

/**
 * The header a custom compose file (docker_compose_raw) is parsed under: the template parser
 * wants one, and a user's compose file is a template without a catalog entry. The `---` ends
 * the header, so the user's own leading comments are never read as header keys.
 */
const CUSTOM_HEADER = "# documentation: https://capstan.invalid/docs/services.md\n# slogan: Custom compose service\n---\n";
/** The template name a custom compose file is parsed as (never shown: its type is null). */
const CUSTOM_NAME = "compose-service";

/** start/stop/restart: deadlines of their jobs, and how long the request waits (as for applications). */
const START_TIMEOUT_MS = 1_800_000;
const ACTION_TIMEOUT_MS = 300_000;
const ACTION_WAIT_MS = 30_000;
/** Removal waits this long for an agent that is away: it runs once the server is back. */
const REMOVE_TIMEOUT_MS = 24 * 3_600_000;
const ACTION_WORDS = {
  start: { doing: "Starting", done: "started" },
  stop: { doing: "Stopping", done: "stopped" },
  restart: { doing: "Restarting", done: "restarted" },
} as const;

/** A template ready for a service: where it came from, and the parsed template. */
interface Resolved {
  type: string | null;
  source: string | null;
  template: Template;
}

/**
 * Services (spec 4.6, issue 17): records of one-click compose stacks, their components and
 * variables. A service's generated values (SERVICE_PASSWORD_* and the other generators, and
 * input defaults) are created once, when the template first needs them, and stored sealed as
 * its variables: every later render reads them back byte for byte (templates/generate.ts), so
 * no redeploy, restart, PATCH or upgrade changes a password the service's data was set up
 * with. SERVICE_FQDN_ and SERVICE_URL_ values are never stored: they follow each component's fqdn.
 */
export class ServiceService {
  /** How long start/stop/restart wait for the agent before answering 202 (tests shorten it). */
  actionWaitMs = ACTION_WAIT_MS;

  constructor(
    private readonly db: Db,
    private readonly reader: SqlReader,
    private readonly box: SecretBox,
    private readonly templates: ServiceTemplateService,
    private readonly imageOverrides: ImageOverrides,
    private readonly runtime: ServiceRuntime,
    private readonly builtIn: () => Promise<LoadedTemplates> = builtInCatalog,
  ) {
    this.configuration = new ServiceConfigurationKind(
      db,
      box,
      {
        composeTemplate: (raw, type) => this.composeTemplate(raw, type?.replace(/^.*\//, "") ?? CUSTOM_NAME),
        render: (template, stored, opts) => this.render(template, stored, opts),
        storedBinds: (raw, type) => this.storedBinds(raw, type),
        declaredVolumes: (raw, type) => this.declaredVolumes(raw, type),
        syncComponents: (tx, serviceId, template) => this.syncComponents(tx, serviceId, template),
        storeCreated: (tx, serviceId, created, values, template) => this.storeCreated(tx, serviceId, created, values, ServiceService.generatedKeys(template)),
      },
      { dialect: runtime.networkPlan.dialect, hostsChanged: runtime.hostsChanged },
    );
  }

  /** Configuration and full resource backups of services (issue 19): the document and its restore, under this class's compose rules. */
  readonly configuration: ServiceConfigurationKind;

  // -------------------------------------------------------------------------------------------
  // Reads

  /** The caller's services, one SQL statement: the team, the environment visibility rule, the page window. */
  async list(scope: TeamScope, window: Window): Promise<ServiceListItem[]> {
    const { sql: where, params } = scope.visibleRows(`sv."teamId"`, "environment");
    const sql = placedListSql("Service", "sv", `sv."uuid", sv."name", sv."status", sv."type", sv."createdAt", p."uuid", e."name", s."uuid"`, where, window, params);
    const rows = await this.reader.rows<ListRow>(sql, params);
    return rows.map(([uuid, name, status, type, createdAt, projectUuid, environmentName, serverUuid]) => ({
      uuid,
      name,
      status,
      type,
      createdAt: toIso(createdAt),
      projectUuid,
      environmentName,
      serverUuid,
    }));
  }

  async count(scope: TeamScope): Promise<number> {
    const { sql: where, params } = scope.visibleRows(`sv."teamId"`, "environment");
    const [row] = await this.reader.all<{ n: unknown }>(`SELECT COUNT(*) AS "n" FROM "Service" sv JOIN "Environment" e ON e."id" = sv."environmentId" WHERE ${where}`, params);
    return toInt(row!.n);
  }

  /** The detail, with whether the caller may see variable values (TeamScope.maySeeSecrets: the one rule). */
  async detail(scope: TeamScope, uuid: string): Promise<{ service: ServiceWithDetail; reveal: boolean }> {
    const ref = await scope.service(uuid, "view");
    const service = whole(await this.db.service.findUnique({ where: { id: ref.id }, include: withDetail }), DETAIL_RELATIONS);
    if (!service) throw removedMeanwhile("Service");
    return { service, reveal: await scope.maySeeSecrets(ref.environment) };
  }

  /** A variable's value as stored (sealed at rest). */
  open(sealed: string): string {
    return this.box.open(sealed);
  }

  /** The owners of service variables (EnvVarService): values shown to callers who may read the service's secrets. */
  envOwners(): EnvOwnerResolver {
    return async (scope, uuid, need) => {
      const service = await scope.service(uuid, need);
      return { owner: { serviceId: service.id }, noun: "A service", canReveal: () => scope.maySeeSecrets(service.environment) };
    };
  }

  // -------------------------------------------------------------------------------------------
  // Templates

  /** `type` as GET /services/templates lists it, for the caller's team; unknown names are a 422 naming the field. */
  private async templateOf(scope: TeamScope, type: string): Promise<Resolved> {
    const offered = (await this.templates.list(scope, {})).find((t) => t.name === type);
    if (!offered) {
      await this.refuseBrokenSourceTemplate(scope, type);
      throw new Invalid({ type: [`Unknown template ${JSON.stringify(type.slice(0, 100))}: GET /services/templates lists the templates this team can use.`] });
    }
    if (offered.source !== BUILT_IN) return this.sourceTemplate(scope, type, offered.source, offered.template.name);
    const template = (await this.builtIn()).templates.find((t) => t.name === offered.template.name);
    if (!template) throw new Invalid({ type: [`Unknown template ${JSON.stringify(type.slice(0, 100))}.`] });
    return { type, source: BUILT_IN, template };
  }

  // w5/svcextras: services from a source's templates

  /**
   * A template of an enabled source, from the text its last sync stored (templateFiles), parsed
   * again now: a template that passed then but fails this release's checks is a 422 with its
   * reason. The service keeps its own copy of the text: the source may go away later.
   */
  private async sourceTemplate(scope: TeamScope, type: string, slug: string, name: string): Promise<Resolved> {
    const source = await this.db.templateSource.findFirst({ where: { ...scope.inTeam, slug, isEnabled: true }, select: { templateFiles: true } });
    const text = source ? storedTemplateFile(source, name) : null;
    if (text === null) throw new Invalid({ type: [`${type}: the template source ${slug} no longer has this template; sync it and look at GET /services/templates again.`] });
    const parsed = parseTemplate(name, text);
    if (!parsed.ok) throw new Invalid({ type: [`${type} (template source ${slug}) cannot be used: ${parsed.reason}`] });
    return { type, source: slug, template: parsed.template };
  }

  /**
   * A name that is a broken template of an enabled source (`name` or `slug/name`) is a 422 with
   * the reason its sync recorded, not an "unknown template".
   */
  private async refuseBrokenSourceTemplate(scope: TeamScope, type: string): Promise<void> {
    const slash = type.indexOf("/");
    const slug = slash > 0 ? type.slice(0, slash) : null;
    const name = slash > 0 ? type.slice(slash + 1) : type;
    const sources = await this.db.templateSource.findMany({
      where: { ...scope.inTeam, isEnabled: true, ...(slug !== null ? { slug } : {}) },
      select: { slug: true, templates: true, brokenTemplates: true, ignoredTemplates: true },
      orderBy: { id: "asc" },
    });
    for (const s of sources) {
      const broken = storedTemplates(s).broken.find((b) => b.file.replace(/\.ya?ml$/i, "") === name);
      if (broken) throw new Invalid({ type: [`${type} (template source ${s.slug}) cannot be used: ${broken.reason}`] });
    }
  }

  /** A compose file a user sent (create or PATCH): parsed as a template, its reasons reported under docker_compose_raw. */
  private composeTemplate(raw: string, name: string): Template {
    const text = parseHeader(raw).ok ? raw : CUSTOM_HEADER + raw;
    const parsed = parseTemplate(name, text);
    if (!parsed.ok) throw new Invalid({ [FIELD]: [parsed.reason] });
    // What users see and PATCH is their own text, without the header added for the parser.
    return { ...parsed.template, text: raw };
  }

  /**
   * The service's values and rendered compose, checked by the compose checker (the injection
   * corpus, bind-mount and network rules of application compose files). Required inputs
   * without a value are rendered with a placeholder for the check only; such a service gets
   * no stored rendering until they are set.
   */
  private render(
    template: Template,
    stored: Record<string, string>,
    { domains = {}, labelOverrides = {} }: { domains?: Record<string, string>; labelOverrides?: Record<string, Record<string, string>> } = {},
  ) {
    const generated = generateValues(template, stored, domains);
    const values = { ...generated.values, ...Object.fromEntries(generated.missing.map((k) => [k, "placeholder"])) };
    let compose: string;
    try {
      // Label overrides (spec 4.15) are part of the file the checker sees and the deploy starts from.
      compose = applyLabelOverrides(renderTemplate(template, values, { imageOverrides: this.imageOverrides }).compose, labelOverrides);
    } catch (err) {
      if (err instanceof TemplateRenderError) throw new Invalid({ [FIELD]: err.problems.slice(0, 20) });
      throw err;
    }
    const binds = bindSources(parseCompose(compose));
    return { generated, compose: generated.missing.length ? "" : compose, binds };
  }

  /** What a template says about each variable: generated secrets are marked as such. */
  private static generatedKeys(template: Template): Set<string> {
    return new Set(template.variables.filter((v) => v.kind === "generated").map((v) => v.name));
  }

  // -------------------------------------------------------------------------------------------
  // Create, update, delete

  async create(scope: TeamScope, input: CreateServiceBody): Promise<{ uuid: string; name: string; type: string | null; domains: string[]; message?: string }> {
    const where = await scope.placement(input);
    const resolved: Resolved =
      input.type !== undefined ? await this.templateOf(scope, input.type) : { type: null, source: null, template: this.composeTemplate(input.docker_compose_raw!, CUSTOM_NAME) };
    const { generated, compose, binds } = this.render(resolved.template, {});
    if (input.instant_deploy && generated.missing.length) {
      throw new Invalid({ instant_deploy: [`The service cannot start before ${generated.missing.slice(0, 10).join(", ")} have values: create it without instant_deploy, set them, then start it.`] });
    }
    await assertMayAddBindMounts(this.db, scope, binds);
    const generatedKeys = ServiceService.generatedKeys(resolved.template);
    const uuid = newUuid();
    const name = input.name ?? (resolved.type ?? CUSTOM_NAME).replace(/^.*\//, "");
    let domains: GeneratedDomains = { assigned: [], skipped: [] };
    await this.db.$transaction(async (tx) => {
      const service = await tx.service.create({
        data: {
          uuid,
          teamId: scope.teamId,
          ...where,
          name,
          description: input.description ?? "",
          type: resolved.type,
          templateSource: resolved.source,
          composeRaw: resolved.template.text,
          composeRendered: this.box.seal(compose),
        },
        select: { id: true },
      });
      const added = await this.syncComponents(tx, service.id, resolved.template);
      await this.storeCreated(tx, service.id, generated.created, generated.values, generatedKeys);
      domains = await this.generateDomains(tx, scope, { id: service.id, uuid, ...where }, resolved.template, added);
    });
    // w6/dnsres: records follow the hostnames the components were given.
    if (domains.assigned.length) await this.runtime.hostsChanged?.(scope.teamId, domains.assigned.map((d) => d.fqdn));
    const result = { uuid, name, type: resolved.type, domains: domains.assigned.map((d) => d.fqdn) };
    const notes = skippedNotes(domains);
    // instant_deploy: the first start is queued (a durable job: it runs when the server's agent
    // is there). A rule refusing it is reported in the answer: the service was created.
    if (input.instant_deploy) {
      try {
        await this.enqueueStart(scope, uuid, { pull: false, recreate: false });
      } catch (err) {
        if (!(err instanceof DomainError)) throw err;
        return { ...result, message: [`Created, not started: ${err.message}`, ...notes].join(" ") };
      }
    }
    return notes.length ? { ...result, message: notes.join(" ") } : result;
  }

  /**
   * Generated domains (generated-domains.ts, docs/services.md "Generated domains"): each
   * routable service application among `added` (components this transaction created) gets
   * `<component>-<short id>.<base>` as its fqdn, under the team's domain lock and the host rule
   * PATCH /service-applications follows (domain-ownership.ts). A host another resource holds
   * is skipped with the reason, never taken. Stored once: later renders, restarts and PATCHes
   * of the compose file keep it; the user changes or clears it with PATCH.
   */
  private async generateDomains(
    tx: Tx,
    scope: TeamScope,
    service: { id: number; uuid: string; serverId: number; environmentId: number },
    template: Template,
    added: { id: number; name: string }[],
  ): Promise<GeneratedDomains> {
    const out: GeneratedDomains = { assigned: [], skipped: [] };
    const byName = new Map(template.services.map((s) => [s.name, s]));
    const wanted = added.filter((c) => byName.get(c.name)?.kind === "application" && byName.get(c.name)?.routable);
    if (!wanted.length) return out;
    const environment = await tx.environment.findUnique({ where: { id: service.environmentId }, select: { id: true, projectId: true, name: true } });
    if (!environment) throw removedMeanwhile("Environment");
    const settings = this.runtime.generatedDomains ?? { wildcard: null, publicUrl: "" };
    const base = await generationBaseFor(tx, { teamId: scope.teamId, serverId: service.serverId, environment }, settings);
    if (!base) return out;
    await lockInTransaction(tx, this.runtime.networkPlan.dialect, "teamDomains", scope.teamId);
    for (const c of wanted) {
      const fqdn = generatedFqdn(base, c.name, service.uuid, byName.get(c.name)!.path);
      try {
        await assertDomainsFree(tx, scope, { componentId: c.id, serverId: service.serverId, environment }, fqdn);
      } catch (err) {
        if (!(err instanceof Conflict)) throw err;
        out.skipped.push({ name: c.name, reason: err.message });
        continue;
      }
      await tx.serviceComponent.update({ where: { id: c.id }, data: { fqdn, hosts: hostsOnUpdate(fqdn) } });
      out.assigned.push({ name: c.name, fqdn });
    }
    return out;
  }

  /** Values a render created (generated secrets, input defaults): stored once, sealed; never written again by a render. */
  private async storeCreated(tx: Tx, serviceId: number, created: string[], values: Record<string, string>, generatedKeys: Set<string>): Promise<void> {
    for (const key of created) {
      await tx.envVar.create({
        data: { uuid: newUuid(), serviceId, key, value: this.box.seal(values[key]!), isGenerated: generatedKeys.has(key) },
      });
    }
  }

  /** The components of a (new) compose file: kept by compose service name (uuids stay), added, removed. Answers the added ones. */
  private async syncComponents(tx: Tx, serviceId: number, template: Template): Promise<{ id: number; name: string }[]> {
    const existing = await tx.serviceComponent.findMany({ where: { serviceId } });
    const byName = new Map(existing.map((c) => [c.name, c]));
    const names = new Set(template.services.map((s) => s.name));
    const gone = existing.filter((c) => !names.has(c.name)).map((c) => c.id);
    const added: { id: number; name: string }[] = [];
    if (gone.length) await tx.serviceComponent.deleteMany({ where: { id: { in: gone } } });
    for (const s of template.services) {
      const image = s.image;
      const current = byName.get(s.name);
      // A component that stops being an application loses its route; one that becomes one has none yet.
      const data = { kind: s.kind, image, excludeFromStatus: s.excludeFromStatus, ...(s.kind !== "application" ? { fqdn: null } : {}) };
      // w7/svcroute: its stored hosts go with its fqdn.
      if (current) await tx.serviceComponent.update({ where: { id: current.id }, data: { ...data, ...(s.kind !== "application" ? { hosts: { deleteMany: {} } } : {}) } });
      else added.push(await tx.serviceComponent.create({ data: { uuid: newUuid(), serviceId, name: s.name, ...data }, select: { id: true, name: true } }));
    }
    const components = await tx.serviceComponent.findMany({ where: { serviceId }, select: { status: true, excludeFromStatus: true } });
    await tx.service.update({ where: { id: serviceId }, data: { status: aggregateServiceStatus(components) } });
    return added;
  }

  /**
   * PATCH: name, description, docker_compose_raw. A new compose file is checked like an
   * application's; values it needs that the service lacks are generated and stored, values it
   * has stay byte-identical. Takes effect on the next start or restart.
   */
  async update(scope: TeamScope, uuid: string, input: UpdateServiceBody): Promise<{ notes: string[] }> {
    const ref = await scope.service(uuid, "manage");
    const data: Prisma.ServiceUncheckedUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    if (input.docker_compose_raw === undefined) {
      await this.db.service.update({ where: { id: ref.id }, data });
      return { notes: [] };
    }
    const template = this.composeTemplate(input.docker_compose_raw, ref.type?.replace(/^.*\//, "") ?? CUSTOM_NAME);
    const rows = await this.db.envVar.findMany({ where: { serviceId: ref.id, isPreview: false } });
    const stored = Object.fromEntries(rows.map((r) => [r.key, this.box.open(r.value)]));
    // Label overrides add labels only: the binds are the same with or without them.
    const { binds } = this.render(template, stored);
    // Binds the stored file already had were approved when it was stored; only new ones need the right.
    const before = new Set(this.storedBinds(ref.composeRaw, ref.type));
    await assertMayAddBindMounts(
      this.db,
      scope,
      binds.filter((b) => !before.has(b)),
    );
    data.composeRaw = input.docker_compose_raw;
    const fqdnsBefore = (await this.db.serviceComponent.findMany({ where: { serviceId: ref.id, fqdn: { not: null } }, select: { fqdn: true } })).map((c) => c.fqdn);
    let domains: GeneratedDomains = { assigned: [], skipped: [] };
    await this.db.$transaction(async (tx) => {
      // Rendered with the overrides read under the service's render lock: a label-override PUT
      // (rerender) committed before this point is in the file, one after it renders this file again.
      await lockInTransaction(tx, this.runtime.networkPlan.dialect, "serviceRender", ref.id);
      const { generated, compose } = this.render(template, stored, { labelOverrides: await this.storedOverrides(ref.id, tx) });
      data.composeRendered = this.box.seal(compose);
      await tx.service.update({ where: { id: ref.id }, data });
      const added = await this.syncComponents(tx, ref.id, template);
      await this.storeCreated(tx, ref.id, generated.created, generated.values, ServiceService.generatedKeys(template));
      // A routable application the new file adds gets its generated domain, as at creation.
      domains = await this.generateDomains(tx, scope, { id: ref.id, uuid: ref.uuid, serverId: ref.serverId, environmentId: ref.environmentId }, template, added);
    });
    // w6/dnsres: a component removed, or no longer an application, loses its hostname; an added one gains its own.
    await this.runtime.hostsChanged?.(ref.teamId, [...fqdnsBefore, ...domains.assigned.map((d) => d.fqdn)]);
    return { notes: skippedNotes(domains) };
  }

  /** Bind sources of the stored compose file (one that no longer parses binds nothing that counts as approved). */
  private storedBinds(raw: string, type: string | null): string[] {
    try {
      return this.render(this.composeTemplate(raw, type?.replace(/^.*\//, "") ?? CUSTOM_NAME), {}).binds;
    } catch {
      return [];
    }
  }

  /**
   * DELETE: the record goes with its components and variables, and in the same transaction a
   * removal job for its server (service.action remove): its containers, its own network and its
   * routes always go; its volumes when delete_volumes; the compose file the agent keeps unless
   * delete_configurations is false; its images when docker_cleanup. Start jobs still queued for
   * it are cancelled first, so none runs after the removal.
   */
  async remove(scope: TeamScope, uuid: string, flags: ServiceDeleteFlags): Promise<void> {
    const ref = await scope.service(uuid, "delete", { components: { select: { fqdn: true } } });
    const proxy = await this.runtime.proxy(ref.serverId, { removingService: ref.id });
    await this.runtime.backups?.beforeServiceDelete(ref.id);
    let cancelled: CancelledJob[] = [];
    await this.db.$transaction(async (tx) => {
      cancelled = await this.runtime.jobs.cancelWithin(
        tx,
        { serverIds: [ref.serverId], types: ["service.deploy"] },
        (payload) => (payload as { service?: { uuid?: string } } | null)?.service?.uuid === ref.uuid,
        "cancelled: the service was deleted",
      );
      await this.runtime.jobs.enqueue(
        tx,
        ref.serverId,
        "service.action",
        {
          service: { uuid: ref.uuid, name: ref.name },
          action: "remove",
          delete_volumes: flags.delete_volumes,
          docker_cleanup: flags.docker_cleanup,
          delete_configurations: flags.delete_configurations,
          proxy,
        },
        REMOVE_TIMEOUT_MS,
      );
      await forgetAttachments(tx, "service", [ref.id]);
      await tx.service.delete({ where: { id: ref.id } });
    });
    void this.runtime.jobs.cancelled(cancelled).catch(() => {});
    this.runtime.jobs.nudge(ref.serverId);
    // w6/dnsres: the components' hostnames go with the service.
    await this.runtime.hostsChanged?.(ref.teamId, ref.components.map((c) => c.fqdn));
  }

  /**
   * The services of environments being deleted (projects.ts): a removal job per service in the
   * caller's transaction (containers, networks, routes; volumes stay, as the DELETE defaults
   * say), their queued starts cancelled, their network attachments forgotten (no foreign key).
   */
  async planRemoval(where: { environmentIds: number[] }): Promise<{ enqueue(tx: Tx): Promise<void>; kick(): void }> {
    const select = { id: true, uuid: true, name: true, serverId: true } as const;
    const before = where.environmentIds.length ? await this.db.service.findMany({ where: { environmentId: { in: where.environmentIds } }, select }) : [];
    const proxies = new Map<number, ProxySettings>();
    for (const serverId of new Set(before.map((r) => r.serverId))) proxies.set(serverId, await this.runtime.proxy(serverId));
    const cancelled: CancelledJob[] = [];
    return {
      enqueue: async (tx) => {
        const rows = where.environmentIds.length ? await tx.service.findMany({ where: { environmentId: { in: where.environmentIds } }, select }) : [];
        // One created on another server after the read above has no proxy settings read: refuse the whole deletion.
        if (rows.some((r) => !proxies.has(r.serverId))) throw new Conflict("A service was created in this environment while it was being deleted; nothing was deleted, try again.");
        const uuids = new Set(rows.map((r) => r.uuid));
        cancelled.push(
          ...(await this.runtime.jobs.cancelWithin(
            tx,
            { serverIds: [...proxies.keys()], types: ["service.deploy"] },
            (payload) => uuids.has((payload as { service?: { uuid?: string } } | null)?.service?.uuid ?? ""),
            "cancelled: the service's environment was deleted",
          )),
        );
        for (const row of rows) {
          await this.runtime.jobs.enqueue(
            tx,
            row.serverId,
            "service.action",
            { service: { uuid: row.uuid, name: row.name }, action: "remove", delete_volumes: false, docker_cleanup: true, delete_configurations: true, proxy: proxies.get(row.serverId)! },
            REMOVE_TIMEOUT_MS,
          );
        }
        await forgetAttachments(tx, "service", rows.map((r) => r.id));
      },
      kick: () => {
        void this.runtime.jobs.cancelled(cancelled).catch(() => {});
        for (const serverId of proxies.keys()) this.runtime.jobs.nudge(serverId);
      },
    };
  }

  // -------------------------------------------------------------------------------------------
  // Start, stop, restart (services lifecycle, issue 17)

  /**
   * Writes a service.deploy job for the service as it is now: its template rendered again with
   * its stored values (generated ones byte-identical, changed variables and storages taking
   * effect), rewritten like a compose application's file, with its networks recorded in the
   * transaction that writes the job. Returns the job's id.
   */
  private async enqueueStart(scope: TeamScope, uuid: string, opts: { pull: boolean; recreate: boolean }): Promise<string> {
    const ref = await scope.service(uuid, "deploy", { components: { orderBy: { id: "asc" } } });
    const rows = await this.db.envVar.findMany({ where: { serviceId: ref.id, isPreview: false }, orderBy: { id: "asc" } });
    const stored = Object.fromEntries(rows.map((r) => [r.key, this.box.open(r.value)]));
    // SERVICE_FQDN_/SERVICE_URL_ name one URL: a component's first domain (w7/svcroute; the proxy routes them all).
    const domains = Object.fromEntries(ref.components.filter((c) => c.fqdn).map((c) => [c.name, c.fqdn!.split(",")[0]!]));
    const template = this.composeTemplate(ref.composeRaw, ref.type?.replace(/^.*\//, "") ?? CUSTOM_NAME);
    // The start deploys what the file says now, with the components' label overrides (spec 4.15).
    const { generated, compose } = this.render(template, stored, { domains, labelOverrides: await this.storedOverrides(ref.id) });
    if (generated.missing.length) {
      throw new Conflict(`The service needs values for ${generated.missing.slice(0, 10).join(", ")} before it can start: set them with PATCH /services/${ref.uuid}/envs.`);
    }
    // w7/svcroute: each service application with an fqdn is routed, to the template's port for it (else its first exposed port).
    const routed = Object.fromEntries(
      ref.components
        .filter((c) => c.kind === "application" && c.fqdn)
        .map((c) => [c.name, { routes: routesOf(c.fqdn), port: template.services.find((s) => s.name === c.name)?.port ?? null }]),
    );
    let payload;
    try {
      payload = await buildServicePayload(this.runtime, { service: ref, compose, env: stored, pull: opts.pull, recreate: opts.recreate, routed });
    } catch (err) {
      if (err instanceof ServicePayloadError) throw new Conflict(err.message);
      throw err;
    }
    const ctx: NetworkPlanContext = this.runtime.networkPlan;
    const jobId = await this.db.$transaction(async (tx) => {
      await lockServersNetworks(tx, ctx.dialect, [ref.serverId]);
      // Values a new template version needs are stored before they are used (never regenerated).
      await this.storeCreated(tx, ref.id, generated.created, generated.values, ServiceService.generatedKeys(template));
      await recordPlannedNetworks(
        { ...ctx, db: tx },
        { teamId: ref.teamId, serverId: ref.serverId, specs: [...payload.run.ensure_networks, ...payload.proxy.ensure_networks], proxyNetworks: payload.proxy.networks },
      );
      return this.runtime.jobs.enqueue(tx, ref.serverId, "service.deploy", payload, START_TIMEOUT_MS);
    });
    this.runtime.jobs.nudge(ref.serverId);
    return jobId;
  }

  /**
   * start / stop / restart: start runs compose up of the service as it is now (pull first when
   * asked), restart the same with every container recreated, stop stops its containers. Waits
   * up to actionWaitMs for the agent: 200 with the statuses, or 202 when it is still at it.
   */
  async action(scope: TeamScope, uuid: string, action: "start" | "stop" | "restart", opts: { pull?: boolean } = {}): Promise<{ status: number; message: string; serviceStatus: string }> {
    const ref = await scope.service(uuid, "deploy");
    if (!ServerService.agentConnected(ref.server)) throw new Unavailable(`Server ${ref.server.name} is unreachable: its agent is not connected.`);
    let jobId: string;
    if (action === "stop") {
      const proxy = await this.runtime.proxy(ref.serverId);
      jobId = await this.runtime.jobs.enqueue(
        this.db,
        ref.serverId,
        "service.action",
        { service: { uuid: ref.uuid, name: ref.name }, action: "stop", delete_volumes: false, docker_cleanup: false, delete_configurations: true, proxy },
        ACTION_TIMEOUT_MS,
      );
      this.runtime.jobs.nudge(ref.serverId);
    } else {
      jobId = await this.enqueueStart(scope, uuid, { pull: opts.pull ?? false, recreate: action === "restart" });
    }
    const words = ACTION_WORDS[action];
    let timer: NodeJS.Timeout | undefined;
    const outcome = await Promise.race([
      this.runtime.jobs.wait(jobId),
      new Promise<null>((resolve) => {
        timer = setTimeout(() => resolve(null), this.actionWaitMs);
      }),
    ]).finally(() => clearTimeout(timer));
    if (!outcome) return { status: 202, message: `${words.doing} ${ref.name}: the agent is still at it; the status will follow.`, serviceStatus: ref.status };
    if (outcome.status !== "succeeded") throw new UpstreamFailed(`${words.doing} ${ref.name} failed: ${outcome.error}`);
    const now = await this.db.service.findUnique({ where: { id: ref.id }, select: { status: true } });
    return { status: 200, message: `Service ${words.done}.`, serviceStatus: now?.status ?? ref.status };
  }

  /**
   * Outcome of service.deploy and service.action (jobs/outcome-map.ts): the agent's answer
   * carries each component's engine status; the service's is the one rule over them
   * (status.ts). A failed job changes nothing here (the agent's status reports follow the engine).
   */
  async jobEnded(job: JobRow): Promise<void> {
    if (job.status !== "succeeded" || !job.result) return;
    const payload = JSON.parse(job.payload) as { service?: { uuid?: string }; action?: string } | null;
    const result = ServiceActionResult.safeParse(JSON.parse(job.result));
    if (!payload?.service?.uuid || payload.action === "remove" || !result.success) return;
    const service = await this.db.service.findFirst({ where: { uuid: payload.service.uuid, serverId: job.serverId }, select: { id: true, components: true } });
    if (!service) return;
    const reported = new Map(result.data.components.map((c) => [c.name, c.status]));
    await this.db.$transaction(async (tx) => {
      const components = service.components.map((c) => ({ ...c, status: reported.get(c.name) ?? "exited" }));
      for (const c of components) await tx.serviceComponent.updateMany({ where: { id: c.id, serviceId: service.id }, data: { status: c.status } });
      await tx.service.updateMany({ where: { id: service.id }, data: { status: aggregateServiceStatus(components) } });
    });
  }

  // -------------------------------------------------------------------------------------------
  // Storages: mounted into one component from the service's next start

  async storages(scope: TeamScope, uuid: string) {
    const ref = await scope.service(uuid, "view");
    const rows = await this.db.serviceStorage.findMany({ where: { serviceId: ref.id }, orderBy: { id: "asc" }, include: { component: { select: { name: true } } } });
    return { service: ref, rows };
  }

  /**
   * A named volume (`<service uuid>-<name>` on the server) or a bind mount (host_path: owners and
   * admins, or members where the team allows it) for one compose service. A name the compose file
   * declares as a volume is refused: both would be the same Docker volume.
   */
  async addStorage(scope: TeamScope, uuid: string, input: CreateServiceStorageBody) {
    const ref = await scope.service(uuid, "manage", { components: { orderBy: { id: "asc" } } });
    const target =
      input.service_name !== undefined
        ? ref.components.find((c) => c.name === input.service_name)
        : (ref.components.find((c) => c.kind === "application") ?? ref.components[0]);
    if (!target) throw new Invalid({ service_name: [`The service has no compose service ${JSON.stringify(input.service_name ?? "")}; it has ${ref.components.map((c) => c.name).join(", ")}.`] });
    const declared = this.declaredVolumes(ref.composeRaw, ref.type);
    if (declared.includes(input.name)) throw new Conflict(`The compose file already declares a volume named ${input.name}; choose another name.`);
    if (input.host_path) await assertMayAddBindMounts(this.db, scope, [input.host_path]);
    const existing = await this.db.serviceStorage.findMany({ where: { serviceId: ref.id }, select: { name: true, mountPath: true, componentId: true } });
    if (existing.length >= MAX_SERVICE_STORAGES) throw new Invalid({ name: [`A service has at most ${MAX_SERVICE_STORAGES} storages.`] });
    if (existing.some((v) => v.name === input.name)) throw new Conflict(`A storage named ${input.name} already exists on this service.`);
    if (existing.some((v) => v.componentId === target.id && v.mountPath === input.mount_path)) throw new Conflict(`Something is already mounted at ${input.mount_path} in ${target.name}.`);
    try {
      const row = await this.db.serviceStorage.create({
        data: { uuid: newUuid(), serviceId: ref.id, componentId: target.id, name: input.name, mountPath: input.mount_path, hostPath: input.host_path ?? null },
      });
      return { service: ref, row: { ...row, component: { name: target.name } } };
    } catch (err) {
      // A concurrent add of the same name or path.
      if (isUniqueViolation(err)) throw new Conflict("A storage with this name or mount path already exists on this service.");
      throw err;
    }
  }

  async removeStorage(scope: TeamScope, uuid: string, storageUuid: string): Promise<void> {
    const ref = await scope.service(uuid, "manage");
    const row = await this.db.serviceStorage.findFirst({ where: { uuid: storageUuid, serviceId: ref.id }, select: { id: true } });
    if (!row) throw new NotFound("Storage");
    await this.db.serviceStorage.delete({ where: { id: row.id } });
  }

  /** Named volumes of the stored compose file, as rendered (a file that no longer parses declares none). */
  private declaredVolumes(raw: string, type: string | null): string[] {
    try {
      // The rendered file: it also declares the named volumes a catalog template uses without declaring.
      const template = this.composeTemplate(raw, type?.replace(/^.*\//, "") ?? CUSTOM_NAME);
      const generated = generateValues(template, {}, {});
      const values = { ...generated.values, ...Object.fromEntries(generated.missing.map((k) => [k, "placeholder"])) };
      const { volumes } = loadYaml(renderTemplate(template, values).compose) as { volumes?: unknown };
      return volumes && typeof volumes === "object" && !Array.isArray(volumes) ? Object.keys(volumes) : [];
    } catch {
      return [];
    }
  }

  // -------------------------------------------------------------------------------------------
  // w7/svcroute: a service application's domains (issue 17)

  /**
   * PATCH /service-applications/{uuid} {fqdn}: the domains the proxy routes to one service
   * application, under the host rule applications follow (domain-ownership.ts: one rule for
   * both kinds, a host one uses cannot be taken by the other). The check and the write (the
   * fqdn and its ServiceComponentHost rows, in one transaction) hold the team's domain lock.
   * Takes effect on the service's next start or restart, as its SERVICE_FQDN_/SERVICE_URL_ values do.
   */
  async setApplicationFqdn(scope: TeamScope, uuid: string, fqdn: string | null): Promise<ServiceApplicationView> {
    const component = await scope.serviceComponent("application", uuid, "manage");
    const claimant = { componentId: component.id, serverId: component.service.serverId, environment: component.service.environment };
    await this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.runtime.networkPlan.dialect, "teamDomains", scope.teamId);
      await assertDomainsFree(tx, scope, claimant, fqdn);
      const n = await tx.serviceComponent.updateMany({ where: { id: component.id, kind: "application" }, data: { fqdn } });
      if (n.count === 0) throw removedMeanwhile("Service application");
      await tx.serviceComponent.update({ where: { id: component.id }, data: { hosts: hostsOnUpdate(fqdn) } });
    });
    // w6/dnsres: records follow the hostnames it gave up and the ones it took.
    await this.runtime.hostsChanged?.(component.service.teamId, [component.fqdn, fqdn]);
    return { uuid: component.uuid, name: component.name, image: component.image, status: component.status, excludeFromStatus: component.excludeFromStatus, fqdn, serviceUuid: component.service.uuid };
  }

  // -------------------------------------------------------------------------------------------
  // w5/svcextras: label overrides (spec 4.15, docs/proxy-labels.md)

  /** The overrides of the service's components by compose service name (stored YAML that no longer passes counts as none). */
  private async storedOverrides(serviceId: number, db: Db | Tx = this.db): Promise<Record<string, Record<string, string>>> {
    const rows = await db.serviceComponent.findMany({ where: { serviceId, NOT: { labelOverrides: "" } }, select: { name: true, labelOverrides: true } });
    const out: Record<string, Record<string, string>> = {};
    for (const r of rows) {
      try {
        out[r.name] = parseLabelOverrides(r.labelOverrides).labels;
      } catch {
        /* stored under older limits: applies nothing until PUT again */
      }
    }
    return out;
  }

  /** The label overrides of a service application or database (kind) of the caller's team (view access). */
  async labelOverrides(scope: TeamScope, kind: ServiceComponentKind, uuid: string): Promise<LabelOverridesView> {
    const component = await scope.serviceComponent(kind, uuid, "view");
    return overridesView(component, component.labelOverrides);
  }

  /**
   * PUT (yaml) and DELETE (""): checks the YAML (422 under `yaml`, nothing changed), stores it
   * on the component as sent, and re-renders the service's stored compose file with it, so the
   * next start uses it. Reserved keys are dropped and named in the answer.
   */
  async setLabelOverrides(scope: TeamScope, kind: ServiceComponentKind, uuid: string, yaml: string): Promise<LabelOverridesView> {
    const component = await scope.serviceComponent(kind, uuid, "manage");
    const parsed = parseLabelOverrides(yaml);
    const stored = yaml.trim() === "" ? "" : yaml;
    await this.rerender(component.serviceId, { id: component.id, name: component.name, yaml: stored, labels: parsed.labels, what: kind === "application" ? "Service application" : "Service database" });
    return overridesView(component, stored);
  }

  /**
   * The service's stored rendering made again from its compose content, its stored values and
   * every component's overrides (with `change` in place of that component's), in one
   * transaction holding the service's render lock (db/locks.ts serviceRender), as a PATCH of the
   * compose file does: the two never render from each other's stale state, so neither drops the other.
   */
  private async rerender(serviceId: number, change: { id: number; name: string; yaml: string; labels: Record<string, string>; what: string }): Promise<void> {
    await this.db.$transaction(async (tx) => {
      await lockInTransaction(tx, this.runtime.networkPlan.dialect, "serviceRender", serviceId);
      const service = await tx.service.findUnique({ where: { id: serviceId }, select: { composeRaw: true, type: true } });
      if (!service) throw removedMeanwhile("Service");
      const overrides = await this.storedOverrides(serviceId, tx);
      overrides[change.name] = change.labels;
      const template = this.composeTemplate(service.composeRaw, service.type?.replace(/^.*\//, "") ?? CUSTOM_NAME);
      const rows = await tx.envVar.findMany({ where: { serviceId, isPreview: false } });
      const values = Object.fromEntries(rows.map((r) => [r.key, this.box.open(r.value)]));
      let rendered;
      try {
        rendered = this.render(template, values, { labelOverrides: overrides });
      } catch (err) {
        // The merged file failed the compose checker: the overrides are what is wrong.
        if (err instanceof Invalid) throw new Invalid({ [LABEL_OVERRIDES_FIELD]: Object.values(err.errors).flat().slice(0, 20) });
        throw err;
      }
      const { generated, compose } = rendered;
      await tx.service.update({ where: { id: serviceId }, data: { composeRendered: this.box.seal(compose) } });
      const c = await tx.serviceComponent.updateMany({ where: { id: change.id, serviceId }, data: { labelOverrides: change.yaml } });
      if (c.count === 0) throw removedMeanwhile(change.what);
      await this.storeCreated(tx, serviceId, generated.created, generated.values, ServiceService.generatedKeys(template));
    });
  }
}

/** Generated domains given in one transaction (generateDomains), and the components left without one with the reason. */
interface GeneratedDomains {
  assigned: { name: string; fqdn: string }[];
  skipped: { name: string; reason: string }[];
}

/** What the answer says about components left without a generated domain. */
function skippedNotes(domains: GeneratedDomains): string[] {
  return domains.skipped.map((s) => `${s.name} got no generated domain (${s.reason.replace(/\.$/, "")}); give it one with PATCH /service-applications/{uuid}.`);
}

/** A service application after PATCH /service-applications/{uuid} (http/mappers/services.ts). */
export interface ServiceApplicationView {
  uuid: string;
  name: string;
  image: string;
  status: string;
  excludeFromStatus: boolean;
  fqdn: string | null;
  serviceUuid: string;
}

/** A component's label overrides as stored and as they apply (http/mappers/services.ts labelOverridesDto). */
export interface LabelOverridesView {
  uuid: string;
  serviceUuid: string;
  name: string;
  yaml: string;
  labels: Record<string, string>;
  dropped: string[];
}

function overridesView(component: { uuid: string; name: string; service: { uuid: string } }, yaml: string): LabelOverridesView {
  let parsed: { labels: Record<string, string>; dropped: string[] } = { labels: {}, dropped: [] };
  try {
    parsed = parseLabelOverrides(yaml);
  } catch {
    /* stored under older limits: shown as applying nothing */
  }
  return { uuid: component.uuid, serviceUuid: component.service.uuid, name: component.name, yaml, labels: parsed.labels, dropped: parsed.dropped };
}
