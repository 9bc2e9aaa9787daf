export * from "./api/common.js";
export * from "./api/teams.js";
export * from "./api/projects.js";
export * from "./api/permissions.js";
export * from "./api/keys.js";
export * from "./api/service-templates.js";
export * from "./api/servers.js";
export * from "./api/applications.js";
export * from "./api/git-apps.js";
export * from "./api/deployments.js";
export * from "./api/webhooks.js";
export * from "./api/s3-storages.js";
export * from "./api/template-sources.js";
export * from "./api/backups.js";
export * from "./api/databases.js";
export * from "./api/networks.js";
export * from "./api/features.js";
// services (issue 17)
export * from "./api/services.js";
// DNS (issue 21)
export * from "./api/dns.js";
export * from "./version.js";
export * from "./protocol/index.js";
export * from "./validation/inputs.js";
export * from "./validation/host-path.js";
export * from "./validation/text.js";
export * from "./log/redact.js";
export * from "./log/mask.js";
export * from "./templates/schema.js";
// dashboard sessions (area: dashboard, issue 22)
export * from "./api/session.js";

// registries (issue 18)
export * from "./api/registries.js";

// label overrides (w5/svcextras, spec 4.15)
export * from "./api/label-overrides.js";
// clusters (issue 20)
export * from "./api/clusters.js";
// resource backups (issue 19)
export * from "./api/resource-backups.js";
