import { outboundFetch, plainFetch } from "../lib/outbound.js";
import type { Db } from "../db/client.js";
import type { SqlReader } from "../db/reader.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { JobQueue } from "../jobs/queue.js";
import type { Config } from "../config.js";
import type { Caller } from "../domain/caller.js";
import { TeamScope } from "../domain/scope.js";
import { PermissionService } from "./permissions.js";
import { PrivateKeyService } from "./keys.js";
import { ServiceTemplateService } from "./service-templates.js";
import { ProjectService } from "./projects.js";
import { ServerService, type AgentSetup } from "./servers.js";
import { TeamService } from "./teams.js";
import { ApplicationService } from "./applications.js";
import { EnvVarService, applicationEnvOwners } from "./env-vars.js";
import { VolumeService } from "./volumes.js";
import { GitAppService } from "./git-apps.js";
import { proxySettings } from "./deploy-spec.js";
import { DeploymentService } from "./deployments/index.js";
import { WebhookService } from "./webhooks.js";
import { webhookUrls } from "@capstan/shared";
import { NetworkService } from "./networks/index.js";
import type { NetworkPlanContext } from "./network-plan.js";
import { S3StorageService } from "./s3-storages.js";
import { BackupService } from "./backups/index.js";
import { resolveInstanceKey } from "../crypto/instance-key.js";
import { DatabaseService } from "./databases.js";
import { LaunchService } from "./launch.js";
import { TemplateSourceService } from "./template-sources/index.js";
// services (issue 17)
import { ServiceService } from "./services/index.js";

// registries (issue 18)
import { RegistryService } from "./registries/index.js";
// DNS (issue 21)
import { DnsService } from "./dns/index.js";
// clusters (issue 20)
import { ClusterService } from "./clusters/index.js";

export interface Services {
  db: Db;
  /** Plain-SQL read path for the hot GETs (db/reader.ts). */
  reader: SqlReader;
  jobs: JobQueue;
  /** The caller's team scope for one request (domain/scope.ts): what every service method resolves client ids through. */
  scope(caller: Caller): TeamScope;
  teams: TeamService;
  projects: ProjectService;
  permissions: PermissionService;
  keys: PrivateKeyService;
  serviceTemplates: ServiceTemplateService;
  servers: ServerService;
  applications: ApplicationService;
  envVars: EnvVarService;
  volumes: VolumeService;
  gitApps: GitAppService;
  deployments: DeploymentService;
  webhooks: WebhookService;
  networks: NetworkService;
  s3Storages: S3StorageService;
  backups: BackupService;
  databases: DatabaseService;
  /** Environment variables of databases (envVars: of applications). */
  databaseEnvs: EnvVarService;
  /** Start that deploys a never-deployed application, create/change then deploy, deploy by uuid list (services/launch.ts). */
  launch: LaunchService;
  /** Template sources and their syncs (services/template-sources/). */
  templateSources: TemplateSourceService;
  // services (issue 17)
  /** One-click services (spec 4.6, services/services/). */
  services: ServiceService;
  /** Environment variables of services (generated secrets marked). */
  serviceEnvs: EnvVarService;

  // registries (issue 18)
  /** Registries: logins of container registries (services/registries/). */
  registries: RegistryService;
  /** DNS providers and managed domains (services/dns/, issue 21). */
  dns: DnsService;
  // clusters (issue 20)
  /** Swarm clusters of the team's servers (services/clusters/). */
  clusters: ClusterService;
}

export function createServices(db: Db, reader: SqlReader, box: SecretBox, jobs: JobQueue, agentSetup: AgentSetup, config: Config): Services {
  const gitApps = new GitAppService(db, box, outboundFetch({ allowPrivate: config.allowPrivateEndpoints }));
  // Which networks resources and proxies join (services/network-plan.ts).
  const networkPlan: NetworkPlanContext = { db, network: config.network, dialect: config.database.kind };
  const networks = new NetworkService(db, jobs, { network: config.network, dialect: config.database.kind, proxyName: config.proxy.name });
  // DNS (issue 21): PowerDNS URLs are the user's (guarded); Cloudflare's base URL is the operator's.
  const dns = new DnsService(db, box, {
    allowPrivate: config.allowPrivateEndpoints,
    cloudflareApiUrl: config.cloudflareApiUrl,
    userFetch: outboundFetch({ allowPrivate: config.allowPrivateEndpoints }),
    fetch: plainFetch,
  });
  const applications = new ApplicationService(
    db,
    reader,
    jobs,
    box,
    (serverId, removing) => proxySettings(networkPlan, serverId, config.proxy, { excluding: removing }),
    (uuid) => webhookUrls(config.publicUrl, uuid),
    // w5/dns: records follow an application's hostnames (one reconcile of the domains concerned).
    (teamId, fqdns) => dns.hostsChanged(teamId, fqdns),
  );
  // registries (issue 18): failed pulls with a 401 (of every job that pulls) refresh cloud_a tokens (jobs/outcome-map.ts).
  const registries = new RegistryService(db, box, jobs, {
    allowPrivate: config.allowPrivateEndpoints,
    dialect: config.database.kind,
    fetch: outboundFetch({ allowPrivate: config.allowPrivateEndpoints }),
    cloudAEndpoint: config.registryCloudAEndpoint,
  });
  const deployments = new DeploymentService({
    db,
    reader,
    dialect: config.database.kind,
    jobs,
    spec: { db, box, config: { proxy: config.proxy, baseImages: config.builderImages, network: config.network, dialect: config.database.kind }, gitAppToken: (id) => gitApps.installationToken(id) },
    settings: { ...config.deploy, registry: config.buildRegistry },
  });
  const s3Storages = new S3StorageService(db, box, { allowPrivate: config.allowPrivateEndpoints, dialect: config.database.kind });
  const backups = new BackupService({
    db,
    dialect: config.database.kind,
    jobs,
    box,
    storages: s3Storages,
    // platform_instance backups (issue 19): the key is read as the instance read it at start.
    platform: { dataDir: config.dataDir, database: config.database, instanceKey: () => resolveInstanceKey(config.secretKey, config.dataDir) },
    // (w8/rbconfig) a configuration restore that changes domains
    hostsChanged: (teamId, fqdns) => dns.hostsChanged(teamId, fqdns),
    databases: { proxyPorts: { http: config.proxy.httpPort, https: config.proxy.httpsPort }, network: { network: config.network, dialect: config.database.kind } },
  });
  const serviceTemplates = new ServiceTemplateService(db);
  const services = new ServiceService(db, reader, box, serviceTemplates, config.templateImageOverrides, {
    db,
    jobs,
    // w7/svcroute: a deleted service's hosts leave the ownership table its removal job carries.
    proxy: (serverId, opts) =>
      proxySettings(networkPlan, serverId, config.proxy, { planned: opts?.planned, excludingServices: opts?.removingService !== undefined ? [opts.removingService] : undefined }),
    networkPlan,
    // w6/dnsres: records follow the components' hostnames.
    hostsChanged: (teamId, fqdns) => dns.hostsChanged(teamId, fqdns),
    generatedDomains: { wildcard: config.serviceWildcardDomain, publicUrl: config.publicUrl },
    backups,
  });
  // Issue 19: a service's configuration backups follow its compose rules, which the service layer holds.
  backups.bindServiceConfiguration(services.configuration);
  const databases = new DatabaseService({ db, reader, jobs, box, proxyPorts: { http: config.proxy.httpPort, https: config.proxy.httpsPort }, network: { network: config.network, dialect: config.database.kind }, backups });
  return {
    db,
    reader,
    jobs,
    scope: (caller) => new TeamScope(caller, db, reader),
    teams: new TeamService(db),
    // w6/dnsres: records follow the hostnames a deleted project or environment takes along.
    projects: new ProjectService(db, reader, applications, networks, databases, services, (teamId, fqdns) => dns.hostsChanged(teamId, fqdns)),
    permissions: new PermissionService(db),
    keys: new PrivateKeyService(db, box),
    serviceTemplates,
    servers: new ServerService(db, jobs, agentSetup, reader, { proxyName: config.proxy.name, proxyIsolation: config.network.proxyIsolation }, { allowPrivateEndpoints: config.allowPrivateEndpoints }),
    applications,
    envVars: new EnvVarService(db, applicationEnvOwners(), box, config.database.kind),
    volumes: new VolumeService(db),
    gitApps,
    deployments,
    webhooks: new WebhookService(db, box, deployments, config.publicUrl),
    networks,
    s3Storages,
    backups,
    databases,
    databaseEnvs: new EnvVarService(db, databases.envOwners(), box, config.database.kind),
    launch: new LaunchService(db, applications, deployments, databases),
    templateSources: new TemplateSourceService(db, box, { allowPrivate: config.allowPrivateEndpoints }),
    // services (issue 17)
    services,
    serviceEnvs: new EnvVarService(db, services.envOwners(), box, config.database.kind),

    // registries (issue 18)
    registries,
    dns,
    // clusters (issue 20)
    clusters: new ClusterService(db, jobs),
  };
}
