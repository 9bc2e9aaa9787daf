import { LabelOverrides, LabelOverridesMutation, PutLabelOverridesBody, ServiceApplicationParams, ServiceDatabaseParams } from "@capstan/shared";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { labelOverridesDto } from "../mappers/services.js";

/**
 * Label overrides (spec 4.15, issue 17; docs/proxy-labels.md), area w5/svcextras: GET, PUT
 * {yaml} and DELETE per service application and service database, behind the paid feature
 * PROXY_LABEL_OVERRIDES (the route table's one feature gate: 402 before anything else).
 */
const TAG = "Services";
const FEATURE = "PROXY_LABEL_OVERRIDES" as const;
const PAID = { description: "The team does not have the paid feature PROXY_LABEL_OVERRIDES" };
const NEXT_START = "The service's stored compose file is rendered again with them: they take effect on its next start or restart.";

const kinds = [
  { path: "/service-applications/{uuid}/label-overrides", noun: "service application", kind: "application", params: ServiceApplicationParams },
  { path: "/service-databases/{uuid}/label-overrides", noun: "service database", kind: "database", params: ServiceDatabaseParams },
] as const;

export const labelOverrideRoutes = kinds.flatMap(({ path, noun, kind, params }) => {
  const notFound = { description: `No ${noun} with this uuid in the caller's team` };
  return [
    route({
      method: "get",
      path,
      tag: TAG,
      summary: `Get a ${noun}'s label overrides`,
      description:
        "The YAML as last PUT (\"\" when none), the labels it applies (reserved keys removed, values as text) and the keys dropped for their reserved prefix " +
        "(capstan., com.docker.compose.). Needs view access to the service's environment. Beyond the spec: the response body (the spec shows none).",
      feature: FEATURE,
      params,
      responses: { 200: { description: "Label overrides", schema: LabelOverrides }, 401: ERR[401], 402: PAID, 403: ERR[403], 404: notFound },
      async handler({ scope, services, params: p }) {
        return { body: labelOverridesDto(await services.services.labelOverrides(scope, kind, p.uuid)) };
      },
    }),
    route({
      method: "put",
      path,
      tag: TAG,
      summary: `Set a ${noun}'s label overrides`,
      description:
        "yaml: a map of label key to value (string, number or boolean), merged over the labels of the container's compose service; on a collision the user's value wins. " +
        "Keys with the reserved prefixes capstan. and com.docker.compose. are dropped (named in data.dropped), not refused; invalid YAML, other values, bad keys and sizes " +
        `over the limits are a 422 under yaml. The proxy honours the proxy.* directives of docs/proxy-labels.md. Needs full access to the environment. ${NEXT_START}`,
      feature: FEATURE,
      params,
      body: PutLabelOverridesBody,
      responses: { 200: { description: "Saved", schema: LabelOverridesMutation }, 401: ERR[401], 402: PAID, 403: ERR[403], 404: notFound, 422: ERR[422] },
      async handler({ scope, services, params: p, body }) {
        const data = labelOverridesDto(await services.services.setLabelOverrides(scope, kind, p.uuid, body.yaml));
        const dropped = data.dropped.length ? ` Dropped for their reserved prefix: ${data.dropped.join(", ")}.` : "";
        return { body: { message: `Label overrides saved.${dropped} ${NEXT_START}`, data } };
      },
    }),
    route({
      method: "delete",
      path,
      tag: TAG,
      summary: `Remove a ${noun}'s label overrides`,
      description: `The container gets only the labels of its compose service again. Needs full access to the environment. ${NEXT_START}`,
      feature: FEATURE,
      params,
      responses: { 200: { description: "Removed", schema: LabelOverridesMutation }, 401: ERR[401], 402: PAID, 403: ERR[403], 404: notFound },
      async handler({ scope, services, params: p }) {
        const data = labelOverridesDto(await services.services.setLabelOverrides(scope, kind, p.uuid, ""));
        return { body: { message: `Label overrides removed. ${NEXT_START}`, data } };
      },
    }),
  ];
});
