import { type EngineNetwork } from "@capstan/shared";
import type { JobRow } from "../../jobs/queue.js";
import { PROXY_NETWORK, proxyPhase, specOf } from "../network-plan.js";

import { NetworkBase, ENSURE_TIMEOUT_MS } from "./common.js";

/**
 * What the end of a job means for the network records: network.ensure and network.remove
 * settle their networks; a deployment or database job that ended created (or did not) the
 * networks it was asked to ensure.
 */
export class NetworkOutcomes {
  constructor(private readonly base: NetworkBase) {}

  // -------------------------------------------------------------------------------------------
  // Job outcomes

  private payloadOf(job: JobRow): Record<string, unknown> | null {
    try {
      const p = JSON.parse(job.payload) as unknown;
      return typeof p === "object" && p !== null ? (p as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }

  async afterEnsure(job: JobRow): Promise<void> {
    const names = ((this.payloadOf(job)?.networks as { name?: unknown }[] | undefined) ?? []).map((n) => n.name).filter((n): n is string => typeof n === "string");
    if (job.status === "succeeded") {
      const result = JSON.parse(job.result ?? "null") as { networks?: EngineNetwork[] } | null;
      for (const n of result?.networks ?? []) {
        await this.base.db.network.updateMany({
          where: { serverId: job.serverId, name: n.name, status: { in: ["pending", "failed", "active"] } },
          data: { status: "active", containerEngineId: n.id, reason: null },
        });
      }
      return;
    }
    if (!names.length) return;
    await this.base.db.network.updateMany({
      where: { serverId: job.serverId, name: { in: names }, status: "pending" },
      data: { status: "failed", reason: (job.error ?? "creation failed").slice(0, 1000) },
    });
  }

  async afterRemove(job: JobRow): Promise<void> {
    if (job.status === "succeeded") return;
    const name = this.payloadOf(job)?.name;
    if (typeof name !== "string") return;
    // Still marked deleted (not created again since): the network may still be on the server.
    await this.base.db.network.updateMany({
      where: { serverId: job.serverId, name, status: "deleted" },
      data: { status: "failed", reason: `removal failed: ${job.error ?? "no reason"}`.slice(0, 1000) },
    });
  }

  /**
   * A deployment (or an action's proxy sync) ended. Succeeded: it created what it was asked to
   * ensure, and those records are active. Failed or cancelled: it may not have, and the records
   * still pending are verified by a network.ensure of their own (active or failed when it
   * ends), so that none stays pending without a job. Either way, a proxy sync built before the
   * server's proxy was cleaned up is undone (proxyLeftovers).
   */
  async afterResourceJob(job: JobRow): Promise<void> {
    const p = this.payloadOf(job);
    if (!p) return;
    const lists = [(p.run as { ensure_networks?: unknown } | undefined)?.ensure_networks, p.ensure_networks, (p.proxy as { ensure_networks?: unknown } | undefined)?.ensure_networks];
    const names = [
      ...new Set(
        lists
          .flatMap((l) => (Array.isArray(l) ? l : []))
          .map((n: { name?: unknown }) => n?.name)
          .filter((n): n is string => typeof n === "string"),
      ),
    ];
    if (names.length && job.status === "succeeded") {
      await this.base.db.network.updateMany({ where: { serverId: job.serverId, name: { in: names }, status: { in: ["pending", "failed"] } }, data: { status: "active", reason: null } });
    } else if (names.length) {
      const pending = await this.base.db.network.findMany({ where: { serverId: job.serverId, name: { in: names }, status: "pending" }, orderBy: { id: "asc" } });
      if (pending.length) {
        await this.base.jobs.enqueue(this.base.db, job.serverId, "network.ensure", { networks: pending.map(specOf) }, ENSURE_TIMEOUT_MS);
        this.base.jobs.nudge(job.serverId);
      }
    }
    await this.proxyLeftovers(job.serverId, p);
  }

  /**
   * A job whose proxy settings were built before the server's proxy was cleaned up (the phase
   * changed while it was queued or running) may have put the proxy back on networks cleanup
   * took it off: once the server is cleaned, the proxy is taken off them again.
   */
  private async proxyLeftovers(serverId: number, p: Record<string, unknown>): Promise<void> {
    if (!this.base.config.network.management || !this.base.config.network.proxyIsolation) return;
    const listed = (p.proxy as { networks?: unknown } | undefined)?.networks;
    const stale = (Array.isArray(listed) ? listed : []).filter((n): n is string => typeof n === "string" && n !== PROXY_NETWORK);
    if (!stale.length) return;
    const server = await this.base.db.server.findUnique({ where: { id: serverId }, select: { uuid: true } });
    if (!server || (await proxyPhase(this.base.db, server.uuid)) !== "cleaned") return;
    await this.base.db.$transaction(async (tx) => {
      for (const network of stale) {
        await this.base.jobs.enqueue(tx, serverId, "network.connect", { network, containers: [this.base.config.proxyName], disconnect: true }, ENSURE_TIMEOUT_MS);
      }
    });
    this.base.jobs.nudge(serverId);
  }
}
