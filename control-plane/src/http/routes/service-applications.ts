import { ServiceApplicationMutation, ServiceApplicationParams, UpdateServiceApplicationBody } from "@capstan/shared";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { serviceApplicationDto } from "../mappers/services.js";

/**
 * A service application's domains (issue 17, w7/svcroute; beyond the spec, docs/decisions.md):
 * PATCH {fqdn}, as an application's fqdn. The proxy routes them with HTTPS from the service's
 * next start or restart; stop and delete take the routes away.
 */
export const serviceApplicationRoutes = [
  route({
    method: "patch",
    path: "/service-applications/{uuid}",
    tag: "Services",
    summary: "Set a service application's domains",
    description:
      "Beyond the spec. fqdn: comma-separated URLs (a bare host name means https, http:// keeps that domain on plain HTTP; empty or null: not routed), " +
      "validated as an application's. A host belongs to one project of the team, whether an application or a service application uses it: a host " +
      "(or the exact host and path on the same server) another resource claims is a 409 with the reason. The proxy routes the domains to the " +
      "container's port (the template's SERVICE_FQDN_/SERVICE_URL_ port, else its first exposed port) from the service's next start or restart, and " +
      "its SERVICE_FQDN_*/SERVICE_URL_* values follow them. A routable service application got a generated domain when its service was created (POST /services); " +
      "this replaces it, and an empty fqdn clears it for good (nothing generates it again). Needs full access to the service's environment.",
    params: ServiceApplicationParams,
    body: UpdateServiceApplicationBody,
    responses: {
      200: { description: "Saved", schema: ServiceApplicationMutation },
      401: ERR[401],
      403: ERR[403],
      404: { description: "No service application with this uuid in the caller's team" },
      409: { description: "A host or path of fqdn is used by another application or service application" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const data = serviceApplicationDto(await services.services.setApplicationFqdn(scope, params.uuid, body.fqdn));
      return { body: { message: "Domains saved. They take effect on the service's next start or restart.", data } };
    },
  }),
];
