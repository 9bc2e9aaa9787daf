import type { Db } from "../db/client.js";
import type { SqlReader } from "../db/reader.js";
import type { SecretBox } from "../crypto/secret-box.js";
import type { JobQueue } from "../jobs/queue.js";
import { AccessService } from "./access.js";
import { PermissionService } from "./permissions.js";
import { PrivateKeyService } from "./keys.js";
import { ProjectService } from "./projects.js";
import { ServerService, type AgentSetup } from "./servers.js";
import { TeamService } from "./teams.js";

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
}

export function createServices(db: Db, reader: SqlReader, box: SecretBox, jobs: JobQueue, agentSetup: AgentSetup): Services {
  const access = new AccessService(db);
  return {
    db,
    reader,
    jobs,
    access,
    teams: new TeamService(db),
    projects: new ProjectService(db, reader, access),
    permissions: new PermissionService(db, access),
    keys: new PrivateKeyService(db, access, box),
    servers: new ServerService(db, access, jobs, agentSetup),
  };
}
