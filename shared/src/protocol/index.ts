export * from "./facts.js";
export * from "./jobs.js";
export * from "./messages.js";
export * from "./deploy.js";
export * from "./status.js";
export * from "./labels.js";
