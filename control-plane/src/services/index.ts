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
import { EnvVarService } from "./env-vars.js";
import { VolumeService } from "./volumes.js";
import { GitAppService } from "./git-apps.js";
import { proxySettings } from "./deploy-spec.js";
import { DeploymentService } from "./deployments.js";
import { WebhookService } from "./webhooks.js";
import { webhookUrls } from "@capstan/shared";

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
}

export function createServices(db: Db, reader: SqlReader, box: SecretBox, jobs: JobQueue, agentSetup: AgentSetup, config: Config): Services {
  const access = new AccessService(db);
  const gitApps = new GitAppService(db, access, box, outboundFetch({ allowPrivate: config.allowPrivateEndpoints }));
  const applications = new ApplicationService(db, reader, access, jobs, box, (serverId) => proxySettings(db, serverId, config.proxy), (uuid) =>
    webhookUrls(config.publicUrl, uuid),
  );
  const deployments = new DeploymentService({
    db,
    reader,
    dialect: config.database.kind,
    access,
    jobs,
    spec: { db, box, config: { proxy: config.proxy, baseImages: config.builderImages }, gitAppToken: (id) => gitApps.installationToken(id) },
    settings: { ...config.deploy, registry: config.buildRegistry },
  });
  return {
    db,
    reader,
    jobs,
    access,
    teams: new TeamService(db),
    projects: new ProjectService(db, reader, access, applications),
    permissions: new PermissionService(db, access),
    keys: new PrivateKeyService(db, access, box),
    servers: new ServerService(db, access, jobs, agentSetup),
    applications,
    envVars: new EnvVarService(db, applications, box),
    volumes: new VolumeService(db, applications),
    gitApps,
    deployments,
    webhooks: new WebhookService(db, box, access, deployments, config.publicUrl),
  };
}
