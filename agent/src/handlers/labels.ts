/** The platform's label names live in shared (protocol/labels.ts): both ends read them. */
export {
  LABEL_COMMIT,
  LABEL_DEPLOYMENT,
  LABEL_DOMAINS,
  LABEL_JOB,
  LABEL_MANAGED,
  LABEL_PROXY_NETWORK,
  LABEL_PROXY_PORT,
  LABEL_PROXY_ROUTES,
  LABEL_RESOURCE_NAME,
  LABEL_RESOURCE_TYPE,
  LABEL_RESOURCE_UUID,
  LABEL_ROLLOUT,
  MANAGED,
  RESOURCE_TYPE_APPLICATION,
} from "@capstan/shared";
