import type { Prisma } from "../db/client.js";
import type { EnvironmentRef } from "../domain/scope.js";

type Tx = Prisma.TransactionClient;

/**
 * The rules a standalone database's container settings follow wherever they are written: a
 * PATCH (databases.ts) and a configuration restore (backups/database-configuration.ts).
 */

/** A container exists and runs (or is about to): start is a no-op on it, settings changes recreate it. */
export const isUp = (status: string) => /^(running|restarting|paused)/.test(status);

/** The settings a database's container is made of (a change recreates a running one). */
export interface ContainerSettings {
  image: string;
  isPublic: boolean;
  publicPort: number | null;
  limitsMemory: string | null;
  limitsCpus: string | null;
}

/** The host port a database publishes: none while it is not public (the port is only remembered). */
export const publishedPort = (s: Pick<ContainerSettings, "isPublic" | "publicPort">): number | null => (s.isPublic ? s.publicPort : null);

/** Whether going from `before` to `after` changes what the container is made of. */
export function containerChanged(before: ContainerSettings, after: ContainerSettings): boolean {
  return before.image !== after.image || publishedPort(before) !== publishedPort(after) || before.limitsMemory !== after.limitsMemory || before.limitsCpus !== after.limitsCpus;
}

/** Why a database may not publish a host port: a port the server's proxy or SSH uses, or one another database of the server publishes. */
export type PortRefusal = { serverName: string } & ({ reserved: string } | { takenBy: { name: string; environment: EnvironmentRef } });

/**
 * Whether `port` is free for a database on the server (exceptId: the database itself). Called
 * under the server's publicPorts lock, in the transaction that writes the port.
 */
export async function publicPortRefusal(tx: Tx, proxyPorts: { http: number; https: number }, serverId: number, port: number, exceptId?: number): Promise<PortRefusal | null> {
  const server = await tx.server.findUniqueOrThrow({ where: { id: serverId }, select: { name: true, port: true } });
  const reserved: [number, string][] = [
    [proxyPorts.http, "the reverse proxy's HTTP port"],
    [proxyPorts.https, "the reverse proxy's HTTPS port"],
    [server.port, "the server's SSH port"],
  ];
  for (const [p, what] of reserved) if (p === port) return { serverName: server.name, reserved: what };
  const other = await tx.standaloneDatabase.findFirst({
    where: { serverId, isPublic: true, publicPort: port, ...(exceptId ? { id: { not: exceptId } } : {}) },
    select: { name: true, environment: { select: { id: true, projectId: true } } },
  });
  return other ? { serverName: server.name, takenBy: other } : null;
}
