import {
  ClusterList,
  ClusterListQuery,
  ClusterNodeLabelsBody,
  ClusterNodeList,
  ClusterNodeMutation,
  ClusterNodeParams,
  ClusterParams,
  Cluster,
  DetectClustersResult,
  ClusterServiceParams,
  ClusterServiceScaleBody,
  ClusterServiceList,
  ClusterServiceMutation,
  ClusterTaskList,
  ClusterConfigBody,
  ClusterConfigList,
  ClusterConfigMutation,
  ClusterConfigParams,
  ClusterSecretBody,
  ClusterSecretList,
  ClusterSecretMutation,
  ClusterSecretParams,
  MessageBody,
  ClusterEventList,
  ClusterEventsQuery,
  sinceToNano,
} from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { clusterConfigDto, clusterDto, clusterNodeDto, clusterSecretDto, clusterServiceDto, clusterTaskDto, detectedClusterDto, clusterEventDto } from "../mappers/clusters.js";
import { NODE_ACTIONS, type NodeAction } from "../../services/clusters/index.js";

/** Clusters (spec 4.12, issue 20, docs/clusters.md): every route behind the paid feature CLUSTER_MANAGEMENT. */
const TAG = "Clusters";
const FEATURE = "CLUSTER_MANAGEMENT" as const;
const PAID = { 402: { description: "The team does not have the paid feature CLUSTER_MANAGEMENT" } };
const NODE_ERRORS = {
  401: ERR[401],
  402: PAID[402],
  403: ERR[403],
  404: ERR[404],
  409: { description: "Refused: it would leave no reachable manager or lose quorum (the reason is given), or the node changed concurrently twice in a row" },
  502: { description: "The manager's agent failed to change the node (the engine's reason)" },
  503: { description: "No manager server of the cluster has a connected agent" },
};

/** Services and tasks are read from a manager at each request: the node routes' errors but 409. */
const LIVE_READ_ERRORS = {
  401: ERR[401],
  402: PAID[402],
  403: ERR[403],
  404: ERR[404],
  502: { description: "The manager's agent failed to list them (the engine's reason)" },
  503: NODE_ERRORS[503],
};

/** Secrets and configs (issue 20, w7): read and changed live, as services. */
const STORED_ERRORS = {
  ...LIVE_READ_ERRORS,
  502: { description: "The manager's agent failed (the engine's reason)" },
};

const ACTION_TEXT: Record<NodeAction, { summary: string; description: string; done: string }> = {
  drain: { summary: "Drain a node", description: "Sets availability drain: the swarm moves the node's tasks to other nodes. Draining the last reachable active manager is refused.", done: "drained" },
  activate: { summary: "Activate a node", description: "Sets availability active: the node takes tasks again.", done: "activated" },
  promote: { summary: "Promote a node to manager", description: "Makes a worker a manager. Refused when the reachable managers would no longer be a majority (a node that is not ready cannot vote).", done: "promoted" },
  demote: { summary: "Demote a manager to worker", description: "Makes a manager a worker. Refused for the last reachable manager, or when the swarm would lose quorum.", done: "demoted" },
};

const nodeAction = (action: NodeAction) =>
  route({
    method: "post",
    path: `/clusters/{uuid}/nodes/{nodeId}/${action}`,
    tag: TAG,
    summary: ACTION_TEXT[action].summary,
    adminOnly: "change cluster nodes",
    description: `${ACTION_TEXT[action].description} Done by a manager's agent with the node's version index; when the node changed in between ("update out of sequence") it is retried once with the fresh version, and a second conflict is a 409.`,
    feature: FEATURE,
    params: ClusterNodeParams,
    responses: { 200: { description: "Changed", schema: ClusterNodeMutation }, ...NODE_ERRORS },
    async handler({ scope, services, params }) {
      const { row, node } = await services.clusters.changeNode(scope, params.uuid, params.nodeId, NODE_ACTIONS[action]);
      return { body: { message: `Node ${node.hostname} ${ACTION_TEXT[action].done}.`, data: clusterNodeDto(row, node) } };
    },
  });

export const clusterRoutes = [
  route({
    method: "get",
    path: "/clusters",
    tag: TAG,
    summary: "List clusters",
    description: "The team's swarms found by detect, with status (computed when read: unreachable, degraded, healthy) and node counts by role from the last node list.",
    feature: FEATURE,
    query: ClusterListQuery,
    responses: { 200: { description: "Clusters", schema: ClusterList }, 401: ERR[401], 402: PAID[402], 403: ERR[403] },
    async handler({ scope, services, query }) {
      const s = services.clusters;
      return { body: await paginate(query, () => s.count(scope), async (w) => (await s.list(scope, w)).map(clusterDto)) };
    },
  }),
  route({
    method: "post",
    path: "/clusters/detect",
    tag: TAG,
    summary: "Detect swarm clusters",
    adminOnly: "detect clusters",
    description: `Asks the agent of every connected server of the team for its engine's swarm membership; managers name the swarm and list its nodes. Creates or updates one cluster per swarm id and links the team's servers that are its nodes. Servers whose agent is not connected are not asked.`,
    feature: FEATURE,
    responses: { 200: { description: "Detected", schema: DetectClustersResult }, 401: ERR[401], 402: PAID[402], 403: ERR[403] },
    async handler({ scope, services }) {
      const found = await services.clusters.detect(scope);
      return { body: { message: `${found.length} cluster(s) found.`, clusters_found: found.length, data: found.map(detectedClusterDto) } };
    },
  }),
  route({
    method: "get",
    path: "/clusters/{uuid}",
    tag: TAG,
    summary: "Get a cluster",
    feature: FEATURE,
    params: ClusterParams,
    responses: { 200: { description: "Cluster", schema: Cluster }, 401: ERR[401], 402: PAID[402], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: clusterDto(await services.clusters.get(scope, params.uuid)) };
    },
  }),
  route({
    method: "get",
    path: "/clusters/{uuid}/nodes",
    tag: TAG,
    summary: "List a cluster's nodes",
    description: "As a connected manager lists them now (and stored); when no manager answers, the last stored list with refreshed false.",
    feature: FEATURE,
    params: ClusterParams,
    responses: { 200: { description: "Nodes", schema: ClusterNodeList }, 401: ERR[401], 402: PAID[402], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const { row, nodes, refreshed } = await services.clusters.nodes(scope, params.uuid);
      return { body: { data: nodes.map((n) => clusterNodeDto(row, n)), refreshed } };
    },
  }),
  nodeAction("drain"),
  nodeAction("activate"),
  nodeAction("promote"),
  nodeAction("demote"),
  route({
    method: "patch",
    path: "/clusters/{uuid}/nodes/{nodeId}/labels",
    tag: TAG,
    summary: "Set a node's labels",
    adminOnly: "change cluster nodes",
    description: `Replaces the node's user labels with exactly these (an empty object removes them all). Labels starting with capstan. belong to the platform: they cannot be set here and are kept. Same version index handling as the other node changes.`,
    feature: FEATURE,
    params: ClusterNodeParams,
    body: ClusterNodeLabelsBody,
    responses: { 200: { description: "Changed", schema: ClusterNodeMutation }, ...NODE_ERRORS, 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const { row, node } = await services.clusters.changeNode(scope, params.uuid, params.nodeId, { labels: body.labels });
      return { body: { message: `Labels of node ${node.hostname} set.`, data: clusterNodeDto(row, node) } };
    },
  }),
  // ---- swarm services (issue 20) ----
  route({
    method: "get",
    path: "/clusters/{uuid}/services",
    tag: TAG,
    summary: "List a cluster's services",
    description: 'As a connected manager lists them now (never stored): replicas "running/desired", ports "published:target".',
    feature: FEATURE,
    params: ClusterParams,
    responses: { 200: { description: "Services", schema: ClusterServiceList }, ...LIVE_READ_ERRORS },
    async handler({ scope, services, params }) {
      const { services: list } = await services.clusters.services(scope, params.uuid);
      return { body: { data: list.map(clusterServiceDto) } };
    },
  }),
  route({
    method: "get",
    path: "/clusters/{uuid}/services/{serviceId}/tasks",
    tag: TAG,
    summary: "List a service's tasks",
    description: "The service's tasks as a connected manager lists them now, with the node each is placed on (and the team's server that node is).",
    feature: FEATURE,
    params: ClusterServiceParams,
    responses: { 200: { description: "Tasks", schema: ClusterTaskList }, ...LIVE_READ_ERRORS },
    async handler({ scope, services, params }) {
      const { row, tasks } = await services.clusters.tasks(scope, params.uuid, params.serviceId);
      return { body: { data: tasks.map((x) => clusterTaskDto(row, x)) } };
    },
  }),
  route({
    method: "post",
    path: "/clusters/{uuid}/services/{serviceId}/scale",
    tag: TAG,
    summary: "Scale a service",
    adminOnly: "scale cluster services",
    description:
      'Sets a replicated service\'s replicas (0 stops its tasks and keeps the service). A global-mode service is refused (409, with the reason). Done by a manager\'s agent with the service\'s version index; when it changed in between ("update out of sequence") it is retried once with the fresh version, and a second conflict is a 409.',
    feature: FEATURE,
    params: ClusterServiceParams,
    body: ClusterServiceScaleBody,
    responses: {
      200: { description: "Scaled", schema: ClusterServiceMutation },
      ...NODE_ERRORS,
      409: { description: "Refused: a global-mode service has no replica count (the reason is given), or the service changed concurrently twice in a row" },
      502: { description: "The manager's agent failed to scale it (the engine's reason)" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const svc = await services.clusters.scale(scope, params.uuid, params.serviceId, body.replicas);
      return { body: { message: `Service ${svc.name} scaled to ${body.replicas}.`, data: clusterServiceDto(svc) } };
    },
  }),
  // ---- swarm secrets and configs (issue 20, w7) ----
  ...storedRoutes("secret"),
  ...storedRoutes("config"),
  // ---- cluster events (issue 20, w7/events) ----
  route({
    method: "get",
    path: "/clusters/{uuid}/events",
    tag: TAG,
    summary: "List a cluster's events",
    description:
      "The swarm's node, service, secret and config events (the engine's create / update / remove with its attributes), as the control plane collected them from a manager and stored them once each (kept 7 days, at most the newest 10,000 per cluster: docs/clusters.md). Chronological. With since: the first `limit` events after it (exclusive: pass the last event's time, RFC 3339 with nanoseconds, to page on); without: the latest `limit`. When the last collection started more than a few seconds ago and a manager's agent is connected, the request collects first (waiting at most 5 s).",
    feature: FEATURE,
    params: ClusterParams,
    query: ClusterEventsQuery,
    responses: { 200: { description: "Events", schema: ClusterEventList }, 401: ERR[401], 402: PAID[402], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, query }) {
      const { row, events } = await services.clusters.events(scope, params.uuid, { sinceNano: query.since === undefined ? undefined : sinceToNano(query.since)!, limit: query.limit });
      return { body: { data: events.map(clusterEventDto), collected_at: row.eventsAt ? row.eventsAt.toISOString() : null } };
    },
  }),
];

// ---- swarm secrets and configs (issue 20, w7) ----

/** List, create and delete of the swarm's secrets or configs (docs/clusters.md). */
function storedRoutes(kind: "secret" | "config") {
  const Kind = kind === "secret" ? "Secret" : "Config";
  const secret = kind === "secret";
  const dto = secret ? clusterSecretDto : clusterConfigDto;
  const dataNote = secret
    ? "A secret's data is never returned (not by the list, not by create): the engine does not give it back and the platform keeps no copy."
    : "A config's data is returned (configs are for data that is not secret; decoded as UTF-8).";
  return [
    route({
      method: "get",
      path: `/clusters/{uuid}/${kind}s`,
      tag: TAG,
      summary: `List a cluster's ${kind}s`,
      description: `As a connected manager lists them now (never stored), by name. ${dataNote}`,
      feature: FEATURE,
      params: ClusterParams,
      responses: { 200: { description: `${Kind}s`, schema: secret ? ClusterSecretList : ClusterConfigList }, ...STORED_ERRORS },
      async handler({ scope, services, params }) {
        return { body: { data: (await services.clusters.storedObjects(scope, params.uuid, kind)).map(dto) } };
      },
    }),
    route({
      method: "post",
      path: `/clusters/{uuid}/${kind}s`,
      tag: TAG,
      summary: `Create a ${kind}`,
      adminOnly: `create cluster ${kind}s`,
      description: `Creates a swarm ${kind} through a connected manager's agent. The name follows the engine's rules (at most 64 characters: letters, digits, '-', '_' and '.', a letter or digit first and last); data is a UTF-8 string under ${secret ? "500" : "1000"} KiB. ${dataNote}${secret ? " The value travels to the agent in the job's payload only (sealed at rest, and replaced once the job ended)." : ""} A name already taken in the swarm is a 409.`,
      feature: FEATURE,
      params: ClusterParams,
      body: secret ? ClusterSecretBody : ClusterConfigBody,
      responses: {
        201: { description: "Created", schema: secret ? ClusterSecretMutation : ClusterConfigMutation },
        ...STORED_ERRORS,
        409: ERR[409],
        422: ERR[422],
      },
      async handler({ scope, services, params, body }) {
        const o = await services.clusters.createStored(scope, params.uuid, kind, body);
        return { status: 201, body: { message: `${Kind} ${o.name} created.`, data: dto(o) } };
      },
    }),
    route({
      method: "delete",
      path: `/clusters/{uuid}/${kind}s/{${kind}Id}`,
      tag: TAG,
      summary: `Delete a ${kind}`,
      adminOnly: `delete cluster ${kind}s`,
      description: `Removes the swarm ${kind} (by its engine id). One that a service mounts is refused (409) naming the services; remove it from them first.`,
      feature: FEATURE,
      params: secret ? ClusterSecretParams : ClusterConfigParams,
      responses: { 200: { description: "Deleted", schema: MessageBody }, ...STORED_ERRORS, 409: { description: `Refused: services use the ${kind} (named in the reason)` } },
      async handler({ scope, services, params }) {
        const id = (params as { secretId?: string; configId?: string })[`${kind}Id`]!;
        const name = await services.clusters.deleteStored(scope, params.uuid, kind, id);
        return { body: { message: `${Kind} ${name} deleted.` } };
      },
    }),
  ];
}
