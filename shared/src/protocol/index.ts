export * from "./facts.js";
export * from "./jobs.js";
export * from "./messages.js";
export * from "./deploy.js";
export * from "./status.js";
export * from "./labels.js";
export * from "./names.js";
export * from "./databases.js";
export * from "./backups.js";
export * from "./configuration.js";
export * from "./networks.js";
export * from "./routing.js";
// registries (issue 18)
export * from "./registries.js";

// proxy labels (issue 17, label overrides)
export * from "./proxy-labels.js";
// services lifecycle (issue 17)
export * from "./services.js";

// clusters (issue 20)
export * from "./swarm.js";
