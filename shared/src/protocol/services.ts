import { z } from "zod";
import { AppRef, EnvMap, ProxySettings } from "./deploy.js";
import { DockerName } from "./names.js";
import { NetworkSpec } from "./networks.js";
import { VolumeName } from "../validation/inputs.js";

/**
 * service.deploy (issue 17, spec 4.6): runs a service's compose file, already rendered from its
 * template and rewritten by the control plane (names, labels, networks, every `$` escaped), with
 * the same compose machinery as compose applications (agent/src/deploy/compose.ts), then points
 * the proxy at its routed components. `pull`: pull every image first (start with pull).
 */
export const ServiceDeployPayload = z.object({
  /** A fresh uuid per start: the rollout the containers carry (capstan.deployment). */
  deployment_uuid: z.string().regex(/^[a-z0-9-]{1,64}$/),
  service: AppRef,
  compose: z.string().min(1).max(1_048_576),
  pull: z.boolean().default(false),
  /** Recreate every container (restart): changed variables and storages take effect in all of them. */
  recreate: z.boolean().default(false),
  run: z.object({
    /** The service's variables: masked in every line the job prints. */
    env: EnvMap,
    network: VolumeName,
    networks: z.array(DockerName).max(64).default([]),
    ensure_networks: z.array(NetworkSpec).max(16).default([]),
  }),
  proxy: ProxySettings,
});
export type ServiceDeployPayload = z.infer<typeof ServiceDeployPayload>;

/** Each component's engine status after the deploy (by compose service name), and the compose project's. */
export const ServiceComponentStatus = z.object({ name: z.string().max(255), status: z.string().max(64) });
export const ServiceDeployResult = z.object({ status: z.string().max(64), components: z.array(ServiceComponentStatus).max(256) });
export type ServiceDeployResult = z.infer<typeof ServiceDeployResult>;

export const SERVICE_ACTIONS = ["stop", "remove"] as const;
/**
 * service.action: stop keeps the containers (a start runs compose up again); remove takes the
 * containers, the service's own network and its routes, its volumes when delete_volumes, its
 * stored compose file unless delete_configurations is false, its images when docker_cleanup.
 */
export const ServiceActionPayload = z.object({
  service: AppRef,
  action: z.enum(SERVICE_ACTIONS),
  delete_volumes: z.boolean().default(false),
  docker_cleanup: z.boolean().default(false),
  delete_configurations: z.boolean().default(true),
  proxy: ProxySettings,
});
export type ServiceActionPayload = z.infer<typeof ServiceActionPayload>;
export const ServiceActionResult = ServiceDeployResult;
