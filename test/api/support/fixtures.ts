/**
 * Fixtures of every resource kind, per team, and how to turn a route of the route table into
 * a request: shared by the cross-team matrix (cross-team.test.ts), the authorization matrix
 * (authz-matrix.test.ts) and the route fuzz (fuzz.test.ts). A new resource kind or a new
 * route with a body needs an entry here; those tests say which.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { hostname, networkInterfaces } from "node:os";
import { expect } from "vitest";
import type { z } from "zod";
import { FEATURES } from "@capstan/shared";
import type { AnyRoute } from "../../../control-plane/src/http/route.js";
import type { ApiClient, ApiResponse, TestInstance } from "../harness.js";
import type { KeyFactory } from "./ssh.js";

let t: TestInstance;
let keys: KeyFactory;

/**
 * A backup schedule that is enabled but cannot come due while a suite runs: weekly, three days
 * from now (the scheduler runs in UTC). "@daily" or "0 3 * * *" fired when a long matrix run
 * crossed midnight or 03:00 UTC, and the executions it recorded changed team A's snapshot in
 * the middle of a route's refused requests.
 */
export const QUIET_FREQUENCY = (() => {
  const now = new Date();
  return `${now.getUTCMinutes()} ${now.getUTCHours()} * * ${(now.getUTCDay() + 3) % 7}`;
})();

/** Binds the fixtures to a test instance and a key factory (in the test's beforeAll). */
export async function initFixtures(instance: TestInstance, keyFactory: KeyFactory): Promise<void> {
  t = instance;
  keys = keyFactory;
  spareKey = (await keys.generate("ed25519")).privateKey;
}

// ---------------------------------------------------------------------------------------------
// Fixtures: one object of every resource kind, per team.

export interface Fixtures {
  tag: string;
  teamId: number;
  api: ApiClient;
  /** The owner's token (read, write, deploy): the one `api` uses. */
  token: string;
  /** A member with a project grant (deploy) and an environment override (view_only); its token has every scope. */
  member: { userId: number; email: string; token: string };
  /** A member without any grant (free to be granted in positive controls). */
  spare: { userId: number; token: string };
  project: { uuid: string; name: string };
  environment: { id: number; uuid: string; name: string };
  projectPermission: { id: number };
  environmentPermission: { id: number };
  key: { uuid: string; name: string; fingerprint: string; publicKey: string };
  server: { uuid: string; destinationUuid: string };
  /** Applications (tests/api/applications*.test.ts): one per team, with a variable and a storage. */
  application: { uuid: string };
  envVar: { uuid: string };
  storage: { uuid: string };
  gitApp: { uuid: string };
  /** A deployment of the application (deployed, then cancelled: no agent runs the fixtures). */
  deployment: { uuid: string };
  /** A shared network on the server (pending: no agent runs the fixtures), attached to the application. */
  network: { uuid: string };
  /** A standalone database (tests/api/databases*.test.ts) with a variable; never started (no agent). */
  database: { uuid: string };
  databaseEnvVar: { uuid: string };
  /** An S3 storage (never contacted), a backup schedule of the database on it, and one execution of it. */
  s3Storage: { id: number; uuid: string };
  backupSchedule: { uuid: string };
  backupExecution: { uuid: string };
  /**
   * A template source (tests/api/template-sources.test.ts) with a token; its repository is this
   * machine's own name at port 1, so its syncs fail at once without outside traffic.
   */
  templateSource: { uuid: string };
  // services (issue 17)
  /** A service from a built-in template (tests/api/services*.test.ts), with a variable of its own; never started (no agent). */
  service: { uuid: string };
  serviceEnvVar: { uuid: string };
  serviceStorage: { uuid: string };

  // registries (issue 18)
  /** A custom registry at this machine's own name, port 1 (its test fails at once, no outside traffic). */
  registry: { id: number; serverId: number };

  // DNS (issue 21)
  /** A PowerDNS provider at this machine's own name, port 1 (never answers), and a wildcard domain on it pointing at the server; never synced. */
  dnsProvider: { uuid: string };
  domain: { uuid: string };

  // label overrides (w5/svcextras)
  /** The application and the database of a second service (umami: web + postgres); the application has label overrides. */
  serviceApplication: { uuid: string };
  serviceDatabase: { uuid: string };
  serviceWithDb: { uuid: string };
  // clusters (issue 20)
  /**
   * A cluster (a swarm record as detect writes it, made in the database: detect needs agents)
   * with the fixture server linked as its one manager node; the server has no agent, so the
   * cluster is unreachable and node changes answer 503.
   */
  cluster: { uuid: string; nodeId: string };
  // resource backups (issue 19)
  /** The application's integer id (resource_id), and a volume backup of it to the S3 storage (never run: no agent). */
  applicationId: number;
  resourceBackup: { id: number };
  // ---- w8/rbsources: services and databases as sources (their detail's integer id) ----
  serviceId: number;
  databaseId: number;
  // ---- dns resources (issue 21, w6) ----
  /** A role binding (preview) of the domain (DNS_ENV_BINDINGS). */
  environmentBinding: { id: number };
  /** The application's hostname (its fqdn); no managed domain of the fixtures covers it. */
  appHost: string;
  /** Strings that identify this team's objects; no other team may ever see one of them. */
  markers: string[];
  // ---- resource restores (issue 19, w7/restore) ----
  /** An execution of the resource backup: a cron tick without an agent, so failed (nothing to restore). */
  resourceBackupExecution: { id: number };
}

export async function ok<T = any>(res: Promise<ApiResponse<T>>, what: string): Promise<T> {
  const r = await res;
  if (r.status >= 300) throw new Error(`fixture ${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

export async function buildFixtures(prefix: string): Promise<Fixtures> {
  const tag = `${prefix}-${randomBytes(4).toString("hex")}`;
  const team = await t.newTeam(`${tag}-team`);
  // Every paid feature: a gated route must get past the feature gate (402) to the team check.
  await t.instance.admin.setTeamFeatures(team.teamId, { enable: [...FEATURES] });
  const api = team.api;
  const member = await t.newMember(team.teamId, "member");
  const spare = await t.newMember(team.teamId, "member");
  const email = (await t.instance.database.prisma.user.findUniqueOrThrow({ where: { id: member.userId } })).email;
  const project = await ok(api.post("/projects", { name: `${tag}-project`, description: `${tag}-description` }), "project");
  const created = await ok(api.post(`/projects/${project.uuid}/environments`, { name: `${tag}-env` }), "environment");
  const environment = await ok(api.get(`/projects/${project.uuid}/${tag}-env`), "environment lookup");
  const pp = await ok(
    api.post("/permissions/project", { project_uuid: project.uuid, user_id: member.userId, permission_level: "deploy" }),
    "project permission",
  );
  const ep = await ok(
    api.post("/permissions/environment", { environment_id: created.data.id, user_id: member.userId, permission_level: "view_only" }),
    "environment permission",
  );
  const generated = await keys.generate("ed25519");
  const key = await ok(api.post("/security/keys", { name: `${tag}-key`, private_key: generated.privateKey }), "private key");
  const server = await ok(api.post("/servers", { name: `${tag}-server`, ip: ownAddress(), port: 1, private_key_uuid: key.uuid }), "server");
  const destinationUuid = (await ok(api.get(`/servers/${server.uuid}`), "server detail")).destinations[0].uuid;
  const gitApp = await ok(api.post("/github-apps", { name: `${tag}-git-app`, app_id: 1, installation_id: 1, private_key: gitAppKey, webhook_secret: `${tag}-whsec` }), "git app");
  const application = await ok(
    api.post("/applications/dockerimage", {
      project_uuid: project.uuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: destinationUuid,
      name: `${tag}-app`,
      docker_registry_image_name: "nginx:1.27",
      fqdn: `${tag}.example.com`,
    }),
    "application",
  );
  const envVar = (await ok(api.post(`/applications/${application.uuid}/envs`, { key: "FIXTURE_KEY", value: `${tag}-env-value` }), "env var")).data;
  const storage = (await ok(api.post(`/applications/${application.uuid}/storages`, { name: "data", mount_path: "/data" }), "storage")).data;
  const deployment = await ok(api.post(`/applications/${application.uuid}/deploy`), "deployment");
  await ok(api.post(`/deployments/${deployment.deployment_uuid}/cancel`), "deployment cancel");
  const database = await ok(
    api.post("/databases/postgresql", {
      project_uuid: project.uuid,
      environment_name: "production",
      server_uuid: server.uuid,
      destination_uuid: destinationUuid,
      name: `${tag}-db`,
      postgres_password: `${tag}-db-secret`,
      instant_deploy: false,
    }),
    "database",
  );
  const databaseEnvVar = (await ok(api.post(`/databases/${database.uuid}/envs`, { key: "FIXTURE_DB_KEY", value: `${tag}-db-env-value` }), "database env var")).data;
  const network = (await ok(api.post(`/networks/${server.uuid}`, { name: `${tag}-net` }), "network")).data;
  await ok(api.post(`/networks/resource/application/${application.uuid}/attach`, { network_uuid: network.uuid }), "network attach");
  // The endpoint is this machine's own name: the storage is never contacted (the connect-time
  // guard refuses its loopback or private address), so the test route makes no outside traffic.
  const s3Storage = (
    await ok(
      api.post("/s3-storages", {
        name: `${tag}-s3`,
        endpoint: `http://${hostname()}:9000`,
        bucket: `${tag}-bucket`,
        access_key: `${tag}-access-key`,
        secret_key: `${tag}-secret-key`,
        encryption_passphrase: `${tag}-passphrase`,
      }),
      "s3 storage",
    )
  ).data;
  const backupSchedule = (await ok(api.post(`/databases/${database.uuid}/backups`, { frequency: QUIET_FREQUENCY, s3_storage_id: s3Storage.id }), "backup schedule")).data;
  // One cron tick: the server has no agent, so the execution is recorded as failed (with the reason).
  const scheduleRow = await t.instance.database.prisma.backupSchedule.findUniqueOrThrow({ where: { uuid: backupSchedule.uuid } });
  await t.instance.backupScheduler.fire(scheduleRow.id, new Date("2026-01-01T03:00:00Z"));
  const backupExecution = (await ok(api.get(`/databases/${database.uuid}/backups/${backupSchedule.uuid}/executions`), "backup executions")).data[0];
  const templateSource = (
    await ok(
      api.post("/template-sources", { name: `${tag}-templates`, repository_url: `http://${hostname()}:1/${tag}-templates.git`, auth_token: `${tag}-template-token` }),
      "template source",
    )
  ).data;
  // Its first sync settles before anyone takes a snapshot.
  await t.instance.services.templateSources.idle();
  // services (issue 17)
  const service = await ok(
    api.post("/services", { project_uuid: project.uuid, environment_name: "production", server_uuid: server.uuid, destination_uuid: destinationUuid, type: "uptime-kuma", name: `${tag}-svc` }),
    "service",
  );
  const serviceEnvVar = (await ok(api.patch(`/services/${service.uuid}/envs`, { key: "FIXTURE_SVC_KEY", value: `${tag}-svc-env-value` }), "service env var")).data;
  const serviceStorage = (await ok(api.post(`/services/${service.uuid}/storages`, { name: "extra", mount_path: "/extra" }), "service storage")).data;

  // registries (issue 18)
  const registry = (
    await ok(
      api.post("/registries", {
        name: `${tag}-registry`,
        type: "custom",
        url: `http://${hostname()}:1`,
        credentials: { username: `${tag}-registry-user`, password: `${tag}-registry-password` },
        is_default: true,
      }),
      "registry",
    )
  ).data;

  // DNS (issue 21)
  const dnsProvider = (
    await ok(api.post("/dns-providers", { name: `${tag}-dns`, type: "powerdns", credentials: { api_url: `http://${hostname()}:1`, api_key: `${tag}-pdns-key` } }), "dns provider")
  ).data;
  // clusters (issue 20)
  const clusterNodeId = randomBytes(12).toString("hex").slice(0, 25);
  const cluster = await t.instance.database.prisma.cluster.create({
    data: {
      uuid: `cl${randomBytes(10).toString("hex")}`,
      teamId: team.teamId,
      name: `${tag}-swarm`,
      swarmId: randomBytes(12).toString("hex").slice(0, 25),
      nodes: JSON.stringify([
        { id: clusterNodeId, version: 7, hostname: `${tag}-node`, role: "manager", availability: "active", status: "ready", addr: "10.0.0.5", engine_version: "20.10.24", labels: { owner: tag }, reachability: "reachable", leader: true },
      ]),
      nodesAt: new Date(),
      servers: { create: { serverId: (await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: server.uuid } })).id, nodeId: clusterNodeId } },
    },
  });
  const domain = (await ok(api.post("/domains", { name: `${tag.toLowerCase()}.example.test`, dns_provider_uuid: dnsProvider.uuid, server_uuid: server.uuid }), "domain")).data;

  // label overrides (w5/svcextras)
  const serviceWithDb = await ok(
    api.post("/services", { project_uuid: project.uuid, environment_name: "production", server_uuid: server.uuid, destination_uuid: destinationUuid, type: "umami", name: `${tag}-svc-db` }),
    "service with a database",
  );
  const serviceWithDbDetail = await ok(api.get(`/services/${serviceWithDb.uuid}`), "service with a database detail");
  const serviceApplication = { uuid: serviceWithDbDetail.applications[0].uuid as string };
  const serviceDatabase = { uuid: serviceWithDbDetail.databases[0].uuid as string };
  await ok(api.put(`/service-applications/${serviceApplication.uuid}/label-overrides`, { yaml: `proxy.headers.response.X-Fixture: ${tag}-label\n` }), "label overrides");
  // resource backups (issue 19)
  const applicationId = (await ok(api.get(`/applications/${application.uuid}`), "application detail")).id as number;
  // w8/rbsources
  const serviceId = (await ok(api.get(`/services/${service.uuid}`), "service detail")).id as number;
  const databaseId = (await ok(api.get(`/databases/${database.uuid}`), "database detail")).id as number;
  const resourceBackup = (
    await ok(api.post("/resource-backups", { resource_type: "application", resource_id: applicationId, backup_type: "volume", frequency: QUIET_FREQUENCY, s3_storage_id: s3Storage.id }), "resource backup")
  ).data;
  // ---- dns resources (issue 21, w6) ----
  const environmentBinding = (await ok(api.post(`/domains/${domain.uuid}/environment-bindings`, { environment_role: "preview", priority: 1 }), "environment binding")).data;
  // ---- w7/svcroute: service applications' domains (issue 17) ----
  await ok(api.patch(`/service-applications/${serviceApplication.uuid}`, { fqdn: `https://${tag.toLowerCase()}-svc.example.com` }), "service application domain");
  // ---- resource restores (issue 19, w7/restore) ----
  await t.instance.backupScheduler.fire(resourceBackup.id, new Date("2026-01-01T04:00:00Z"));
  const resourceBackupExecution = (await ok(api.get(`/resource-backups/${resourceBackup.id}`), "resource backup detail")).executions[0] as { id: number };
  return {
    tag,
    teamId: team.teamId,
    api,
    token: team.token,
    member: { userId: member.userId, email, token: member.token },
    spare: { userId: spare.userId, token: spare.token },
    project: { uuid: project.uuid, name: project.name },
    environment: { id: environment.id, uuid: environment.uuid, name: environment.name },
    projectPermission: { id: pp.data.id },
    environmentPermission: { id: ep.data.id },
    key: { uuid: key.uuid, name: key.name, fingerprint: key.fingerprint, publicKey: key.public_key },
    server: { uuid: server.uuid, destinationUuid },
    application: { uuid: application.uuid },
    envVar: { uuid: envVar.uuid },
    storage: { uuid: storage.uuid },
    gitApp: { uuid: gitApp.uuid },
    deployment: { uuid: deployment.deployment_uuid },
    database: { uuid: database.uuid },
    databaseEnvVar: { uuid: databaseEnvVar.uuid },
    network: { uuid: network.uuid },
    s3Storage: { id: s3Storage.id, uuid: s3Storage.uuid },
    backupSchedule: { uuid: backupSchedule.uuid },
    backupExecution: { uuid: backupExecution.uuid },
    templateSource: { uuid: templateSource.uuid },
    // services (issue 17)
    service: { uuid: service.uuid },
    serviceEnvVar: { uuid: serviceEnvVar.uuid },
    serviceStorage: { uuid: serviceStorage.uuid },

    // registries (issue 18)
    registry: { id: registry.id, serverId: (await t.instance.database.prisma.server.findUniqueOrThrow({ where: { uuid: server.uuid } })).id },

    // DNS (issue 21)
    dnsProvider: { uuid: dnsProvider.uuid },
    domain: { uuid: domain.uuid },

    // label overrides (w5/svcextras)
    serviceApplication,
    serviceDatabase,
    serviceWithDb: { uuid: serviceWithDb.uuid },
    // clusters (issue 20)
    cluster: { uuid: cluster.uuid, nodeId: clusterNodeId },
    // resource backups (issue 19)
    applicationId,
    resourceBackup: { id: resourceBackup.id },
    serviceId,
    databaseId,
    // ---- dns resources (issue 21, w6) ----
    environmentBinding: { id: environmentBinding.id },
    appHost: `${tag}.example.com`.toLowerCase(),
    markers: [
      cluster.uuid,
      clusterNodeId,
      templateSource.uuid,
      s3Storage.uuid,
      backupSchedule.uuid,
      backupExecution.uuid,
      database.uuid,
      databaseEnvVar.uuid,
      network.uuid,
      deployment.deployment_uuid,
      tag,
      project.uuid,
      environment.uuid,
      key.uuid,
      key.fingerprint,
      key.public_key.split(" ")[1]!,
      email,
      server.uuid,
      destinationUuid,
      application.uuid,
      envVar.uuid,
      storage.uuid,
      gitApp.uuid,
      // services (issue 17)
      service.uuid,
      serviceEnvVar.uuid,
      serviceStorage.uuid,
      // DNS (issue 21)
      dnsProvider.uuid,
      domain.uuid,
      // label overrides (w5/svcextras)
      serviceWithDb.uuid,
    ],
    // ---- resource restores (issue 19, w7/restore) ----
    resourceBackupExecution: { id: resourceBackupExecution.id },
  };
}

/** Everything a team has, as its owner sees it, plus the sealed key material. */
export async function snapshot(f: Fixtures) {
  const get = async (path: string) => {
    const r = await f.api.get(path);
    expect(r.status, `snapshot ${path}`).toBe(200);
    return r.body;
  };
  // Work in the control plane dispatched by earlier requests (template syncs, DNS reconciles)
  // settles first: a snapshot shows none half done.
  await Promise.all([t.instance.services.templateSources.idle(), t.instance.services.dns.reconciler.idle()]);
  // Every read at once (the order of the reads does not matter): the matrices take many snapshots.
  return settle({
    team: get("/teams/current"),
    members: get("/teams/current/members"),
    projects: get("/projects"),
    projectPermissions: get("/permissions/project"),
    environmentPermissions: get("/permissions/environment"),
    keys: get("/security/keys"),
    servers: get("/servers"),
    server: get(`/servers/${f.server.uuid}`),
    applications: get("/applications"),
    application: get(`/applications/${f.application.uuid}`),
    envVars: get(`/applications/${f.application.uuid}/envs`),
    storages: get(`/applications/${f.application.uuid}/storages`),
    gitApps: get("/github-apps"),
    deployments: get("/deployments"),
    deployment: get(`/deployments/${f.deployment.uuid}`),
    databases: get("/databases"),
    database: get(`/databases/${f.database.uuid}`),
    databaseEnvs: get(`/databases/${f.database.uuid}/envs`),
    networks: get(`/networks/${f.server.uuid}`),
    resourceNetworks: get(`/networks/resource/application/${f.application.uuid}`),
    s3Storages: get("/s3-storages"),
    backupSchedules: get(`/databases/${f.database.uuid}/backups`),
    backupExecutions: get(`/databases/${f.database.uuid}/backups/${f.backupSchedule.uuid}/executions`),
    templateSources: get("/template-sources"),
    templateSource: get(`/template-sources/${f.templateSource.uuid}`),
    // services (issue 17)
    services: get("/services"),
    service: get(`/services/${f.service.uuid}`),
    serviceEnvs: get(`/services/${f.service.uuid}/envs`),
    serviceStorages: get(`/services/${f.service.uuid}/storages`),
    // Not visible through the API: a changed token would only show here.
    templateTokens: t.instance.database.prisma.templateSource.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } }).then((rows) =>
      rows.map((r) => (r.authToken === null ? null : t.instance.box.open(r.authToken))),
    ),
    // Not visible through the API: changed storage keys or passphrase would only show here.
    s3Secrets: t.instance.database.prisma.s3Storage.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } }).then((rows) =>
      rows.map((r) => [r.accessKey, r.secretKey, r.encryptionPassphrase].map((v) => (v === null ? null : t.instance.box.open(v)))),
    ),
    // Not visible through the API: a rotated webhook secret would only show here.
    webhookSecrets: t.instance.database.prisma.application.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } }).then((rows) => rows.map((a) => a.webhookSecret)),
    keyMaterial: t.instance.services.keys.reveal(f.teamId, f.key.uuid),
    // Not visible through the API: a rotated agent token would only show here.
    // registries (issue 18)
    registries: get("/registries"),
    registry: get(`/registries/${f.registry.id}`),
    // Not visible through the API: changed credentials would only show here.
    registrySecrets: t.instance.database.prisma.registry
      .findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } })
      .then((rows) => rows.map((r) => t.instance.box.open(r.credentials))),
    agentTokens: t.instance.database.prisma.server
      .findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } })
      .then((rows) => rows.map((row) => (row as { agentTokenHash?: unknown }).agentTokenHash)),
    // DNS (issue 21); sealed credentials are not visible through the API.
    dnsProviders: get("/dns-providers"),
    domains: get("/domains"),
    // clusters (issue 20); the stored node list would show a change a GET does not refresh.
    clusters: get("/clusters"),
    cluster: get(`/clusters/${f.cluster.uuid}`),
    clusterNodes: get(`/clusters/${f.cluster.uuid}/nodes`),
    clusterRows: t.instance.database.prisma.cluster.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" }, select: { nodes: true, swarmId: true, name: true } }),
    dnsCredentials: t.instance.database.prisma.dnsProvider.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } }).then((rows) => rows.map((r) => t.instance.box.open(r.credentials))),
    // label overrides (w5/svcextras); the re-rendered compose files are not visible through the API.
    serviceApplicationLabels: get(`/service-applications/${f.serviceApplication.uuid}/label-overrides`),
    serviceDatabaseLabels: get(`/service-databases/${f.serviceDatabase.uuid}/label-overrides`),
    renderedServices: t.instance.database.prisma.service.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" } }).then((rows) => rows.map((r) => t.instance.box.open(r.composeRendered))),
    // resource backups (issue 19)
    resourceBackups: get("/resource-backups"),
    resourceBackup: get(`/resource-backups/${f.resourceBackup.id}`),
    // ---- dns resources (issue 21, w6) ----
    environmentBindings: get(`/domains/${f.domain.uuid}/environment-bindings`),
    dnsPins: t.instance.database.prisma.dnsHostnamePin.findMany({ where: { teamId: f.teamId }, orderBy: { id: "asc" }, select: { hostname: true, dnsDomainId: true } }),
    // ---- w7/svcroute: service applications' domains (issue 17) ----
    serviceWithDb: get(`/services/${f.serviceWithDb.uuid}`),
    serviceHosts: t.instance.database.prisma.serviceComponentHost
      .findMany({ where: { component: { service: { teamId: f.teamId } } }, orderBy: [{ componentId: "asc" }, { host: "asc" }] })
      .then((rows) => rows.map((r) => r.host)),
  });
}

/** The keys of two snapshots whose values differ (a failure names what changed). */
export function changedKeys(before: Record<string, unknown> | undefined, after: Record<string, unknown> | undefined): string[] {
  const keys = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  return [...keys].filter((k) => JSON.stringify(before?.[k]) !== JSON.stringify(after?.[k]));
}

/** An object of promises, settled into an object of their values. */
async function settle<T extends Record<string, Promise<unknown>>>(o: T): Promise<{ [K in keyof T]: Awaited<T[K]> }> {
  const entries = await Promise.all(Object.entries(o).map(async ([k, v]) => [k, await v] as const));
  return Object.fromEntries(entries) as { [K in keyof T]: Awaited<T[K]> };
}

// ---------------------------------------------------------------------------------------------
// How to turn a route into requests. Each table is checked for completeness below.

/** Path values per resource kind (x-capstan-resource); several variants where a path accepts several forms. */
export const RESOURCE_VALUES: Record<string, Record<string, (f: Fixtures) => string | number>> = {
  team: { id: (f) => f.teamId },
  project: { uuid: (f) => f.project.uuid },
  environment: { uuid: (f) => f.environment.uuid, name: (f) => f.environment.name },
  project_permission: { id: (f) => f.projectPermission.id },
  environment_permission: { id: (f) => f.environmentPermission.id },
  private_key: { uuid: (f) => f.key.uuid },
  server: { uuid: (f) => f.server.uuid },
  application: { uuid: (f) => f.application.uuid },
  env_var: { uuid: (f) => f.envVar.uuid },
  storage: { uuid: (f) => f.storage.uuid },
  git_app: { uuid: (f) => f.gitApp.uuid },
  deployment: { uuid: (f) => f.deployment.uuid },
  database: { uuid: (f) => f.database.uuid },
  database_env_var: { uuid: (f) => f.databaseEnvVar.uuid },
  network: { uuid: (f) => f.network.uuid },
  s3_storage: { id: (f) => f.s3Storage.id },
  backup_schedule: { uuid: (f) => f.backupSchedule.uuid },
  backup_execution: { uuid: (f) => f.backupExecution.uuid },
  template_source: { uuid: (f) => f.templateSource.uuid },
  // registries (issue 18)
  registry: { id: (f) => f.registry.id },
  // {type} of /networks/resource/{type}/{uuid}: names a kind, not an object (UNOWNED_KINDS).
  resource_type: { application: () => "application", database: () => "database", /* services (issue 17) */ service: () => "service" },
  network_resource: { application: (f) => f.application.uuid, database: (f) => f.database.uuid, /* services (issue 17) */ service: (f) => f.service.uuid },
  // services (issue 17)
  service: { uuid: (f) => f.service.uuid },
  service_env_var: { uuid: (f) => f.serviceEnvVar.uuid },
  service_storage: { uuid: (f) => f.serviceStorage.uuid },
  // DNS (issue 21)
  dns_provider: { uuid: (f) => f.dnsProvider.uuid },
  domain: { uuid: (f) => f.domain.uuid },
  // label overrides (w5/svcextras)
  service_application: { uuid: (f) => f.serviceApplication.uuid },
  service_database: { uuid: (f) => f.serviceDatabase.uuid },
  // clusters (issue 20)
  cluster: { uuid: (f) => f.cluster.uuid },
  cluster_node: { id: (f) => f.cluster.nodeId },
  // resource backups (issue 19)
  resource_backup: { id: (f) => f.resourceBackup.id },
  // ---- dns resources (issue 21, w6) ----
  // {type} of /dns/resource/{type}/{uuid}: names a kind, not an object (UNOWNED_KINDS).
  dns_resource_type: { application: () => "application", service: () => "service" },
  dns_resource: { application: (f) => f.application.uuid, service: (f) => f.service.uuid },
  environment_binding: { id: (f) => f.environmentBinding.id },
  // ---- swarm services (issue 20): service ids are the engine's (any well-formed id; the cluster decides the team) ----
  cluster_service: { id: (f) => f.cluster.nodeId },
  // ---- swarm secrets and configs (issue 20, w7): engine ids, as cluster_service ----
  cluster_secret: { id: (f) => f.cluster.nodeId },
  cluster_config: { id: (f) => f.cluster.nodeId },
  // ---- resource restores (issue 19, w7/restore) ----
  resource_backup_execution: { id: (f) => f.resourceBackupExecution.id },
};

/** Kinds whose path values are the same for every team (they name no object): never "team A's". */
export const UNOWNED_KINDS = new Set([
  "resource_type",
  // ---- dns resources (issue 21, w6) ----
  "dns_resource_type",
  // ---- swarm services (issue 20): the engine's service id means something only in the cluster of the path (its manager answers 404 for another swarm's); the control plane stores none ----
  "cluster_service",
  // ---- swarm secrets and configs (issue 20, w7): engine ids the control plane stores none of, as cluster_service ----
  "cluster_secret",
  "cluster_config",
]);

export interface BodySpec {
  /** A valid body for the caller's own objects (sent with path values of the target). */
  valid: (caller: Fixtures) => unknown;
  /**
   * Bodies that reference objects of `owner` by id, sent by `caller` of another team (with the
   * caller's own objects in the path, if any); each must answer 404. Required for routes
   * without path parameters: "none" when the body references no object by id.
   */
  foreign?: ((owner: Fixtures, caller: Fixtures) => unknown[]) | "none";
}

export const BODIES: Record<string, BodySpec> = {
  "post /projects": { valid: () => ({ name: "created" }), foreign: "none" },
  // Changes the caller's own team only: team A's settings (in its snapshot) stay as they were.
  "patch /teams/current/settings": { valid: () => ({ allow_member_bind_mounts: true }), foreign: "none" },
  "patch /projects/{uuid}": { valid: () => ({ name: "hijacked", description: "hijacked" }) },
  "post /projects/{uuid}/environments": { valid: () => ({ name: "intruder" }) },
  "post /permissions/project": {
    valid: (c) => ({ project_uuid: c.project.uuid, user_id: c.spare.userId, permission_level: "full_access" }),
    foreign: (a, b) => [
      { project_uuid: a.project.uuid, user_id: b.spare.userId, permission_level: "full_access" },
      { project_uuid: b.project.uuid, user_id: a.spare.userId, permission_level: "full_access" },
      { project_uuid: a.project.uuid, user_id: a.spare.userId, permission_level: "full_access" },
    ],
  },
  "post /permissions/project/bulk": {
    valid: (c) => ({ project_uuid: c.project.uuid, permission_level: "full_access" }),
    foreign: (a) => [{ project_uuid: a.project.uuid, permission_level: "full_access" }],
  },
  "put /permissions/project/{id}": { valid: () => ({ permission_level: "full_access" }) },
  "post /permissions/environment": {
    valid: (c) => ({ environment_id: c.environment.id, user_id: c.spare.userId, permission_level: "full_access" }),
    foreign: (a, b) => [
      { environment_id: a.environment.id, user_id: b.spare.userId, permission_level: "full_access" },
      { environment_id: b.environment.id, user_id: a.spare.userId, permission_level: "full_access" },
      { environment_id: a.environment.id, user_id: a.spare.userId, permission_level: "full_access" },
    ],
  },
  "post /security/keys": { valid: () => ({ name: "created", private_key: spareKey }), foreign: "none" },
  "patch /security/keys/{uuid}": { valid: () => ({ name: "hijacked", private_key: spareKey }) },
  "post /servers": {
    valid: (c) => ({ name: "created", ip: "192.0.2.20", private_key_uuid: c.key.uuid }),
    foreign: (a) => [{ name: "created", ip: "192.0.2.20", private_key_uuid: a.key.uuid }],
  },
  "patch /servers/{uuid}": {
    valid: () => ({ name: "hijacked", port: 2222 }),
    foreign: (a) => [{ private_key_uuid: a.key.uuid }, { name: "renamed", private_key_uuid: a.key.uuid }],
  },
  ...applicationBodies(),
  ...backupBodies(),
  ...databaseBodies(),
  "post /template-sources": { valid: () => ({ name: "created", repository_url: `http://${hostname()}:1/created.git`, auth_token: "created-token" }), foreign: "none" },
  "put /template-sources/{uuid}": { valid: () => ({ name: "hijacked", branch: "hijacked", auth_token: "hijacked-token", is_enabled: false }) },
  "post /applications/{uuid}/deploy": { valid: () => ({ force: true }) },
  // Coolify's deploy by uuid: a body naming another team's application or database (alone, or
  // after one of the caller's own) is a 404, and nothing is deployed.
  "post /deploy": { valid: (c) => ({ uuid: c.application.uuid }), foreign: (a, b) => deployTargets(a, b).map((q) => ({ uuid: q.uuid })) },
  "post /networks/{serverUuid}": { valid: () => ({ name: "intruder-net" }) },
  "post /networks/resource/{type}/{uuid}/attach": {
    valid: (c) => ({ network_uuid: c.network.uuid }),
    foreign: (a) => [{ network_uuid: a.network.uuid }],
  },
  // services (issue 17)
  ...serviceBodies(),

  // registries (issue 18)
  "post /registries": {
    valid: () => ({ name: "created", type: "custom", url: "https://registry.example.com", credentials: { username: "created", password: "created-pw" } }),
    foreign: "none",
  },
  // server_ids: another team's server, by uuid or integer id, alone or after one of the caller's own: 404, nothing changed.
  "patch /registries/{id}": {
    valid: (c) => ({ name: "hijacked", credentials: { username: "hijacked", password: "hijacked-pw" }, is_default: false, server_ids: [c.server.uuid] }),
    foreign: (a, b) => [{ server_ids: [a.server.uuid] }, { server_ids: [a.registry.serverId] }, { name: "hijacked", server_ids: [b.server.uuid, a.server.uuid] }, { server_ids: [b.registry.serverId, a.registry.serverId] }],
  },

  // DNS (issue 21)
  "post /dns-providers": { valid: () => ({ name: "created", type: "powerdns", credentials: { api_url: `http://${hostname()}:1`, api_key: "created-key" } }), foreign: "none" },
  "post /domains": {
    valid: (c) => ({ name: `created-${++domainSeq}.example.test`, dns_provider_uuid: c.dnsProvider.uuid, server_uuid: c.server.uuid }),
    foreign: (a, b) => [
      { name: `foreign-${++domainSeq}.example.test`, dns_provider_uuid: a.dnsProvider.uuid, server_uuid: b.server.uuid },
      { name: `foreign-${++domainSeq}.example.test`, dns_provider_uuid: b.dnsProvider.uuid, server_uuid: a.server.uuid },
    ],
  },

  // label overrides (w5/svcextras)
  "put /service-applications/{uuid}/label-overrides": { valid: () => ({ yaml: "proxy.headers.response.X-Intruder: hijacked\n" }) },
  "put /service-databases/{uuid}/label-overrides": { valid: () => ({ yaml: "com.example.intruder: hijacked\n" }) },
  // clusters (issue 20)
  "patch /clusters/{uuid}/nodes/{nodeId}/labels": { valid: () => ({ labels: { zone: "hijacked" } }) },
  // resource backups (issue 19): another team's application or S3 storage by integer id is a 404, nothing created or changed.
  "post /resource-backups": {
    valid: (c) => ({ resource_type: "application", resource_id: c.applicationId, backup_type: "volume", frequency: QUIET_FREQUENCY, s3_storage_id: c.s3Storage.id }),
    foreign: (a, b) => [
      { resource_type: "application", resource_id: a.applicationId, backup_type: "volume", frequency: QUIET_FREQUENCY },
      { resource_type: "application", resource_id: b.applicationId, backup_type: "volume", frequency: QUIET_FREQUENCY, s3_storage_id: a.s3Storage.id },
      // w8/rbsources: another team's service or database by integer id
      { resource_type: "service", resource_id: a.serviceId, backup_type: "volume", frequency: QUIET_FREQUENCY },
      { resource_type: "database", resource_id: a.databaseId, backup_type: "volume", frequency: QUIET_FREQUENCY },
    ],
  },
  "put /resource-backups/{id}": { valid: () => ({ frequency: "@weekly", enabled: false, keep_locally: true, number_of_backups_locally: 2 }), foreign: (a) => [{ s3_storage_id: a.s3Storage.id }] },
  // ---- dns resources (issue 21, w6) ----
  // Unpinning the application's own hostname (no pin: nothing to remove); another team's domain is a 404.
  "post /dns/resource/{type}/{uuid}/assign-domain": { valid: (c) => ({ hostname: c.appHost, domain_uuid: null }), foreign: (a, b) => [{ hostname: b.appHost, domain_uuid: a.domain.uuid }] },
  // Another team's environment by id is a 404, nothing created.
  "post /domains/{uuid}/environment-bindings": { valid: () => ({ environment_role: "staging", priority: 2 }), foreign: (a) => [{ environment_id: a.environment.id }] },
  // ---- swarm services (issue 20) ----
  "post /clusters/{uuid}/services/{serviceId}/scale": { valid: () => ({ replicas: 2 }) },
  // ---- swarm secrets and configs (issue 20, w7) ----
  "post /clusters/{uuid}/secrets": { valid: () => ({ name: "hijacked", data: "hijacked-value" }) },
  "post /clusters/{uuid}/configs": { valid: () => ({ name: "hijacked", data: "hijacked-value" }) },
  // ---- w7/svcroute: service applications' domains (issue 17) ----
  "patch /service-applications/{uuid}": { valid: () => ({ fqdn: "https://hijacked.example.test" }) },
  // ---- resource restores (issue 19, w7/restore) ----
  // w8/rbsources: a restore into another team's application (target_uuid) is a 404, nothing queued.
  "post /resource-backups/{id}/executions/{execution_id}/restore": { valid: () => ({}), foreign: (a) => [{ target_uuid: a.application.uuid }] },
};
let domainSeq = 0;

/** Service routes (issue 17): the create path names a project, a server and a destination. */
function serviceBodies(): Record<string, BodySpec> {
  const where = (p: Fixtures, s: Fixtures = p, d: Fixtures = s) => ({
    project_uuid: p.project.uuid,
    environment_name: "production",
    server_uuid: s.server.uuid,
    destination_uuid: d.server.destinationUuid,
  });
  return {
    "post /services": {
      valid: (c) => ({ ...where(c), type: "uptime-kuma" }),
      foreign: (a, b) => [where(a, b), where(b, a, a), where(b, b, a), where(a, a, a)].map((w) => ({ ...w, type: "uptime-kuma" })),
    },
    "patch /services/{uuid}": { valid: () => ({ name: "hijacked", docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n" }) },
    "delete /services/{uuid}": { valid: () => ({ delete_volumes: true }) },
    "patch /services/{uuid}/envs": { valid: () => ({ key: "FIXTURE_SVC_KEY", value: "hijacked" }) },
    "patch /services/{uuid}/envs/bulk": { valid: () => ({ variables: [{ key: "FIXTURE_SVC_KEY", value: "hijacked" }, { key: "INTRUDER", value: "x" }] }) },
    "post /services/{uuid}/storages": { valid: () => ({ name: "intruder", mount_path: "/intruder" }) },
  };
}

/** S3 storages and database backups: a schedule names a storage by its integer id. */
function backupBodies(): Record<string, BodySpec> {
  return {
    "post /s3-storages": {
      valid: () => ({ name: "created", endpoint: "https://s3.example.com", bucket: "created-bucket", access_key: "created-ak", secret_key: "created-sk" }),
      foreign: "none",
    },
    "patch /s3-storages/{id}": { valid: () => ({ name: "hijacked", secret_key: "hijacked-sk", encryption_passphrase: null }) },
    "post /databases/{uuid}/backups": {
      valid: (c) => ({ frequency: QUIET_FREQUENCY, s3_storage_id: c.s3Storage.id }),
      foreign: (a) => [{ frequency: QUIET_FREQUENCY, s3_storage_id: a.s3Storage.id }],
    },
    "patch /databases/{uuid}/backups/{backup_uuid}": {
      valid: () => ({ frequency: "@hourly", enabled: false }),
      foreign: (a) => [{ s3_storage_id: a.s3Storage.id }, { enabled: false, s3_storage_id: a.s3Storage.id }],
    },
    "post /databases/{uuid}/backups/{backup_uuid}/executions/{execution_uuid}/restore": { valid: () => ({}) },
  };
}

/** Application routes: every create path names a project, a server, a destination (and a git app or key). */
function applicationBodies(): Record<string, BodySpec> {
  const where = (p: Fixtures, s: Fixtures = p, d: Fixtures = s) => ({
    project_uuid: p.project.uuid,
    environment_name: "production",
    server_uuid: s.server.uuid,
    destination_uuid: d.server.destinationUuid,
  });
  /** Placements with one of team A's ids each (the rest the caller's). */
  const foreignWhere = (a: Fixtures, b: Fixtures) => [where(a, b), where(b, a, a), where(b, b, a), where(a, a, a)];
  const create = (extra: (caller: Fixtures) => Record<string, unknown>, foreignExtra?: (a: Fixtures, b: Fixtures) => Record<string, unknown>[]): BodySpec => ({
    valid: (c) => ({ ...where(c), ...extra(c) }),
    foreign: (a, b) => [...foreignWhere(a, b).map((w) => ({ ...w, ...extra(b) })), ...(foreignExtra?.(a, b) ?? []).map((x) => ({ ...where(b), ...extra(b), ...x }))],
  });
  const git = { git_branch: "main", build_pack: "builder_a" };
  return {
    "post /applications/public": create(() => ({ ...git, git_repository: "https://github.com/acme/created.git" })),
    "post /applications/private-git-app": create(
      (c) => ({ ...git, git_app_uuid: c.gitApp.uuid, git_repository: "acme/created" }),
      (a) => [{ git_app_uuid: a.gitApp.uuid }],
    ),
    // Coolify's path and field name of the same create.
    "post /applications/private-github-app": create(
      (c) => ({ ...git, github_app_uuid: c.gitApp.uuid, git_repository: "acme/created" }),
      (a) => [{ github_app_uuid: a.gitApp.uuid }],
    ),
    "post /applications/private-deploy-key": create(
      (c) => ({ ...git, private_key_uuid: c.key.uuid, git_repository: "git@github.com:acme/created.git" }),
      (a) => [{ private_key_uuid: a.key.uuid }],
    ),
    "post /applications/dockerfile": create(() => ({ dockerfile: "FROM capstan-test/busybox\n" })),
    "post /applications/dockerimage": create(() => ({ docker_registry_image_name: "nginx:1.27" })),
    "post /applications/dockercompose": create(() => ({ docker_compose_raw: "services:\n  web:\n    image: nginx:1.27\n" })),
    "patch /applications/{uuid}": { valid: () => ({ name: "hijacked", fqdn: "hijacked.example.com" }) },
    "delete /applications/{uuid}": { valid: () => ({ delete_volumes: true }) },
    "post /applications/{uuid}/envs": { valid: () => ({ key: "INTRUDER", value: "x" }) },
    "patch /applications/{uuid}/envs": { valid: () => ({ key: "FIXTURE_KEY", value: "hijacked" }) },
    "patch /applications/{uuid}/envs/bulk": { valid: () => ({ variables: [{ key: "FIXTURE_KEY", value: "hijacked" }, { key: "INTRUDER", value: "x" }] }) },
    "post /applications/{uuid}/storages": { valid: () => ({ name: "intruder", mount_path: "/intruder" }) },
    "post /github-apps": { valid: () => ({ name: "created", app_id: 2, installation_id: 2, private_key: gitAppKey }), foreign: "none" },
    "patch /github-apps/{uuid}": { valid: () => ({ name: "hijacked", private_key: gitAppKey, webhook_secret: null }) },
  };
}

/** Database routes: every create path names a project, a server and a destination. */
function databaseBodies(): Record<string, BodySpec> {
  const where = (p: Fixtures, s: Fixtures = p, d: Fixtures = s) => ({
    project_uuid: p.project.uuid,
    environment_name: "production",
    server_uuid: s.server.uuid,
    destination_uuid: d.server.destinationUuid,
  });
  const create: BodySpec = {
    valid: (c) => ({ ...where(c), instant_deploy: false }),
    foreign: (a, b) => [where(a, b), where(b, a, a), where(b, b, a), where(a, a, a)],
  };
  const engines = ["postgresql", "mysql", "mariadb", "mongodb", "redis", "clickhouse", "dragonfly", "keydb"];
  return {
    ...Object.fromEntries(engines.map((e) => [`post /databases/${e}`, create])),
    "patch /databases/{uuid}": { valid: () => ({ name: "hijacked", limits_memory: "1g" }) },
    "delete /databases/{uuid}": { valid: () => ({ delete_volumes: true }) },
    "post /databases/{uuid}/envs": { valid: () => ({ key: "INTRUDER", value: "x" }) },
    "patch /databases/{uuid}/envs": { valid: () => ({ key: "FIXTURE_DB_KEY", value: "hijacked" }) },
    "patch /databases/{uuid}/envs/bulk": { valid: () => ({ variables: [{ key: "FIXTURE_DB_KEY", value: "hijacked" }, { key: "INTRUDER", value: "x" }] }) },
  };
}

/**
 * An address of this machine that is not loopback (servers may not be at loopback addresses,
 * issue 15): an SSH connection to its port 1 is refused at once, as 127.0.0.1:1 was.
 */
export function ownAddress(): string {
  const own = Object.values(networkInterfaces())
    .flat()
    .find((a) => a && !a.internal && a.family === "IPv4");
  if (!own) throw new Error("the API fixtures need a non-loopback IPv4 address on this machine (an SSH connection to its port 1 must be refused at once)");
  return own.address;
}

/**
 * Routes that cannot succeed on a team's own objects in this test setup, with the status they
 * answer instead: no agent is connected to the fixture servers, and their SSH address (this
 * machine's own, ownAddress(), port 1) refuses connections. "found" means: anything but 404/422 — the route found
 * the object and failed on what lies outside the test.
 */
export const OWN_STATUS: Record<string, number | "found"> = {
  // No agent: the server is not usable (503 with the reason, not a field error).
  "get /servers/{uuid}/validate": 503,
  "post /servers/{uuid}/install-agent": "found",
  // The fixture application was never deployed (start deploys it: a success), and its server
  // has no agent. The GET forms (Coolify's) are the same actions.
  "post /applications/{uuid}/restart": 409,
  "post /applications/{uuid}/stop": 503,
  "get /applications/{uuid}/restart": 409,
  "get /applications/{uuid}/stop": 503,
  "get /applications/{uuid}/logs": 503,
  // The fixture deployment is cancelled already: found, and refused as not cancellable.
  "post /deployments/{uuid}/cancel": 400,
  // The fixture database's server has no agent.
  "post /databases/{uuid}/start": 503,
  "post /databases/{uuid}/stop": 503,
  "post /databases/{uuid}/restart": 503,
  "get /databases/{uuid}/start": 503,
  "get /databases/{uuid}/stop": 503,
  "get /databases/{uuid}/restart": 503,
  "get /databases/{uuid}/logs": 503,
  // No agent: sync and migrate need one (the detail answers the stored record); cleanup needs a migrate first.
  "post /networks/{serverUuid}/sync": 503,
  "post /networks/{serverUuid}/proxy/migrate": 503,
  "post /networks/{serverUuid}/proxy/cleanup": 409,
  // No agent: a backup cannot start; the fixture execution (a failed tick) has nothing to restore.
  "post /databases/{uuid}/backups/{backup_uuid}/execute": 409,
  "post /databases/{uuid}/backups/{backup_uuid}/executions/{execution_uuid}/restore": 409,
  // services lifecycle (issue 17): the fixture service's server has no agent.
  "post /services/{uuid}/start": 503,
  "post /services/{uuid}/stop": 503,
  "post /services/{uuid}/restart": 503,
  // clusters (issue 20): the fixture cluster's manager server has no agent.
  "post /clusters/{uuid}/nodes/{nodeId}/drain": 503,
  "post /clusters/{uuid}/nodes/{nodeId}/activate": 503,
  "post /clusters/{uuid}/nodes/{nodeId}/promote": 503,
  "post /clusters/{uuid}/nodes/{nodeId}/demote": 503,
  "patch /clusters/{uuid}/nodes/{nodeId}/labels": 503,
  // resource backups (issue 19): no agent, a backup cannot start.
  "post /resource-backups/{id}/execute": 409,
  // ---- swarm services (issue 20): the fixture cluster's manager server has no agent ----
  "get /clusters/{uuid}/services": 503,
  "get /clusters/{uuid}/services/{serviceId}/tasks": 503,
  "post /clusters/{uuid}/services/{serviceId}/scale": 503,
  // ---- swarm secrets and configs (issue 20, w7): the fixture cluster's manager server has no agent ----
  "get /clusters/{uuid}/secrets": 503,
  "post /clusters/{uuid}/secrets": 503,
  "delete /clusters/{uuid}/secrets/{secretId}": 503,
  "get /clusters/{uuid}/configs": 503,
  "post /clusters/{uuid}/configs": 503,
  "delete /clusters/{uuid}/configs/{configId}": 503,
  // ---- resource restores (issue 19, w7/restore): the fixture execution (a failed tick) has nothing to restore ----
  "post /resource-backups/{id}/executions/{execution_id}/restore": 409,
};

export function expectOwnStatus(key: string, res: ApiResponse) {
  const expected = OWN_STATUS[key];
  const detail = `${key}: ${JSON.stringify(res.body)}`;
  if (expected === "found") expect([404, 422], detail).not.toContain(res.status);
  else if (expected !== undefined) expect(res.status, detail).toBe(expected);
  else expect(res.status, detail).toBeLessThan(300);
}

/** Positive control only: what must happen before the request can succeed on own objects. */
export const PREPARE_OWN: Record<string, (f: Fixtures) => Promise<unknown>> = {
  // A key in use by a server cannot be deleted (409): free it first.
  "delete /security/keys/{uuid}": async (f) => {
    await f.api.delete(`/applications/${f.application.uuid}`);
    await f.api.delete(`/databases/${f.database.uuid}`);
    // services (issue 17)
    await f.api.delete(`/services/${f.service.uuid}`);
    // label overrides (w5/svcextras)
    await f.api.delete(`/services/${f.serviceWithDb.uuid}`);
    await f.api.delete(`/servers/${f.server.uuid}`);
  },
  // A server with applications or databases cannot be removed (409): delete them first.
  "delete /servers/{uuid}": async (f) => {
    await f.api.delete(`/applications/${f.application.uuid}`);
    await f.api.delete(`/databases/${f.database.uuid}`);
    // services (issue 17)
    await f.api.delete(`/services/${f.service.uuid}`);
    // label overrides (w5/svcextras)
    await f.api.delete(`/services/${f.serviceWithDb.uuid}`);
  },
  // A storage used by a backup schedule cannot be deleted (409): delete the schedule first.
  "delete /s3-storages/{id}": async (f) => {
    await f.api.delete(`/databases/${f.database.uuid}/backups/${f.backupSchedule.uuid}`);
    // resource backups (issue 19)
    await f.api.delete(`/resource-backups/${f.resourceBackup.id}`);
  },
  // The fixture network is attached already (409): detach it first.
  "post /networks/resource/{type}/{uuid}/attach": (f) => f.api.delete(`/networks/resource/application/${f.application.uuid}/${f.network.uuid}`),
  // DNS (issue 21): a provider used by a domain cannot be deleted (409): delete the domain first.
  "delete /dns-providers/{uuid}": (f) => f.api.delete(`/domains/${f.domain.uuid}`),
};
let spareKey = "";
/** The RSA key of every fixture git app (git apps sign with RSA). */
export const gitAppKey = generateKeyPairSync("rsa", {
  modulusLength: 2048,
  privateKeyEncoding: { type: "pkcs1", format: "pem" },
  publicKeyEncoding: { type: "spki", format: "pem" },
}).privateKey;

/** Query parameters that name objects: filled with the other team's ids on list endpoints. */
export const QUERY_REFS: Record<string, (f: Fixtures) => string | number> = {
  project_uuid: (f) => f.project.uuid,
  environment_id: (f) => f.environment.id,
  user_id: (f) => f.member.userId,
  // resource backups (issue 19): GET /resource-backups?resource_id=
  resource_id: (f) => f.applicationId,
};
export const PAGINATION = new Set(["page", "per_page"]);
/**
 * Query parameters that are options, not object ids (application delete flags, log window;
 * Coolify's forms: lines, skip/take, start's instant_deploy, and /deploy's tag and pr, which
 * are refused by name; the template list's category and search filters).
 */
export const QUERY_OPTIONS = new Set(["delete_configurations", "delete_volumes", "docker_cleanup", "since", "tail", "lines", "force", "commit_sha", "skip", "take", "instant_deploy", "tag", "pr", "category", "search",
  // services lifecycle (issue 17): start / restart
  "pull", "latest",
  // resource backups (issue 19): GET /resource-backups?resource_type= (a kind)
  "resource_type",
  // ---- dns resources (issue 21, w6) ----
  "dry_run",
  // ---- connectivity history (dashboard, issue 22): GET /servers/{uuid}/connectivity?limit= ----
  // ---- cluster events (issue 20, w7/events): GET /clusters/{uuid}/events?since=&limit= ----
  "limit",
]);

/** Coolify's /deploy?uuid=: another team's application or database, alone or after one of the caller's own. */
function deployTargets(owner: Fixtures, caller: Fixtures): { uuid: string }[] {
  return [{ uuid: owner.application.uuid }, { uuid: owner.database.uuid }, { uuid: `${caller.application.uuid},${owner.application.uuid}` }];
}

/**
 * Routes that name the objects they act on in the query string (Coolify's GET|POST
 * /deploy?uuid=a,b): the query for the caller's own objects, and queries naming another
 * team's, each of which must answer 404 and change nothing.
 */
export const QUERY_TARGETS: Record<string, { params: string[]; valid: (caller: Fixtures) => Record<string, string>; foreign: (owner: Fixtures, caller: Fixtures) => Record<string, string>[] }> = {
  "get /deploy": { params: ["uuid"], valid: (c) => ({ uuid: c.application.uuid }), foreign: deployTargets },
  "post /deploy": { params: ["uuid"], valid: (c) => ({ uuid: c.application.uuid }), foreign: deployTargets },
};

/** A path with a query string. */
export const withQuery = (path: string, query: Record<string, string> | undefined) => (query && Object.keys(query).length ? `${path}?${new URLSearchParams(query)}` : path);

export const keyOf = (r: AnyRoute) => `${r.method} ${r.path}`;
export const pathParams = (r: AnyRoute) => [...r.path.matchAll(/\{([a-zA-Z_]+)\}/g)].map((m) => m[1]!);

export function kindOf(r: AnyRoute, param: string): string | undefined {
  const schema = (r.params?.shape as Record<string, z.ZodType> | undefined)?.[param];
  const kind = schema?.meta()?.["x-capstan-resource"];
  return typeof kind === "string" ? kind : undefined;
}
