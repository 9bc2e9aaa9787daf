export * from "./facts.js";
export * from "./jobs.js";
export * from "./messages.js";
