import { type NetworkDriver } from "@capstan/shared";
import type { TeamScope } from "../../domain/scope.js";
import { Invalid, Conflict } from "../../domain/errors.js";
import { newUuid } from "../../lib/ids.js";
import type { CancelledJob } from "../../jobs/queue.js";
import { ServerService } from "../servers.js";
import { LIVE_STATUSES, NetworkLimitError, assertBelowLimit, lockServersNetworks, serverDriver, specOf, withServerNetworks } from "../network-plan.js";

import { NetworkBase, ENSURE_TIMEOUT_MS, REMOVE_TIMEOUT_MS, withCount, type NetworkRow, type NetworkWithCount, type Tx } from "./common.js";

/**
 * Changes users make to networks: shared networks created and removed, and the removal of an
 * environment's networks with it.
 */
export class NetworkCommands {
  constructor(private readonly base: NetworkBase) {}

  /**
   * Records a shared network (pending) and asks the agent to create it, in one transaction under
   * the server's network lock: 409 for a name the server already has, 422 at the limit.
   */
  async createShared(scope: TeamScope, serverUuid: string, input: { name: string; driver?: NetworkDriver | undefined }): Promise<NetworkRow> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    this.base.requireManagement("creating shared networks");
    const facts = ServerService.facts(await this.base.db.server.findUniqueOrThrow({ where: { id: server.id }, select: { facts: true } }));
    const role = facts?.engine.swarm_role;
    if (input.driver === "overlay" && role && role !== "manager") {
      throw new Invalid({ driver: [`Overlay networks need a swarm manager; server ${server.name} is ${role === "inactive" ? "not in a swarm" : "a swarm worker"}. Use bridge.`] });
    }
    const driver: NetworkDriver = input.driver ?? (await serverDriver(this.base.db, server.id));
    const encrypted = driver === "overlay" && this.base.config.network.overlayEncryption;
    try {
      return await withServerNetworks(this.base.ctx, server.id, async (tx) => {
        const existing = await tx.network.findUnique({ where: { serverId_name: { serverId: server.id, name: input.name } } });
        if (existing && (LIVE_STATUSES.includes(existing.status) || existing.scope !== "shared")) {
          throw new Conflict(`Server ${server.name} already has a network named ${input.name} (scope ${existing.scope}, status ${existing.status}).`);
        }
        await assertBelowLimit(tx, this.base.config.network, server.id);
        // A deleted or failed shared network of that name gives way to the new one.
        if (existing) await tx.network.delete({ where: { id: existing.id } });
        const row = await tx.network.create({
          data: { uuid: newUuid(), teamId: server.teamId, serverId: server.id, name: input.name, scope: "shared", driver, encrypted, status: "pending" },
        });
        await this.base.jobs.enqueue(tx, server.id, "network.ensure", { networks: [specOf(row)] }, ENSURE_TIMEOUT_MS);
        return row;
      });
    } catch (err) {
      if (err instanceof NetworkLimitError) throw new Invalid({ name: [err.message] }, err.message);
      throw err;
    } finally {
      this.base.jobs.nudge(server.id);
    }
  }

  /**
   * Removes a shared network: attachments go, the record is marked deleted, and the agent
   * disconnects every container from it and removes it. Environment networks go with their
   * environment; one whose environment is gone already (left behind) is removed the same way.
   * The proxy network and system networks are not removed through the API (409).
   */
  async remove(scope: TeamScope, serverUuid: string, networkUuid: string): Promise<NetworkWithCount> {
    scope.requireTeamAdmin("manage networks");
    const server = await scope.server(serverUuid);
    const found = await this.base.network(server.id, networkUuid);
    const network = await withServerNetworks(this.base.ctx, server.id, async (tx) => {
      // Read again under the lock: a deployment or an environment deletion may have changed it.
      const row = await tx.network.findUniqueOrThrow({ where: { id: found.id }, include: withCount });
      const refusal: Record<string, string> = {
        environment: "it belongs to an environment and is removed when the environment is deleted",
        proxy: "it is the server's dedicated proxy network",
        system: "it was not created by the platform as a shared network (system network)",
      };
      const orphan = row.scope === "environment" && row.environmentId === null;
      if (refusal[row.scope] && !orphan) throw new Conflict(`Network ${row.name} cannot be deleted: ${refusal[row.scope]}.`);
      if (row.status === "deleted") throw new Conflict(`Network ${row.name} is already ${row.deleting ? "being deleted" : "deleted"}.`);
      await tx.networkAttachment.deleteMany({ where: { networkId: row.id } });
      // deleting: shown pending until the server confirms the removal (services/network-removal.ts).
      await tx.network.update({ where: { id: row.id }, data: { status: "deleted", deleting: true, reason: null } });
      await this.base.jobs.enqueue(tx, server.id, "network.remove", { name: row.name }, REMOVE_TIMEOUT_MS);
      return row;
    });
    this.base.jobs.nudge(server.id);
    return network;
  }

  // -------------------------------------------------------------------------------------------

  /**
   * Removal of the networks of environments being deleted, in the caller's transaction:
   * lock() first (the network locks of every server of the team, so a deployment cannot record
   * the environment's first network on any of them unseen until the transaction ends), then
   * enqueue() after the resources' removal jobs reads the records under those locks, marks
   * them deleted and writes a network.remove for each (the agent's network.remove disconnects
   * whatever is still attached first, so the order in which the agent runs them does not
   * matter), then kick() delivers them.
   */
  async planEnvironmentRemoval(teamId: number, environmentIds: number[]): Promise<{ lock(tx: Tx): Promise<void>; enqueue(tx: Tx): Promise<void>; kick(): void }> {
    const servers = new Set<number>();
    const cancelled: CancelledJob[] = [];
    return {
      lock: async (tx) => {
        const rows = await tx.server.findMany({ where: { teamId }, select: { id: true } });
        await lockServersNetworks(tx, this.base.config.dialect, rows.map((r) => r.id));
      },
      enqueue: async (tx) => {
        if (!environmentIds.length) return;
        const rows = await tx.network.findMany({
          where: { environmentId: { in: environmentIds }, scope: "environment", status: { not: "deleted" } },
          orderBy: { id: "asc" },
          select: { id: true, name: true, serverId: true },
        });
        // A verification (network.ensure) of these networks still queued or running goes too.
        const names = new Set(rows.map((n) => n.name));
        cancelled.push(
          ...(await this.base.jobs.cancelWithin(
            tx,
            { serverIds: [...new Set(rows.map((n) => n.serverId))], types: ["network.ensure"] },
            (payload) => ((payload as { networks?: { name?: unknown }[] } | null)?.networks ?? []).some((n) => typeof n?.name === "string" && names.has(n.name)),
            "cancelled: the environment of the network was deleted",
          )),
        );
        for (const n of rows) {
          await tx.network.update({ where: { id: n.id }, data: { status: "deleted", deleting: true, reason: null } });
          await this.base.jobs.enqueue(tx, n.serverId, "network.remove", { name: n.name }, REMOVE_TIMEOUT_MS);
          servers.add(n.serverId);
        }
      },
      kick: () => {
        // The agents hear of the cancels before the removals are delivered.
        void this.base.jobs.cancelled(cancelled).catch(() => {});
        for (const serverId of servers) this.base.jobs.nudge(serverId);
      },
    };
  }
}
