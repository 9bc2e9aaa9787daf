-- CreateTable
CREATE TABLE "DnsHostnamePin" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "teamId" INTEGER NOT NULL,
    "hostname" TEXT NOT NULL,
    "dnsDomainId" INTEGER NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "DnsHostnamePin_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "DnsHostnamePin_dnsDomainId_fkey" FOREIGN KEY ("dnsDomainId") REFERENCES "DnsDomain" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "DnsEnvironmentBinding" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "dnsDomainId" INTEGER NOT NULL,
    "environmentId" INTEGER,
    "environmentRole" TEXT,
    "priority" INTEGER NOT NULL DEFAULT 0,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "DnsEnvironmentBinding_dnsDomainId_fkey" FOREIGN KEY ("dnsDomainId") REFERENCES "DnsDomain" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "DnsEnvironmentBinding_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_DnsDomain" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "zone" TEXT NOT NULL,
    "dnsProviderId" INTEGER NOT NULL,
    "routingMode" TEXT NOT NULL DEFAULT 'wildcard',
    "serverId" INTEGER,
    "syncStatus" TEXT NOT NULL DEFAULT 'never',
    "syncError" TEXT,
    "drift" TEXT NOT NULL DEFAULT '[]',
    "lastSyncedAt" DATETIME,
    "reconcileState" TEXT NOT NULL DEFAULT 'idle',
    "reconcileSeq" INTEGER NOT NULL DEFAULT 0,
    "reconcileRequestedAt" DATETIME,
    "reconcileHeartbeatAt" DATETIME,
    "lastApplied" TEXT NOT NULL DEFAULT '{}',
    "lastDesired" TEXT NOT NULL DEFAULT '[]',
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "DnsDomain_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "DnsDomain_dnsProviderId_fkey" FOREIGN KEY ("dnsProviderId") REFERENCES "DnsProvider" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "DnsDomain_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE SET NULL ON UPDATE CASCADE
);
INSERT INTO "new_DnsDomain" ("createdAt", "dnsProviderId", "drift", "id", "lastApplied", "lastSyncedAt", "name", "reconcileHeartbeatAt", "reconcileRequestedAt", "reconcileSeq", "reconcileState", "routingMode", "serverId", "syncError", "syncStatus", "teamId", "updatedAt", "uuid", "zone") SELECT "createdAt", "dnsProviderId", "drift", "id", "lastApplied", "lastSyncedAt", "name", "reconcileHeartbeatAt", "reconcileRequestedAt", "reconcileSeq", "reconcileState", "routingMode", "serverId", "syncError", "syncStatus", "teamId", "updatedAt", "uuid", "zone" FROM "DnsDomain";
DROP TABLE "DnsDomain";
ALTER TABLE "new_DnsDomain" RENAME TO "DnsDomain";
CREATE UNIQUE INDEX "DnsDomain_uuid_key" ON "DnsDomain"("uuid");
CREATE INDEX "DnsDomain_teamId_id_idx" ON "DnsDomain"("teamId", "id");
CREATE INDEX "DnsDomain_dnsProviderId_idx" ON "DnsDomain"("dnsProviderId");
CREATE INDEX "DnsDomain_serverId_idx" ON "DnsDomain"("serverId");
CREATE INDEX "DnsDomain_reconcileState_idx" ON "DnsDomain"("reconcileState");
CREATE UNIQUE INDEX "DnsDomain_teamId_name_key" ON "DnsDomain"("teamId", "name");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE INDEX "DnsHostnamePin_dnsDomainId_idx" ON "DnsHostnamePin"("dnsDomainId");

-- CreateIndex
CREATE UNIQUE INDEX "DnsHostnamePin_teamId_hostname_key" ON "DnsHostnamePin"("teamId", "hostname");

-- CreateIndex
CREATE INDEX "DnsEnvironmentBinding_dnsDomainId_idx" ON "DnsEnvironmentBinding"("dnsDomainId");

-- CreateIndex
CREATE INDEX "DnsEnvironmentBinding_environmentId_idx" ON "DnsEnvironmentBinding"("environmentId");
