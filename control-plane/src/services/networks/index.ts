import type { Db } from "../../db/client.js";
import type { Config } from "../../config.js";
import type { JobQueue } from "../../jobs/queue.js";
import { NetworkAttachments } from "./attachments.js";
import { NetworkBase } from "./common.js";
import { NetworkCommands } from "./commands.js";
import { NetworkOutcomes } from "./outcomes.js";
import { ProxyIsolation } from "./proxy-isolation.js";
import { NetworkQueries } from "./queries.js";
import { NetworkSync } from "./sync.js";

export { MAX_ATTACHMENTS, NETWORK_WAIT_MS, inspectionOf, type NetworkRow, type NetworkView, type NetworkWithCount, type ResourceNetworkView } from "./common.js";

/**
 * Networks of a server (spec 4.8): records of what the platform created (environment, shared,
 * proxy) and found (system), kept in step with the engine through the agent's jobs and sync;
 * shared networks users attach to resources; the proxy isolation migration. The one entry
 * routes and other services use; each part has one job: queries.ts, commands.ts (shared
 * networks, an environment's networks removed with it), sync.ts, proxy-isolation.ts,
 * attachments.ts (a resource's networks), outcomes.ts (what a job's end means for the records).
 */
export class NetworkService {
  private readonly base: NetworkBase;
  private readonly queries: NetworkQueries;
  private readonly commands: NetworkCommands;
  private readonly syncer: NetworkSync;
  private readonly proxy: ProxyIsolation;
  private readonly attachments: NetworkAttachments;
  readonly outcomes: NetworkOutcomes;

  constructor(db: Db, jobs: JobQueue, config: { network: Config["network"]; dialect: Config["database"]["kind"]; proxyName: string }) {
    this.base = new NetworkBase(db, jobs, config);
    this.queries = new NetworkQueries(this.base);
    this.commands = new NetworkCommands(this.base);
    this.syncer = new NetworkSync(this.base);
    this.proxy = new ProxyIsolation(this.base);
    this.attachments = new NetworkAttachments(this.base);
    this.outcomes = new NetworkOutcomes(this.base);
  }

  get settings(): Config["network"] {
    return this.base.config.network;
  }

  // Reads
  proxyIsolation: NetworkQueries["proxyIsolation"] = (...a) => this.queries.proxyIsolation(...a);
  count: NetworkQueries["count"] = (...a) => this.queries.count(...a);
  list: NetworkQueries["list"] = (...a) => this.queries.list(...a);
  detail: NetworkQueries["detail"] = (...a) => this.queries.detail(...a);

  // Shared networks, environments
  createShared: NetworkCommands["createShared"] = (...a) => this.commands.createShared(...a);
  remove: NetworkCommands["remove"] = (...a) => this.commands.remove(...a);
  planEnvironmentRemoval: NetworkCommands["planEnvironmentRemoval"] = (...a) => this.commands.planEnvironmentRemoval(...a);

  // Sync
  sync: NetworkSync["sync"] = (...a) => this.syncer.sync(...a);

  // Proxy isolation
  migrateProxy: ProxyIsolation["migrateProxy"] = (...a) => this.proxy.migrateProxy(...a);
  cleanupProxy: ProxyIsolation["cleanupProxy"] = (...a) => this.proxy.cleanupProxy(...a);

  // A resource's networks
  resourceNetworks: NetworkAttachments["resourceNetworks"] = (...a) => this.attachments.resourceNetworks(...a);
  attach: NetworkAttachments["attach"] = (...a) => this.attachments.attach(...a);
  detach: NetworkAttachments["detach"] = (...a) => this.attachments.detach(...a);
}
