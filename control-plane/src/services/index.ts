import type { Db } from "../db/client.js";
import type { SecretBox } from "../crypto/secret-box.js";
import { AccessService } from "./access.js";
import { PermissionService } from "./permissions.js";
import { PrivateKeyService } from "./keys.js";
import { ProjectService } from "./projects.js";
import { TeamService } from "./teams.js";

export interface Services {
  db: Db;
  access: AccessService;
  teams: TeamService;
  projects: ProjectService;
  permissions: PermissionService;
  keys: PrivateKeyService;
}

export function createServices(db: Db, box: SecretBox): Services {
  const access = new AccessService(db);
  return {
    db,
    access,
    teams: new TeamService(db),
    projects: new ProjectService(db, access),
    permissions: new PermissionService(db, access),
    keys: new PrivateKeyService(db, access, box),
  };
}
