-- AlterTable
ALTER TABLE "DnsDomain" ADD COLUMN     "lastDesired" TEXT NOT NULL DEFAULT '[]';

-- CreateTable
CREATE TABLE "DnsHostnamePin" (
    "id" SERIAL NOT NULL,
    "teamId" INTEGER NOT NULL,
    "hostname" TEXT NOT NULL,
    "dnsDomainId" INTEGER NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "DnsHostnamePin_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "DnsEnvironmentBinding" (
    "id" SERIAL NOT NULL,
    "dnsDomainId" INTEGER NOT NULL,
    "environmentId" INTEGER,
    "environmentRole" TEXT,
    "priority" INTEGER NOT NULL DEFAULT 0,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "DnsEnvironmentBinding_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "DnsHostnamePin_dnsDomainId_idx" ON "DnsHostnamePin"("dnsDomainId");

-- CreateIndex
CREATE UNIQUE INDEX "DnsHostnamePin_teamId_hostname_key" ON "DnsHostnamePin"("teamId", "hostname");

-- CreateIndex
CREATE INDEX "DnsEnvironmentBinding_dnsDomainId_idx" ON "DnsEnvironmentBinding"("dnsDomainId");

-- CreateIndex
CREATE INDEX "DnsEnvironmentBinding_environmentId_idx" ON "DnsEnvironmentBinding"("environmentId");

-- AddForeignKey
ALTER TABLE "DnsHostnamePin" ADD CONSTRAINT "DnsHostnamePin_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DnsHostnamePin" ADD CONSTRAINT "DnsHostnamePin_dnsDomainId_fkey" FOREIGN KEY ("dnsDomainId") REFERENCES "DnsDomain"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DnsEnvironmentBinding" ADD CONSTRAINT "DnsEnvironmentBinding_dnsDomainId_fkey" FOREIGN KEY ("dnsDomainId") REFERENCES "DnsDomain"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "DnsEnvironmentBinding" ADD CONSTRAINT "DnsEnvironmentBinding_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment"("id") ON DELETE CASCADE ON UPDATE CASCADE;
