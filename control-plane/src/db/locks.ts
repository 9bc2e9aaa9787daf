import type { Database, Prisma } from "./client.js";

/**
 * Namespaces of PostgreSQL's two-key advisory locks, one per kind of thing a transaction
 * guards; the second key is that thing's row id.
 */
export const LOCK = {
  /** A server's deployment slots and queue. */
  deployments: 0x43415044,
  /** A server's network records (the PLATFORM_MAX_NETWORKS count and the insert it guards). */
  networks: 0x4e455457,
  /** A server's public database ports. */
  publicPorts: 0x44425054,
  /** A database's backup and restore runs (one never starts while the other is open). */
  databaseRuns: 0x44425255,
  // race-free upserts (w5 follow-ups): the variables of one owner, told apart by owner kind
  // (their ids are of different tables), and one registry's server assignment.
  /** An application's environment variables (MAX_ENVS count, the key upserts it guards). */
  applicationEnvs: 0x41454e56,
  /** A database's environment variables. */
  databaseEnvs: 0x44454e56,
  /** A service's environment variables. */
  serviceEnvs: 0x53454e56,
  /** A registry's server assignment (RegistryServer rows of the registry). */
  registryServers: 0x52475356,
  // resource backups (issue 19)
  /** An application's resource backup runs. */
  applicationRuns: 0x41505255,
  // w6/svcproxy: a service's stored compose rendering
  /** A service's composeRendered: a PATCH of its compose file and a label-override PUT re-render one at a time. */
  serviceRender: 0x53524e44,
  // ---- platform backups (issue 19, w7/platform) ----
  /** A platform_instance backup schedule's runs (one at a time). */
  platformRuns: 0x504c5452,
  // ---- w7/svcroute: domain claims (issue 17) ----
  /** A team's domain claims: the host-rule check of a service application's fqdn and its write (the id is the team's). */
  teamDomains: 0x54444d4e,
  // ---- w8/rbsources: resource backups of services (issue 19) ----
  /** A service's resource backup and restore runs. */
  serviceRuns: 0x53565255,
} as const;

/**
 * Holds the lock on (kind, id) until the transaction ends, so that a check and the write it
 * guards are one step across control-plane replicas. SQLite needs none: one process owns the
 * file and its adapter runs one transaction at a time (docs/database.md).
 */
export async function lockInTransaction(tx: Prisma.TransactionClient, dialect: Database["kind"], kind: keyof typeof LOCK, id: number): Promise<void> {
  if (dialect === "postgresql") await tx.$executeRawUnsafe(`SELECT pg_advisory_xact_lock($1::int, $2::int)`, LOCK[kind], id);
}
