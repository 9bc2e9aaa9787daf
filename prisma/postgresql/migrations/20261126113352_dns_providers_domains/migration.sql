-- CreateTable
CREATE TABLE "DnsProvider" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "credentials" TEXT NOT NULL,
    "isUsable" BOOLEAN NOT NULL DEFAULT false,
    "lastTestedAt" TIMESTAMP(3),
    "lastTestError" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "DnsProvider_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "DnsDomain" (
    "id" SERIAL NOT NULL,
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
    "lastSyncedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "DnsDomain_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "DnsProvider_uuid_key" ON "DnsProvider"("uuid");

-- CreateIndex
CREATE INDEX "DnsProvider_teamId_id_idx" ON "DnsProvider"("teamId", "id");

-- CreateIndex
CREATE UNIQUE INDEX "DnsDomain_uuid_key" ON "DnsDomain"("uuid");

-- CreateIndex
CREATE INDEX "DnsDomain_teamId_id_idx" ON "DnsDomain"("teamId", "id");

-- CreateIndex
CREATE INDEX "DnsDomain_dnsProviderId_idx" ON "DnsDomain"("dnsProviderId");

-- CreateIndex
CREATE INDEX "DnsDomain_serverId_idx" ON "DnsDomain"("serverId");

-- CreateIndex
CREATE UNIQUE INDEX "DnsDomain_teamId_name_key" ON "DnsDomain"("teamId", "name");

-- AddForeignKey
ALTER TABLE "DnsProvider" ADD CONSTRAINT "DnsProvider_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DnsDomain" ADD CONSTRAINT "DnsDomain_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DnsDomain" ADD CONSTRAINT "DnsDomain_dnsProviderId_fkey" FOREIGN KEY ("dnsProviderId") REFERENCES "DnsProvider"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DnsDomain" ADD CONSTRAINT "DnsDomain_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server"("id") ON DELETE SET NULL ON UPDATE CASCADE;
