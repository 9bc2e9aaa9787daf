import { ServiceDeployPayload, type ProxyRoute, type ProxySettings } from "@capstan/shared";
import type { Db } from "../../db/client.js";
import { Invalid } from "../../domain/errors.js";
import { parseCompose, rewriteCompose, type ComposeDoc, type ExtraNetwork } from "../../compose/index.js";
import type { JobQueue } from "../../jobs/queue.js";
import { newUuid } from "../../lib/ids.js";
import type { GenerationSettings } from "./generated-domains.js";
import { NetworkLimitError, environmentNetworkName, resourceNetworks, type NetworkPlanContext, type PlannedEnvironmentNetwork } from "../network-plan.js";

/**
 * What starting a service needs besides its records (issue 17): the durable job queue, the
 * server's proxy settings (ProxySource, as applications get them) and the network plan.
 */
export interface ServiceRuntime {
  db: Db;
  jobs: JobQueue;
  /** `removingService`: a service being deleted (its hosts leave the ownership table sent with its removal). */
  proxy(serverId: number, opts?: { removingService?: number; planned?: PlannedEnvironmentNetwork }): Promise<ProxySettings>;
  networkPlan: NetworkPlanContext;
  /** w6/dnsres: records follow the components' hostnames (DnsService.hostsChanged). */
  hostsChanged?: (teamId: number, fqdns: (string | null)[]) => Promise<void>;
  /** What generated domains are made from besides the database (generated-domains.ts); absent: sslip.io from the server's address only. */
  generatedDomains?: GenerationSettings;
  /** Resource backups (issue 19): the open backup and restore jobs of a deleted service are cancelled. */
  backups?: { beforeServiceDelete(serviceId: number): Promise<void> };
}

/** A reason a service cannot start now (shown to the user as a 409). */
export class ServicePayloadError extends Error {}

interface ServiceForStart {
  id: number;
  uuid: string;
  name: string;
  teamId: number;
  serverId: number;
  environmentId: number;
  destinationId: number;
  components: { uuid: string; name: string }[];
}

/**
 * A service's storages added to its compose document before the rewrite: a named storage is a
 * top-level volume (rewritten to `<service uuid>-<name>`, as for compose applications), a
 * host_path one a bind mount; each is mounted into its component only.
 */
export async function withStorages(db: Db, serviceId: number, doc: ComposeDoc): Promise<ComposeDoc> {
  const rows = await db.serviceStorage.findMany({ where: { serviceId }, orderBy: { id: "asc" }, include: { component: { select: { name: true } } } });
  if (rows.length === 0) return doc;
  const services = doc.services.map((s) => {
    const mine = rows.filter((r) => r.component.name === s.name);
    if (mine.length === 0) return s;
    const mounts = [
      ...s.mounts.filter((m) => !mine.some((r) => r.mountPath === m.target)),
      ...mine.map((r) =>
        r.hostPath
          ? { type: "bind" as const, source: r.hostPath, target: r.mountPath, readOnly: false }
          : { type: "volume" as const, source: r.name, target: r.mountPath, readOnly: false, nocopy: false },
      ),
    ];
    return { ...s, mounts };
  });
  const declared = new Set(doc.volumes.map((v) => v.name));
  const volumes = [...doc.volumes, ...rows.filter((r) => !r.hostPath && !declared.has(r.name)).map((r) => ({ name: r.name, labels: {} }))];
  return { ...doc, services, volumes };
}

/**
 * The service.deploy payload of a start: the rendered compose file (the service's template with
 * its stored values) with its storages, rewritten by the compose applications' rewrite
 * (compose/rewrite.ts) for resource type "service": project capstan-<service uuid>, containers
 * `<service uuid>-<compose service>`, each labelled with its component's uuid, on the service's
 * own network and its environment's network (under isolation). Networks are planned, not
 * recorded: the caller records them in the transaction that writes the job.
 */
export async function buildServicePayload(
  rt: ServiceRuntime,
  input: {
    service: ServiceForStart;
    compose: string;
    env: Record<string, string>;
    pull: boolean;
    recreate: boolean;
    /** w7/svcroute: the routed components (service applications with an fqdn) by compose service name: routes and port. */
    routed?: Record<string, { routes: ProxyRoute[]; port: number | null }>;
  },
): Promise<ServiceDeployPayload> {
  const { service } = input;
  const placement = await rt.db.service.findUnique({
    where: { id: service.id },
    select: { destination: { select: { networkName: true } }, environment: { select: { id: true, uuid: true } } },
  });
  if (!placement) throw new ServicePayloadError("The service no longer exists.");
  let plan;
  try {
    plan = await resourceNetworks(
      rt.networkPlan,
      {
        teamId: service.teamId,
        serverId: service.serverId,
        environment: placement.environment,
        destinationNetwork: placement.destination.networkName,
        resource: { type: "service", id: service.id },
        // w7/svcroute: a service with a routed component joins the proxy's network (that component alone).
        isPublic: Object.keys(input.routed ?? {}).length > 0,
      },
      { record: false },
    );
  } catch (err) {
    if (err instanceof NetworkLimitError) throw new ServicePayloadError(`The service's environment network cannot be created: ${err.message}`);
    throw err;
  }
  const deploymentUuid = newUuid();
  let compose: string;
  try {
    const doc = await withStorages(rt.db, service.id, parseCompose(input.compose));
    compose = rewriteCompose(doc, {
      appUuid: service.uuid,
      appName: service.name,
      deploymentUuid,
      network: plan.network,
      networks: plan.networks.map((name): ExtraNetwork => ({ name, publicOnly: name === plan.proxy_network })),
      proxyNetwork: plan.proxy_network,
      routes: [],
      port: null,
      routed: input.routed ?? {},
      // The rendered file has its values already (every `$` escaped): nothing is left to resolve.
      env: {},
      rollout: Date.now(),
      resourceType: "service",
      components: Object.fromEntries(service.components.map((c) => [c.name, c.uuid])),
    });
  } catch (err) {
    if (err instanceof Invalid) {
      const details = Object.values(err.errors).flat().slice(0, 5).join(" ");
      throw new ServicePayloadError(`The service's compose file cannot be started: ${details || err.message}`);
    }
    throw err;
  }
  const parsed = ServiceDeployPayload.safeParse({
    deployment_uuid: deploymentUuid,
    service: { uuid: service.uuid, name: service.name },
    compose,
    pull: input.pull,
    recreate: input.recreate,
    run: { env: input.env, network: plan.network, networks: plan.networks, ensure_networks: plan.ensure_networks },
    // The proxy joins the service's environment network before it is recorded (recorded with the job).
    proxy: await rt.proxy(service.serverId, { planned: { environmentId: placement.environment.id, name: environmentNetworkName(placement.environment.uuid) } }),
  });
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join(".") || "payload"}: ${i.message}`);
    throw new ServicePayloadError(`The service's configuration cannot be started: ${problems.join("; ")}`);
  }
  return parsed.data;
}
