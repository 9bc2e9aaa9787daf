import {
  APPLICATION_CONFIGURATION_FORMAT,
  ApplicationConfiguration,
  EnvKey,
  HostPath,
  ImageRef,
  MountPath,
  PortList,
  parseDomains,
} from "@capstan/shared";
import type { Database, Db, Prisma } from "../../db/client.js";
import { lockInTransaction } from "../../db/locks.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import { parseCompose } from "../../compose/index.js";
import { storedBindSources } from "../applications.js";
import { applicationSettingColumns, applicationSettings } from "../application-settings.js";
import { hostsOnUpdate } from "../domain-ownership.js";
import { PayloadError, safeJson } from "./common.js";
import { ConfigurationRefused, domainTakenReason, freeUuid, hostClaimedElsewhere, hostsOf, resetVariables, documentText, type ApplyRights, type ConfigurationKind } from "./configuration.js";

// ---- configuration and full resource backups of applications (issue 19, w8/rbconfig) ----

type Tx = Prisma.TransactionClient;

const documentSelect = {
  id: true,
  uuid: true,
  name: true,
  description: true,
  source: true,
  buildPack: true,
  gitRepository: true,
  gitBranch: true,
  baseDirectory: true,
  gitApp: { select: { uuid: true } },
  privateKey: { select: { uuid: true } },
  dockerfile: true,
  dockerImage: true,
  composeRaw: true,
  portsExposes: true,
  fqdn: true,
  healthCheckEnabled: true,
  healthCheckPath: true,
  healthCheckPort: true,
  healthCheckInterval: true,
  healthCheckTimeout: true,
  healthCheckRetries: true,
  healthCheckStartPeriod: true,
  limitsMemory: true,
  limitsCpus: true,
  envs: { orderBy: { id: "asc" }, select: { uuid: true, key: true, value: true, isBuildTime: true, isPreview: true, isGenerated: true } },
  volumes: { orderBy: { id: "asc" }, select: { uuid: true, name: true, mountPath: true, hostPath: true } },
} satisfies Prisma.ApplicationSelect;

/**
 * The configuration document of an application (shared ApplicationConfiguration): its settings as
 * the API names them, its variables with their values as sealed at rest (the instance key's
 * AES-256-GCM, never opened here), its storages. Taken when a configuration or full backup run is
 * prepared; it travels in the sealed job payload to the agent, which writes it into the archive.
 */
export async function applicationConfigurationDocument(db: Db, applicationId: number, at: Date): Promise<string> {
  const a = await db.application.findUnique({ where: { id: applicationId }, select: documentSelect });
  if (!a) throw new PayloadError("the application was deleted");
  const doc: ApplicationConfiguration = {
    format: APPLICATION_CONFIGURATION_FORMAT,
    kind: "application",
    taken_at: at.toISOString(),
    application: {
      uuid: a.uuid,
      name: a.name,
      source: a.source,
      build_pack: a.buildPack,
      git_repository: a.gitRepository,
      git_branch: a.gitBranch,
      git_app_uuid: a.gitApp?.uuid ?? null,
      private_key_uuid: a.privateKey?.uuid ?? null,
      fqdn: a.fqdn,
      ...applicationSettings(a),
    },
    envs: a.envs.map((e) => ({ uuid: e.uuid, key: e.key, value_sealed: e.value, is_build_time: e.isBuildTime, is_preview: e.isPreview, is_generated: e.isGenerated })),
    storages: a.volumes.map((v) => ({ uuid: v.uuid, name: v.name, mount_path: v.mountPath, host_path: v.hostPath })),
  };
  return documentText(ApplicationConfiguration, doc, "the application's");
}

/**
 * Applies an application's configuration document (configuration.ts runs it): its settings,
 * variables and storages; the domains it gives back must be free in the team.
 */
export class ApplicationConfigurationKind implements ConfigurationKind<Plan, void> {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly dialect: Database["kind"],
    private readonly hostsChanged: (teamId: number, fqdns: (string | null)[]) => Promise<void>,
  ) {}

  document(applicationId: number, at: Date): Promise<string> {
    return applicationConfigurationDocument(this.db, applicationId, at);
  }

  /** Checks the document against the application as it is now; every refusal is a ConfigurationRefused with the reason. */
  async plan(applicationId: number, text: string, rights: ApplyRights): Promise<Plan> {
    const parsed = ApplicationConfiguration.safeParse(safeJson(text));
    if (!parsed.success) throw new ConfigurationRefused(`the archive's configuration document is not one this version reads (${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message})`);
    const doc = parsed.data;
    const app = await this.db.application.findUnique({ where: { id: applicationId }, select: { ...documentSelect, teamId: true, serverId: true, environment: { select: { projectId: true } } } });
    if (!app) throw new ConfigurationRefused("the application was deleted");
    if (doc.application.source !== app.source) {
      throw new ConfigurationRefused(`the configuration is of a ${doc.application.source} application and this one is ${app.source}: the source of an application does not change`);
    }
    // What the API would refuse is refused here too: a document can be written by whoever can write the archive (only an encrypted one is authenticated).
    if (doc.application.fqdn !== null && "errors" in parseDomains(doc.application.fqdn)) throw new ConfigurationRefused("the configuration's domains are not valid");
    const bad = [
      ...doc.envs.filter((e) => !EnvKey.safeParse(e.key).success).map((e) => `variable ${JSON.stringify(e.key.slice(0, 64))}`),
      ...doc.storages.filter((s) => !MountPath.safeParse(s.mount_path).success || (s.host_path !== null && !HostPath.safeParse(s.host_path).success)).map((s) => `storage ${s.name}`),
      ...(PortList.safeParse(doc.application.ports_exposes).success ? [] : ["ports_exposes"]),
      ...(doc.application.docker_registry_image_name === null || ImageRef.safeParse(doc.application.docker_registry_image_name).success ? [] : ["docker_registry_image_name"]),
    ];
    if (bad.length) throw new ConfigurationRefused(`the configuration has values the API does not accept: ${bad.slice(0, 5).join(", ")}`);
    if (doc.application.docker_compose_raw !== null && doc.application.docker_compose_raw !== app.composeRaw) {
      try {
        parseCompose(doc.application.docker_compose_raw);
      } catch {
        throw new ConfigurationRefused("the configuration's compose file is not one this version accepts");
      }
    }
    for (const e of doc.envs) {
      try {
        this.box.open(e.value_sealed);
      } catch {
        throw new ConfigurationRefused(`the value of ${e.key} cannot be opened with this instance's key (the backup was sealed by another instance key)`);
      }
    }
    // Bind mounts the application does not have now need the right to add them (bind-mounts.ts), as a PATCH would.
    const nowBinds = new Set([...storedBindSources(app.composeRaw), ...app.volumes.flatMap((v) => (v.hostPath ? [v.hostPath] : []))]);
    const added = [...storedBindSources(doc.application.docker_compose_raw), ...doc.storages.flatMap((s) => (s.host_path ? [s.host_path] : []))].filter((p) => !nowBinds.has(p));
    if (added.length && !rights.mayAddBindMounts) {
      throw new ConfigurationRefused(`the configuration adds bind mounts of server directories (${[...new Set(added)].slice(0, 5).join(", ")}), which only team owners and admins can add`);
    }
    const names = new Set<string>();
    const paths = new Set<string>();
    for (const s of doc.storages) {
      if (names.has(s.name) || paths.has(s.mount_path)) throw new ConfigurationRefused(`the configuration lists the storage ${s.name} or the mount path ${s.mount_path} twice`);
      names.add(s.name);
      paths.add(s.mount_path);
    }
    return { doc, applicationId: app.id, teamId: app.teamId, projectId: app.environment.projectId, fqdnBefore: app.fqdn, hostsBefore: hostsOf(app.fqdn) };
  }

  /**
   * Hosts the document gives back that the application does not claim now, and that another
   * resource of the team claims meanwhile: the restore is refused (with no caller to weigh the
   * finer rules of domain-ownership.ts, any overlap with another claim counts).
   */
  private async domainsTaken(tx: Tx, plan: Plan): Promise<string | null> {
    const wanted = hostsOf(plan.doc.application.fqdn).filter((h) => !plan.hostsBefore.includes(h));
    return domainTakenReason(await hostClaimedElsewhere(tx, plan.teamId, wanted, { applicationId: plan.applicationId }), "the application's");
  }

  /** Writes the document: the settings, then variables and storages matched by key and by name (missing ones re-created, added ones removed). */
  async write(tx: Tx, plan: Plan): Promise<void> {
    const { doc, applicationId } = plan;
    const a = doc.application;
    await tx.application.update({
      where: { id: applicationId },
      data: {
        name: a.name,
        buildPack: a.build_pack,
        gitRepository: a.git_repository,
        gitBranch: a.git_branch,
        fqdn: a.fqdn,
        hosts: hostsOnUpdate(a.fqdn),
        ...applicationSettingColumns(a),
      },
    });

    await resetVariables(
      tx,
      { applicationId },
      doc.envs.map((e) => ({ uuid: e.uuid, key: e.key, isPreview: e.is_preview, data: { value: e.value_sealed, isBuildTime: e.is_build_time, isGenerated: e.is_generated } })),
    );

    // A storage whose name, mount path or host path differs is re-created; its Docker volume (named after the application and the storage name) keeps its data.
    const volumes = await tx.volume.findMany({ where: { applicationId }, select: { id: true, name: true, mountPath: true, hostPath: true } });
    const same = (v: { name: string; mountPath: string; hostPath: string | null }) => doc.storages.some((s) => s.name === v.name && s.mount_path === v.mountPath && s.host_path === v.hostPath);
    const drop = volumes.filter((v) => !same(v));
    if (drop.length) await tx.volume.deleteMany({ where: { id: { in: drop.map((v) => v.id) } } });
    const kept = new Set(volumes.filter(same).map((v) => v.name));
    for (const s of doc.storages) {
      if (kept.has(s.name)) continue;
      await tx.volume.create({ data: { uuid: await freeUuid(tx, "volume", s.uuid), applicationId, name: s.name, mountPath: s.mount_path, hostPath: s.host_path } });
    }
  }

  /** The team's domain claims and the application's variables are held; then the domains are checked again. */
  async check(tx: Tx, plan: Plan): Promise<string | null> {
    await lockInTransaction(tx, this.dialect, "teamDomains", plan.teamId);
    await lockInTransaction(tx, this.dialect, "applicationEnvs", plan.applicationId);
    return this.domainsTaken(tx, plan);
  }

  async applied(plan: Plan): Promise<void> {
    if (plan.fqdnBefore !== plan.doc.application.fqdn) await this.hostsChanged(plan.teamId, [plan.fqdnBefore, plan.doc.application.fqdn]);
  }
}

interface Plan {
  doc: ApplicationConfiguration;
  applicationId: number;
  teamId: number;
  projectId: number;
  fqdnBefore: string | null;
  hostsBefore: string[];
}
