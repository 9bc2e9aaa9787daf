import { type NetworkResourceType } from "@capstan/shared";
import { wholeRows } from "../../db/relations.js";
import type { Need, TeamScope } from "../../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../../domain/errors.js";
import { LIVE_STATUSES, resourceNetworks, withServerNetworks } from "../network-plan.js";

import { NetworkBase, MAX_ATTACHMENTS, withDestination, type NetworkRow, type ResourceRef, type ResourceNetworkView } from "./common.js";

/** The networks of a resource: the ones it joins on its next deployment, shared networks attached to it. */
export class NetworkAttachments {
  constructor(private readonly base: NetworkBase) {}

  /** The resource in the caller's team with `need` on its environment. */
  private async resource(scope: TeamScope, type: NetworkResourceType, uuid: string, need: Need): Promise<ResourceRef> {
    // services (issue 17): public when one of its service applications has a domain.
    if (type === "service") {
      const svc = await scope.service(uuid, need, { ...withDestination, components: { where: { kind: "application", fqdn: { not: null } }, select: { id: true }, take: 1 } });
      return {
        type,
        id: svc.id,
        name: svc.name,
        teamId: svc.teamId,
        serverId: svc.serverId,
        environment: svc.environment,
        destinationNetwork: svc.destination.networkName,
        isPublic: svc.components.length > 0,
      };
    }
    if (type === "application") {
      const app = await scope.application(uuid, need, withDestination);
      return {
        type,
        id: app.id,
        name: app.name,
        teamId: app.teamId,
        serverId: app.serverId,
        environment: app.environment,
        destinationNetwork: app.destination.networkName,
        isPublic: !!app.fqdn,
      };
    }
    const db = await scope.database(uuid, need, withDestination);
    return { type, id: db.id, name: db.name, teamId: db.teamId, serverId: db.serverId, environment: db.environment, destinationNetwork: db.destination.networkName, isPublic: false };
  }

  /**
   * The networks the resource joins on its next deployment (primary, proxy) and the shared
   * networks attached to it (all of them, whatever their status).
   */
  async resourceNetworks(scope: TeamScope, type: NetworkResourceType, uuid: string): Promise<ResourceNetworkView[]> {
    const r = await this.resource(scope, type, uuid, "view");
    const plan = await resourceNetworks(
      this.base.ctx,
      { teamId: r.teamId, serverId: r.serverId, environment: r.environment, destinationNetwork: r.destinationNetwork, resource: { type: r.type, id: r.id }, isPublic: r.isPublic },
      { record: false },
    );
    const names = [plan.network, ...(plan.proxy_network ? [plan.proxy_network] : [])];
    const rows = new Map((await this.base.db.network.findMany({ where: { serverId: r.serverId, name: { in: names } } })).map((n) => [n.name, n]));
    const view = (name: string, role: ResourceNetworkView["role"]): ResourceNetworkView => {
      const row = rows.get(name);
      return { uuid: row?.uuid ?? null, name, role, scope: row?.scope ?? null, status: row?.status ?? null, attachedAt: null };
    };
    const out = [view(plan.network, "primary")];
    if (plan.proxy_network) out.push(view(plan.proxy_network, "proxy"));
    const attachments = await this.base.db.networkAttachment.findMany({
      where: { resourceType: r.type, resourceId: r.id },
      orderBy: { id: "asc" },
      include: { network: { select: { uuid: true, name: true, scope: true, status: true } } },
    });
    // An attachment read without its network went with the network meanwhile (db/relations.ts).
    for (const a of wholeRows(attachments, ["network"])) out.push({ uuid: a.network.uuid, name: a.network.name, role: "attached", scope: a.network.scope, status: a.network.status, attachedAt: a.createdAt });
    return out;
  }

  /** Attaches a shared network of the resource's server; it joins it on its next deployment. */
  async attach(scope: TeamScope, type: NetworkResourceType, uuid: string, networkUuid: string): Promise<{ resource: ResourceRef; network: NetworkRow }> {
    const r = await this.resource(scope, type, uuid, "manage");
    const network = await scope.network(networkUuid);
    this.base.requireManagement("attaching networks");
    if (network.serverId !== r.serverId) throw new Invalid({ network_uuid: [`Network ${network.name} is on another server than the ${r.type}.`] });
    if (network.scope !== "shared") throw new Invalid({ network_uuid: [`Only shared networks can be attached; ${network.name} is a ${network.scope} network.`] });
    if (!LIVE_STATUSES.includes(network.status)) throw new Invalid({ network_uuid: [`Network ${network.name} is ${network.status}; create it again first.`] });
    // The count and the insert are one step under the server's network lock (a resource's
    // networks are all on its server), so concurrent attaches cannot pass the cap together.
    await withServerNetworks(this.base.ctx, r.serverId, async (tx) => {
      const already = await tx.networkAttachment.findFirst({ where: { networkId: network.id, resourceType: r.type, resourceId: r.id }, select: { id: true } });
      if (already) throw new Conflict(`Network ${network.name} is already attached to this ${r.type}.`);
      const existing = await tx.networkAttachment.count({ where: { resourceType: r.type, resourceId: r.id } });
      if (existing >= MAX_ATTACHMENTS) throw new Invalid({ network_uuid: [`A resource can be attached to at most ${MAX_ATTACHMENTS} networks.`] });
      // Deleted meanwhile (DELETE takes the same lock): nothing to attach to.
      const live = await tx.network.findUnique({ where: { id: network.id }, select: { status: true } });
      if (!live || !LIVE_STATUSES.includes(live.status)) throw new Invalid({ network_uuid: [`Network ${network.name} is ${live?.status ?? "deleted"}; create it again first.`] });
      await tx.networkAttachment.create({ data: { networkId: network.id, resourceType: r.type, resourceId: r.id } });
    });
    return { resource: r, network };
  }

  async detach(scope: TeamScope, type: NetworkResourceType, uuid: string, networkUuid: string): Promise<{ resource: ResourceRef; network: NetworkRow }> {
    const r = await this.resource(scope, type, uuid, "manage");
    const network = await scope.network(networkUuid);
    const removed = await this.base.db.networkAttachment.deleteMany({ where: { networkId: network.id, resourceType: r.type, resourceId: r.id } });
    if (removed.count === 0) throw new NotFound(`Attachment of network ${network.name} to this ${r.type}`);
    return { resource: r, network };
  }

  // -------------------------------------------------------------------------------------------
  // Environments
}
