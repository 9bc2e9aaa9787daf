import { type EngineNetwork, LABEL_MANAGED, LABEL_NETWORK_SCOPE, type NetworkScope, isReservedNetworkName } from "@capstan/shared";
import type { TeamScope } from "../../domain/scope.js";
import { Unavailable } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import { foreignNetworkReason } from "../network-ownership.js";
import { PROXY_NETWORK, environmentUuidOf, withServerNetworks } from "../network-plan.js";

import { NetworkBase, NETWORK_WAIT_MS, type NetworkRow, type Tx } from "./common.js";

/** Sync: the records compared with the networks the engine has, and brought in step. */
export class NetworkSync {
  constructor(private readonly base: NetworkBase) {}

  /**
   * Compares the records with the engine's networks: networks found without a record are
   * recorded (classify), records found are active with the engine's id, active records not
   * found are deleted, pending ones not found failed. The engine's answer describes the moment
   * it was listed: a record changed since (a create, a deployment, a delete committed while the
   * agent listed) is left as it is, and a deleted record whose removal is still queued or
   * running is not brought back. A shared record with a name reserved for the platform's own
   * networks is not a user's shared network (an earlier sync took a compose application's own
   * network for one): it becomes system and loses its attachments. An environment, shared or
   * proxy record found as a network the platform did not make (foreignNetworkReason) becomes
   * failed, never active: sync is no way around the agent's refusal to take such a network over.
   */
  async sync(scope: TeamScope, serverUuid: string) {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.base.requireAgent(server);
    const listedAt = new Date();
    const job = await this.base.jobs.run(server.id, "networks.list", {}, NETWORK_WAIT_MS.list);
    if (job.status !== "succeeded") throw new Unavailable(`Listing the networks of server ${server.name} failed: ${job.error}`);
    const engine = job.result.networks;
    const destinations = new Set((await this.base.db.destination.findMany({ where: { serverId: server.id }, select: { networkName: true } })).map((d) => d.networkName));
    const counts = { total: engine.length, discovered: 0, verified: 0, deleted: 0, failed: 0 };
    await withServerNetworks(this.base.ctx, server.id, async (tx) => {
      const rows = await tx.network.findMany({ where: { serverId: server.id } });
      const byName = new Map(rows.map((r) => [r.name, r]));
      const changedSince = (r: NetworkRow) => r.updatedAt.getTime() > listedAt.getTime();
      const removing = new Set(
        (await this.base.jobs.openJobs(tx, { serverIds: [server.id], types: ["network.remove"] })).map((j) => (j.payload as { name?: unknown } | null)?.name).filter((n) => typeof n === "string"),
      );
      const seen = new Set<string>();
      for (const n of engine) {
        if (seen.has(n.name)) continue; // a duplicate name (swarm): the first one stands for it
        seen.add(n.name);
        const row = byName.get(n.name);
        if (row) {
          const reclassify = row.scope === "shared" && isReservedNetworkName(row.name);
          const foreign = reclassify ? null : foreignNetworkReason(row, n);
          if (foreign === null) counts.verified++;
          if (changedSince(row) || (row.status === "deleted" && removing.has(row.name))) continue;
          if (reclassify) {
            // A platform name can never be a user's shared network (POST refuses it): an earlier sync took one for it.
            await tx.networkAttachment.deleteMany({ where: { networkId: row.id } });
            await tx.network.update({
              where: { id: row.id },
              data: { scope: "system", status: "active", containerEngineId: n.id, reason: "reclassified by sync: a platform network, not a shared one (it cannot be attached or deleted)" },
            });
          } else if (foreign !== null) {
            if (await this.refuseForeign(tx, row, foreign)) counts.failed++;
          } else if (row.status !== "active" || row.containerEngineId !== n.id || row.reason !== null) {
            await tx.network.update({ where: { id: row.id }, data: { status: "active", containerEngineId: n.id, reason: null } });
          }
          continue;
        }
        const found = await this.classify(tx, server, n, destinations);
        await tx.network.create({
          data: {
            uuid: newUuid(),
            teamId: server.teamId,
            serverId: server.id,
            name: n.name,
            scope: found.scope,
            environmentId: found.environmentId,
            driver: n.driver,
            encrypted: n.encrypted,
            isProxyNetwork: found.scope === "proxy",
            status: "active",
            containerEngineId: n.id,
          },
        });
        counts.discovered++;
      }
      for (const row of rows) {
        if (seen.has(row.name) || changedSince(row)) continue;
        if (row.status === "active") {
          await tx.network.update({ where: { id: row.id }, data: { status: "deleted", reason: "not found on the server by sync" } });
          counts.deleted++;
        } else if (row.status === "pending") {
          await tx.network.update({ where: { id: row.id }, data: { status: "failed", reason: "creation was requested but the network is not on the server (sync)" } });
          counts.failed++;
        }
      }
    });
    return counts;
  }

  /**
   * A platform record whose name a network not made by the platform holds on the engine: never
   * active (it would be attached and joined as the platform's), failed with the reason instead.
   * A deleted record stays deleted: the platform's network of that name is gone, which is what
   * it says. The engine's id is dropped, as it is not this record's network. True when the
   * record became failed here.
   */
  private async refuseForeign(tx: Tx, row: NetworkRow, reason: string): Promise<boolean> {
    if (row.status === "deleted") return false;
    if (row.status === "failed" && row.reason === reason && row.containerEngineId === null) return false;
    await tx.network.update({ where: { id: row.id }, data: { status: "failed", reason, containerEngineId: null } });
    return row.status !== "failed";
  }

  /**
   * The scope of a network found on the engine without a record. Only what the platform
   * labelled for a scope gets it: shared needs capstan.network.scope=shared (a user's shared
   * network); an environment network needs its label and an environment of the team. Every
   * other network is system, among them the platform's own that are not users' (the
   * destination network, a compose application's network capstan-<app uuid>, which carries
   * capstan.managed=true but no scope): system networks cannot be attached or deleted.
   */
  private async classify(tx: Tx, server: { teamId: number }, n: EngineNetwork, destinations: Set<string>): Promise<{ scope: NetworkScope; environmentId: number | null }> {
    const platform = n.labels[LABEL_MANAGED] === "true";
    const scope = n.labels[LABEL_NETWORK_SCOPE];
    if (!platform || destinations.has(n.name)) return { scope: "system", environmentId: null };
    // Labelled as verification (foreignNetworkReason) expects, so the next sync keeps it active.
    if (n.name === PROXY_NETWORK && scope === "proxy") return { scope: "proxy", environmentId: null };
    const envUuid = environmentUuidOf(n.name);
    if (envUuid && scope === "environment") {
      const env = await tx.environment.findFirst({ where: { uuid: envUuid, project: { teamId: server.teamId } }, select: { id: true } });
      if (env) return { scope: "environment", environmentId: env.id };
    }
    if (scope === "shared") return { scope: "shared", environmentId: null };
    return { scope: "system", environmentId: null };
  }

  // -------------------------------------------------------------------------------------------
}
