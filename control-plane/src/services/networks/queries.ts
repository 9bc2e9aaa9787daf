import { type ProxyIsolationState } from "@capstan/shared";
import type { TeamScope } from "../../domain/scope.js";
import { NotFound } from "../../domain/errors.js";
import { ServerService } from "../servers.js";
import { withResourceCounts } from "../network-usage.js";
import { phaseOf } from "../network-plan.js";

import { NetworkBase, NETWORK_WAIT_MS, inspectionOf, withCount, type NetworkView, type Window } from "./common.js";

/** The reads of a server's networks: the list, one network with the engine's view, the proxy isolation state. */
export class NetworkQueries {
  constructor(private readonly base: NetworkBase) {}

  /** Whether proxy isolation is in effect on the server: the instance's setting and the server's recorded phase. */
  async proxyIsolation(scope: TeamScope, serverUuid: string): Promise<ProxyIsolationState> {
    const server = await scope.server(serverUuid);
    return { enabled: this.base.config.network.proxyIsolation, phase: phaseOf(server.proxyIsolation) };
  }

  async count(scope: TeamScope, serverUuid: string): Promise<number> {
    const server = await scope.server(serverUuid);
    return this.base.db.network.count({ where: { serverId: server.id } });
  }

  /** A page of the server's networks by id, with the resources using each (a fixed number of statements per page). */
  async list(scope: TeamScope, serverUuid: string, window: Window): Promise<NetworkView[]> {
    const server = await scope.server(serverUuid);
    const rows = await this.base.db.network.findMany({ where: { serverId: server.id }, orderBy: { id: "asc" }, include: withCount, ...window });
    return withResourceCounts(this.base.db, this.base.config.network, server, rows);
  }

  /**
   * One network: the stored record, with what the engine reports about it now when the agent
   * answers (within NETWORK_WAIT_MS.inspect). Without the engine's view (agent away, inspection
   * failed, network not on the server) inspection is null and inspectionReason says why: the
   * record is still worth showing, so this is never a 503 (issue 15).
   */
  async detail(
    scope: TeamScope,
    serverUuid: string,
    networkUuid: string,
  ): Promise<{ network: NetworkView; inspection: ReturnType<typeof inspectionOf> | null; inspectionReason: string | null }> {
    const server = await scope.server(serverUuid);
    const [network] = await withResourceCounts(this.base.db, this.base.config.network, server, [await this.base.network(server.id, networkUuid)]);
    if (!network) throw new NotFound("Network");
    const without = (inspectionReason: string) => ({ network, inspection: null, inspectionReason });
    if (network.status === "deleted") {
      return without(network.deleting ? "Deletion requested: the server's agent has not confirmed the removal yet." : "The network is deleted: it is not on the server.");
    }
    if (!ServerService.agentConnected(server)) return without(`Server ${server.name} is unreachable: its agent is not connected, so this is the stored record only.`);
    const job = await this.base.jobs.run(server.id, "networks.list", { names: [network.name] }, NETWORK_WAIT_MS.inspect);
    if (job.status !== "succeeded") return without(`Inspecting network ${network.name} on server ${server.name} failed: ${job.error}`);
    // By id when the engine knows it (a name can be held twice on a swarm), else by name.
    const found =
      job.result.networks.find((n) => network.containerEngineId !== null && n.id === network.containerEngineId) ?? job.result.networks.find((n) => n.name === network.name);
    return found ? { network, inspection: inspectionOf(found), inspectionReason: null } : without("The network is not on the server.");
  }

  // -------------------------------------------------------------------------------------------
}
