import {
  EnvKey,
  HostPath,
  MAX_ENVS,
  MAX_SERVICE_STORAGES,
  MountPath,
  SERVICE_CONFIGURATION_FORMAT,
  ServiceConfiguration,
  StorageName,
  parseDomains,
  storedFeatures,
  type Feature,
} from "@capstan/shared";
import type { Db, Prisma } from "../../db/client.js";
import { lockInTransaction } from "../../db/locks.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import { DomainError, Invalid } from "../../domain/errors.js";
import { parseLabelOverrides } from "../../compose/index.js";
import type { Template } from "../../templates/index.js";
import { hostsOnUpdate } from "../domain-ownership.js";
import { PayloadError, safeJson } from "../backups/common.js";
import { ConfigurationRefused, domainTakenReason, freeUuid, hostClaimedElsewhere, hostsOf, resetVariables, documentText, type ApplyRights, type ConfigurationKind } from "../backups/configuration.js";

// ---- configuration and full resource backups of services (issue 19) ----

type Tx = Prisma.TransactionClient;

const LABEL_OVERRIDES_FEATURE: Feature = "PROXY_LABEL_OVERRIDES";

/** What of ServiceService a service's configuration is read and written with: its compose rules, in one place. */
export interface ServiceCompose {
  /** The template a compose file is read as (Invalid: why it is not accepted). */
  composeTemplate(raw: string, type: string | null): Template;
  /** The rendered file with its values and overrides, checked by the compose checker (Invalid: why not). */
  render(template: Template, stored: Record<string, string>, opts: { labelOverrides: Record<string, Record<string, string>> }): { generated: { created: string[]; values: Record<string, string> }; compose: string; binds: string[] };
  /** Bind sources of a stored compose file (approved when it was stored). */
  storedBinds(raw: string, type: string | null): string[];
  /** Named volumes a compose file declares (a storage may not take one's name). */
  declaredVolumes(raw: string, type: string | null): string[];
  /** The components of a compose file kept by name, added, removed. */
  syncComponents(tx: Tx, serviceId: number, template: Template): Promise<unknown>;
  /** Values a render created, stored once (generated secrets marked). */
  storeCreated(tx: Tx, serviceId: number, created: string[], values: Record<string, string>, template: Template): Promise<void>;
}

const documentSelect = {
  id: true,
  uuid: true,
  name: true,
  description: true,
  type: true,
  templateSource: true,
  composeRaw: true,
  components: { orderBy: { id: "asc" }, select: { name: true, kind: true, fqdn: true, labelOverrides: true } },
  envs: { orderBy: { id: "asc" }, select: { uuid: true, key: true, value: true, isPreview: true, isGenerated: true } },
  storages: { orderBy: { id: "asc" }, select: { uuid: true, name: true, mountPath: true, hostPath: true, component: { select: { name: true } } } },
} satisfies Prisma.ServiceSelect;

interface Plan {
  doc: ServiceConfiguration;
  serviceId: number;
  teamId: number;
  template: Template;
  rendered: ReturnType<ServiceCompose["render"]>;
  fqdnsBefore: (string | null)[];
  hostsBefore: string[];
}

const reasonOf = (err: unknown): string => (err instanceof Invalid ? Object.values(err.errors).flat().slice(0, 3).join("; ") : (err as Error).message);

/**
 * A service's configuration document (shared ServiceConfiguration): its settings, its compose
 * file as users PATCH it, each compose service's domains and label overrides, its variables
 * (generated secrets too) and its storages, secrets sealed as at rest. A restore resets the
 * service to it under the same rules as a PATCH of the compose file, a PUT of label overrides
 * and a PATCH of a service application's domains, in one transaction; like those, it takes
 * effect on the service's next start or restart.
 */
export class ServiceConfigurationKind implements ConfigurationKind<Plan, (string | null)[]> {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly compose: ServiceCompose,
    private readonly runtime: { dialect: "sqlite" | "postgresql"; hostsChanged?: (teamId: number, fqdns: (string | null)[]) => Promise<void> },
  ) {}

  async document(serviceId: number, at: Date): Promise<string> {
    const s = await this.db.service.findUnique({ where: { id: serviceId }, select: documentSelect });
    if (!s) throw new PayloadError("the service was deleted");
    const doc: ServiceConfiguration = {
      format: SERVICE_CONFIGURATION_FORMAT,
      kind: "service",
      taken_at: at.toISOString(),
      service: { uuid: s.uuid, name: s.name, description: s.description, type: s.type, template_source: s.templateSource, docker_compose_raw: s.composeRaw },
      components: s.components.map((c) => ({ name: c.name, kind: c.kind === "application" ? "application" : "database", fqdn: c.fqdn, label_overrides: c.labelOverrides })),
      envs: s.envs.map((e) => ({ uuid: e.uuid, key: e.key, value_sealed: e.value, is_preview: e.isPreview, is_generated: e.isGenerated })),
      storages: s.storages.map((v) => ({ uuid: v.uuid, name: v.name, component: v.component.name, mount_path: v.mountPath, host_path: v.hostPath })),
    };
    return documentText(ServiceConfiguration, doc, "the service's");
  }

  /** Checks the document against the service as it is now, as the API checks each part; every refusal is a ConfigurationRefused with the reason. */
  async plan(serviceId: number, text: string, rights: ApplyRights): Promise<Plan> {
    const parsed = ServiceConfiguration.safeParse(safeJson(text));
    if (!parsed.success) throw new ConfigurationRefused(`the archive's configuration document is not one this version reads (${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message})`);
    const doc = parsed.data;
    const row = await this.db.service.findUnique({ where: { id: serviceId }, select: { ...documentSelect, teamId: true, team: { select: { features: true } } } });
    if (!row) throw new ConfigurationRefused("the service was deleted");
    if (doc.service.type !== row.type) {
      throw new ConfigurationRefused(`the configuration is of a service made from ${doc.service.type ?? "a compose file"} and this one from ${row.type ?? "a compose file"}: what a service is made from does not change`);
    }
    let template: Template;
    try {
      template = this.compose.composeTemplate(doc.service.docker_compose_raw, row.type);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      throw new ConfigurationRefused(`the configuration's compose file is not one this version accepts: ${reasonOf(err)}`);
    }
    const kinds = new Map(template.services.map((s) => [s.name, s.kind]));
    // What the API would refuse is refused here too: whoever can write the archive can write the document (only an encrypted one is authenticated).
    const bad = [
      ...doc.envs.filter((e) => !EnvKey.safeParse(e.key).success).map((e) => `variable ${JSON.stringify(e.key.slice(0, 64))}`),
      ...doc.storages
        .filter((v) => !StorageName.safeParse(v.name).success || !MountPath.safeParse(v.mount_path).success || (v.host_path !== null && !HostPath.safeParse(v.host_path).success))
        .map((v) => `storage ${v.name}`),
      ...doc.components.filter((c) => c.fqdn !== null && (kinds.get(c.name) !== "application" || "errors" in parseDomains(c.fqdn))).map((c) => `the domains of ${c.name}`),
    ];
    if (bad.length) throw new ConfigurationRefused(`the configuration has values the API does not accept: ${bad.slice(0, 5).join(", ")}`);
    const stranger = [...doc.components.map((c) => c.name), ...doc.storages.map((v) => v.component)].find((n) => !kinds.has(n));
    if (stranger !== undefined) throw new ConfigurationRefused(`the configuration names a compose service its compose file does not have (${stranger.slice(0, 64)})`);
    if (doc.envs.length > MAX_ENVS) throw new ConfigurationRefused(`the configuration has ${doc.envs.length} variables; a service has at most ${MAX_ENVS}`);
    if (new Set(doc.envs.map((e) => `${e.key}\u0000${e.is_preview}`)).size !== doc.envs.length) throw new ConfigurationRefused("the configuration lists a variable twice");
    const values: Record<string, string> = {};
    for (const e of doc.envs) {
      let value: string;
      try {
        value = this.box.open(e.value_sealed);
      } catch {
        throw new ConfigurationRefused(`the value of ${e.key} cannot be opened with this instance's key (the backup was sealed by another instance key)`);
      }
      if (!e.is_preview) values[e.key] = value;
    }
    const overrides: Record<string, Record<string, string>> = {};
    for (const c of doc.components) {
      if (c.label_overrides === "") continue;
      try {
        overrides[c.name] = parseLabelOverrides(c.label_overrides).labels;
      } catch (err) {
        throw new ConfigurationRefused(`the label overrides of ${c.name} are not accepted: ${reasonOf(err)}`);
      }
    }
    // Label overrides are a paid feature (the one feature gate's rule, with the team's features now): a document may only set them where the team may.
    const overridden = doc.components.filter((c) => c.label_overrides !== (row.components.find((n) => n.name === c.name)?.labelOverrides ?? "")).map((c) => c.name);
    if (overridden.length && !storedFeatures(row.team.features).includes(LABEL_OVERRIDES_FEATURE)) {
      throw new ConfigurationRefused(`the configuration sets the label overrides of ${overridden.slice(0, 5).join(", ")}: that needs the paid feature ${LABEL_OVERRIDES_FEATURE}, which is not enabled for this team`);
    }
    let rendered: Plan["rendered"];
    try {
      rendered = this.compose.render(template, values, { labelOverrides: overrides });
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      throw new ConfigurationRefused(`the configuration's compose file does not pass the compose checks with its values: ${reasonOf(err)}`);
    }
    this.checkStorages(doc, row.type);
    // Bind mounts the service does not have now need the right to add them (bind-mounts.ts), as a PATCH or a storage add would.
    const nowBinds = new Set([...this.compose.storedBinds(row.composeRaw, row.type), ...row.storages.flatMap((v) => (v.hostPath ? [v.hostPath] : []))]);
    const added = [...rendered.binds, ...doc.storages.flatMap((v) => (v.host_path ? [v.host_path] : []))].filter((p) => !nowBinds.has(p));
    if (added.length && !rights.mayAddBindMounts) {
      throw new ConfigurationRefused(`the configuration adds bind mounts of server directories (${[...new Set(added)].slice(0, 5).join(", ")}), which only team owners and admins can add`);
    }
    const fqdnsBefore = row.components.map((c) => c.fqdn).filter((f) => f !== null);
    return { doc, serviceId: row.id, teamId: row.teamId, template, rendered, fqdnsBefore, hostsBefore: fqdnsBefore.flatMap(hostsOf) };
  }

  /** The storage rules of POST /services/{uuid}/storages, for the document's storages together. */
  private checkStorages(doc: ServiceConfiguration, type: string | null): void {
    if (doc.storages.length > MAX_SERVICE_STORAGES) throw new ConfigurationRefused(`the configuration has ${doc.storages.length} storages; a service has at most ${MAX_SERVICE_STORAGES}`);
    const declared = new Set(this.compose.declaredVolumes(doc.service.docker_compose_raw, type));
    const names = new Set<string>();
    const mounts = new Set<string>();
    for (const v of doc.storages) {
      if (declared.has(v.name)) throw new ConfigurationRefused(`the configuration's storage ${v.name} has the name of a volume its compose file declares`);
      const mount = `${v.component}\u0000${v.mount_path}`;
      if (names.has(v.name) || mounts.has(mount)) throw new ConfigurationRefused(`the configuration lists the storage ${v.name} or the mount path ${v.mount_path} of ${v.component} twice`);
      names.add(v.name);
      mounts.add(mount);
    }
  }

  /** The service's render, its domain claims and its variables are held (the order a compose PATCH takes them in); then the domains are checked again. */
  async check(tx: Tx, plan: Plan): Promise<string | null> {
    await lockInTransaction(tx, this.runtime.dialect, "serviceRender", plan.serviceId);
    await lockInTransaction(tx, this.runtime.dialect, "teamDomains", plan.teamId);
    await lockInTransaction(tx, this.runtime.dialect, "serviceEnvs", plan.serviceId);
    if (!(await tx.service.count({ where: { id: plan.serviceId } }))) return "the service was deleted";
    const wanted = [...new Set(plan.doc.components.flatMap((c) => hostsOf(c.fqdn)))].filter((h) => !plan.hostsBefore.includes(h));
    return domainTakenReason(await hostClaimedElsewhere(tx, plan.teamId, wanted, { serviceId: plan.serviceId }), "the service's");
  }

  /** Writes the document: settings and compose file (rendered again), components' domains and overrides, then variables and storages reset to it. Answers the domains written. */
  async write(tx: Tx, plan: Plan): Promise<(string | null)[]> {
    const { doc, serviceId } = plan;
    await tx.service.update({
      where: { id: serviceId },
      data: { name: doc.service.name, description: doc.service.description, composeRaw: doc.service.docker_compose_raw, composeRendered: this.box.seal(plan.rendered.compose) },
    });
    await this.compose.syncComponents(tx, serviceId, plan.template);
    const components = await tx.serviceComponent.findMany({ where: { serviceId }, select: { id: true, name: true, kind: true } });
    const fqdns: (string | null)[] = [];
    for (const c of components) {
      const d = doc.components.find((x) => x.name === c.name);
      const fqdn = c.kind === "application" ? (d?.fqdn ?? null) : null;
      fqdns.push(fqdn);
      await tx.serviceComponent.update({ where: { id: c.id }, data: { fqdn, hosts: hostsOnUpdate(fqdn), labelOverrides: d?.label_overrides ?? "" } });
    }

    await resetVariables(tx, { serviceId }, doc.envs.map((e) => ({ uuid: e.uuid, key: e.key, isPreview: e.is_preview, data: { value: e.value_sealed, isGenerated: e.is_generated } })));
    // Values the compose file needs that the document lacks are generated once, as a PATCH does.
    await this.compose.storeCreated(tx, serviceId, plan.rendered.generated.created, plan.rendered.generated.values, plan.template);

    // A storage whose component, mount path or host path differs is re-created; its Docker volume (named after the service and the storage) keeps its data.
    const componentIds = new Map(components.map((c) => [c.name, c.id]));
    const storages = await tx.serviceStorage.findMany({ where: { serviceId }, select: { id: true, name: true, mountPath: true, hostPath: true, componentId: true } });
    const same = (v: (typeof storages)[number]) =>
      doc.storages.some((s) => s.name === v.name && s.mount_path === v.mountPath && s.host_path === v.hostPath && componentIds.get(s.component) === v.componentId);
    const drop = storages.filter((v) => !same(v));
    if (drop.length) await tx.serviceStorage.deleteMany({ where: { id: { in: drop.map((v) => v.id) } } });
    const kept = new Set(storages.filter(same).map((v) => v.name));
    for (const s of doc.storages) {
      if (kept.has(s.name)) continue;
      await tx.serviceStorage.create({
        data: { uuid: await freeUuid(tx, "serviceStorage", s.uuid), serviceId, componentId: componentIds.get(s.component)!, name: s.name, mountPath: s.mount_path, hostPath: s.host_path },
      });
    }
    return fqdns;
  }

  /** DNS records follow the hostnames the service gave up and the ones it took back. */
  async applied(plan: Plan, fqdns: (string | null)[]): Promise<void> {
    await this.runtime.hostsChanged?.(plan.teamId, [...plan.fqdnsBefore, ...fqdns]);
  }
}
