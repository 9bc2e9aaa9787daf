import type { AnyRoute } from "../route.js";
import { keyRoutes } from "./keys.js";
import { permissionRoutes } from "./permissions.js";
import { projectRoutes } from "./projects.js";
import { serverRoutes } from "./servers.js";
import { teamRoutes } from "./teams.js";
import { applicationRoutes } from "./applications.js";
import { gitAppRoutes } from "./git-apps.js";
import { deploymentRoutes } from "./deployments.js";
import { webhookRoutes } from "./webhooks.js";
import { networkRoutes } from "./networks.js";
import { s3StorageRoutes } from "./s3-storages.js";
import { backupRoutes } from "./backups.js";
import { databaseRoutes } from "./databases.js";
import { serviceTemplateRoutes } from "./service-templates.js";
import { templateSourceRoutes } from "./template-sources.js";
// services (issue 17)
import { serviceRoutes } from "./services.js";

// registries (issue 18)
import { registryRoutes } from "./registries.js";

// DNS (issue 21)
import { dnsRoutes } from "./dns.js";

// label overrides (w5/svcextras, spec 4.15)
import { labelOverrideRoutes } from "./label-overrides.js";
import { serviceApplicationRoutes } from "./service-applications.js";
// clusters (issue 20)
import { clusterRoutes } from "./clusters.js";
// resource backups (issue 19)
import { resourceBackupRoutes } from "./resource-backups.js";

/**
 * The route table. Order matters where paths overlap: fixed segments come before
 * parameters (/projects/{uuid}/environments before /projects/{uuid}/{environment}).
 */
export const routes: AnyRoute[] = [...teamRoutes, ...projectRoutes, ...permissionRoutes, ...keyRoutes, ...serverRoutes, ...applicationRoutes, ...gitAppRoutes, ...deploymentRoutes, ...webhookRoutes, ...databaseRoutes, ...networkRoutes, ...s3StorageRoutes, ...backupRoutes, ...serviceTemplateRoutes, ...templateSourceRoutes,
  // services (issue 17)
  ...serviceRoutes,

  // registries (issue 18)
  ...registryRoutes,

  // DNS (issue 21)
  ...dnsRoutes,

  // label overrides (w5/svcextras, spec 4.15)
  ...labelOverrideRoutes,
  // clusters (issue 20)
  ...clusterRoutes,
  // resource backups (issue 19)
  ...resourceBackupRoutes,
  // ---- w7/svcroute: service applications' domains (issue 17) ----
  ...serviceApplicationRoutes,
];
