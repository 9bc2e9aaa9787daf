/**
 * Labels the platform owns (reserved prefix `capstan.`): the contract between the agent (which
 * sets and reads them), the proxy selection, the compose rewrite in the control plane and
 * GET /servers/{uuid}/resources and /domains.
 */
export const LABEL_MANAGED = "capstan.managed";
export const LABEL_JOB = "capstan.job";
export const MANAGED = { [LABEL_MANAGED]: "true" } as const;

/** Application containers (contract shared with the proxy and GET /servers/{uuid}/domains). */
export const LABEL_RESOURCE_UUID = "capstan.resource.uuid";
export const LABEL_RESOURCE_NAME = "capstan.resource.name";
export const LABEL_RESOURCE_TYPE = "capstan.resource.type";
export const LABEL_DEPLOYMENT = "capstan.deployment";
export const LABEL_DOMAINS = "capstan.domains";
export const LABEL_PROXY_ROUTES = "capstan.proxy.routes";
export const LABEL_PROXY_PORT = "capstan.proxy.port";
export const LABEL_PROXY_NETWORK = "capstan.proxy.network";
/** ms epoch when the container was created; among an app's serving containers the newest wins. */
export const LABEL_ROLLOUT = "capstan.rollout";
/** Git commit the container's image was built from (so a redelivered deploy can report it). */
export const LABEL_COMMIT = "capstan.commit";
export const RESOURCE_TYPE_APPLICATION = "application";

/**
 * Database containers: their engine (postgresql, redis, ...), so GET /servers/{uuid}/resources
 * can name their type (standalone-<engine>) from the engine alone, like their name and status.
 */
export const LABEL_DATABASE_ENGINE = "capstan.database.engine";

/**
 * Networks the platform creates: the scope they were made for (environment, shared, proxy).
 * Sync records a network found on a server by it: shared when the platform made it, system otherwise.
 */
export const LABEL_NETWORK_SCOPE = "capstan.network.scope";

// services lifecycle (issue 17)
/** Service containers (capstan.resource.type "service"): the compose service's component uuid, for per-component status. */
export const LABEL_SERVICE_COMPONENT = "capstan.service.component";
export const RESOURCE_TYPE_SERVICE = "service";
/** The per-component status entries an agent reports for service containers (ResourceStatus.type). */
export const RESOURCE_TYPE_SERVICE_COMPONENT = "service-component";
