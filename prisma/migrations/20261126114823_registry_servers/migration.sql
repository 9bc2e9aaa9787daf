-- CreateTable
CREATE TABLE "RegistryServer" (
    "registryId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "syncedAt" DATETIME,
    "error" TEXT,
    "fingerprint" TEXT,
    "jobId" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,

    PRIMARY KEY ("registryId", "serverId"),
    CONSTRAINT "RegistryServer_registryId_fkey" FOREIGN KEY ("registryId") REFERENCES "Registry" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "RegistryServer_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "RegistryServer_serverId_idx" ON "RegistryServer"("serverId");
