import { outboundFetch } from "../lib/outbound.js";
import type { Db } from "../db/client.js";
import type { SqlReader } from "../db/reader.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { JobQueue } from "../jobs/queue.js";
import type { Config } from "../config.js";
import { AccessService } from "./access.js";
import { PermissionService } from "./permissions.js";
import { PrivateKeyService } from "./keys.js";
import { ProjectService } from "./projects.js";
import { ServerService, type AgentSetup } from "./servers.js";
import { TeamService } from "./teams.js";
import { ApplicationService } from "./applications.js";
import { EnvVarService, applicationEnvOwners } from "./env-vars.js";
import { VolumeService } from "./volumes.js";
import { GitAppService } from "./git-apps.js";
import { proxySettings } from "./deploy-spec.js";
import { DeploymentService } from "./deployments.js";
import { WebhookService } from "./webhooks.js";
import { webhookUrls } from "@capstan/shared";
import { NetworkService } from "./networks.js";
import type { NetworkPlanContext } from "./network-plan.js";
import { S3StorageService } from "./s3-storages.js";
import { BackupService } from "./backups.js";
import { DatabaseService } from "./databases.js";

export interface Services {
  db: Db;
  /** Plain-SQL read path for the hot GETs (db/reader.ts). */
  reader: SqlReader;
  jobs: JobQueue;
  access: AccessService;
  teams: TeamService;
  projects: ProjectService;
  permissions: PermissionService;
  keys: PrivateKeyService;
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
}

export function createServices(db: Db, reader: SqlReader, box: SecretBox, jobs: JobQueue, agentSetup: AgentSetup, config: Config): Services {
  const access = new AccessService(db);
  const gitApps = new GitAppService(db, access, box, outboundFetch({ allowPrivate: config.allowPrivateEndpoints }));
  // Which networks resources and proxies join (services/network-plan.ts).
  const networkPlan: NetworkPlanContext = { db, network: config.network, dialect: config.database.kind };
  const networks = new NetworkService(db, access, jobs, { network: config.network, dialect: config.database.kind, proxyName: config.proxy.name });
  const applications = new ApplicationService(db, reader, access, jobs, box, (serverId) => proxySettings(networkPlan, serverId, config.proxy), (uuid) =>
    webhookUrls(config.publicUrl, uuid),
  );
  const deployments = new DeploymentService({
    db,
    reader,
    dialect: config.database.kind,
    access,
    jobs,
    spec: { db, box, config: { proxy: config.proxy, baseImages: config.builderImages, network: config.network, dialect: config.database.kind }, gitAppToken: (id) => gitApps.installationToken(id) },
    settings: { ...config.deploy, registry: config.buildRegistry },
  });
  const s3Storages = new S3StorageService(db, access, box, { allowPrivate: config.allowPrivateEndpoints, dialect: config.database.kind });
  const backups = new BackupService({ db, dialect: config.database.kind, access, jobs, box, storages: s3Storages });
  const databases = new DatabaseService({ db, reader, access, jobs, box, proxyPorts: { http: config.proxy.httpPort, https: config.proxy.httpsPort }, network: { network: config.network, dialect: config.database.kind }, backups });
  return {
    db,
    reader,
    jobs,
    access,
    teams: new TeamService(db),
    projects: new ProjectService(db, reader, access, applications, networks, databases),
    permissions: new PermissionService(db, access),
    keys: new PrivateKeyService(db, access, box),
    servers: new ServerService(db, access, jobs, agentSetup),
    applications,
    envVars: new EnvVarService(db, applicationEnvOwners(applications), box),
    volumes: new VolumeService(db, applications),
    gitApps,
    deployments,
    webhooks: new WebhookService(db, box, access, deployments, config.publicUrl),
    networks,
    s3Storages,
    backups,
    databases,
    databaseEnvs: new EnvVarService(db, databases.envOwners(), box),
  };
}
