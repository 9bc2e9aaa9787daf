export * from "./api/common.js";
export * from "./api/teams.js";
export * from "./api/projects.js";
export * from "./api/permissions.js";
export * from "./api/keys.js";
export * from "./api/servers.js";
export * from "./version.js";
export * from "./protocol/index.js";
