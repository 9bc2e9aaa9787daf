import { LABEL_DOMAINS, LABEL_PROXY_NETWORK, LABEL_RESOURCE_UUID } from "@capstan/shared";
import type { TeamScope } from "../../domain/scope.js";
import { Conflict, Unavailable } from "../../domain/errors.js";
import { LIVE_STATUSES, PROXY_NETWORK, proxyPhase, publicApplicationWhere, requestNetwork, setProxyPhase, specOf } from "../network-plan.js";

import { NetworkBase, NETWORK_WAIT_MS, type NetworkRow } from "./common.js";

/** The proxy isolation migration: the dedicated proxy network, then the proxy taken off every other network. */
export class ProxyIsolation {
  constructor(private readonly base: NetworkBase) {}

  /**
   * Creates the dedicated proxy network and connects the proxy and every container of an
   * application with an fqdn to it, so nothing stops being routed while resources are
   * redeployed (each redeploy labels its container with the proxy network).
   */
  async migrateProxy(scope: TeamScope, serverUuid: string): Promise<{ network: NetworkRow; connected: string[] }> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.base.requireProxyIsolation();
    this.base.requireAgent(server);
    const network = await requestNetwork(this.base.ctx, { teamId: server.teamId, serverId: server.id, name: PROXY_NETWORK, scope: "proxy", exempt: true });
    const ensured = await this.base.jobs.run(server.id, "network.ensure", { networks: [specOf(network)] }, NETWORK_WAIT_MS.ensure);
    if (ensured.status !== "succeeded") throw new Unavailable(`Creating the proxy network on server ${server.name} failed: ${ensured.error}`);

    const containers = [this.base.config.proxyName, ...(await this.publicContainers(server.id)).map((c) => c.name)];
    const connected = await this.base.jobs.run(server.id, "network.connect", { network: PROXY_NETWORK, containers, disconnect: false }, NETWORK_WAIT_MS.connect);
    if (connected.status !== "succeeded") throw new Unavailable(`Connecting containers to the proxy network on server ${server.name} failed: ${connected.error}`);
    if ((await proxyPhase(this.base.db, server.uuid)) !== "cleaned") await setProxyPhase(this.base.db, server.uuid, "migrated");
    const fresh = await this.base.db.network.findUniqueOrThrow({ where: { id: network.id } });
    return { network: fresh, connected: connected.result.changed };
  }

  /**
   * Disconnects the proxy from every network but the proxy network; from then on the proxy
   * joins only that one. Refused before migrate, and while a routed container still names
   * one of the networks the proxy would leave (it has not been redeployed since migrate).
   */
  async cleanupProxy(scope: TeamScope, serverUuid: string): Promise<{ disconnectedFrom: string[] }> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.base.requireProxyIsolation();
    if ((await proxyPhase(this.base.db, server.uuid)) === "none") {
      throw new Conflict(`Proxy isolation has not been migrated on server ${server.name}: run POST /networks/${server.uuid}/proxy/migrate, redeploy every resource, then clean up.`);
    }
    this.base.requireAgent(server);
    // Every network the proxy may have joined before: the destinations' and all environment networks.
    const [destinations, envNetworks] = await Promise.all([
      this.base.db.destination.findMany({ where: { serverId: server.id }, orderBy: { id: "asc" }, select: { networkName: true } }),
      this.base.db.network.findMany({ where: { serverId: server.id, scope: "environment", status: { in: LIVE_STATUSES } }, orderBy: { id: "asc" }, select: { name: true } }),
    ]);
    const leaving = [...new Set([...destinations.map((d) => d.networkName), ...envNetworks.map((n) => n.name)])].filter((n) => n !== PROXY_NETWORK);
    const stale = (await this.publicContainers(server.id)).filter((c) => leaving.includes(c.labels[LABEL_PROXY_NETWORK] ?? ""));
    if (stale.length) {
      const names = stale.slice(0, 10).map((c) => c.name);
      throw new Conflict(
        `${stale.length} routed container(s) on server ${server.name} still use a network the proxy would leave; redeploy their resources first: ${names.join(", ")}${stale.length > names.length ? ", ..." : ""}.`,
      );
    }
    // The phase first: every payload built from now on puts the proxy on the proxy network
    // only, so no deployment started during the disconnects brings it back onto a network it
    // just left. One built before and run after is caught when its job ends (afterResourceJob).
    // A failed disconnect leaves the phase cleaned: the next proxy sync leaves the rest, and
    // cleanup may be run again.
    await setProxyPhase(this.base.db, server.uuid, "cleaned");
    const disconnectedFrom: string[] = [];
    for (const network of leaving) {
      const job = await this.base.jobs.run(server.id, "network.connect", { network, containers: [this.base.config.proxyName], disconnect: true }, NETWORK_WAIT_MS.connect);
      if (job.status !== "succeeded") throw new Unavailable(`Disconnecting the proxy from network ${network} on server ${server.name} failed: ${job.error}`);
      if (job.result.changed.length) disconnectedFrom.push(network);
    }
    return { disconnectedFrom };
  }

  /** Containers on the server serving an application with an fqdn (the proxy's targets), from the engine now. */
  private async publicContainers(serverId: number) {
    const apps = await this.base.db.application.findMany({ where: { serverId, ...publicApplicationWhere }, select: { uuid: true } });
    if (!apps.length) return [];
    const uuids = new Set(apps.map((a) => a.uuid));
    const job = await this.base.jobs.run(serverId, "containers.list", {}, NETWORK_WAIT_MS.list);
    if (job.status !== "succeeded") throw new Unavailable(`Listing the server's containers failed: ${job.error}`);
    // A compose application's internal services carry an empty domains label: not routed.
    return job.result.containers.filter((c) => uuids.has(c.labels[LABEL_RESOURCE_UUID] ?? "") && (c.labels[LABEL_DOMAINS] ?? "") !== "");
  }

  // -------------------------------------------------------------------------------------------
}
