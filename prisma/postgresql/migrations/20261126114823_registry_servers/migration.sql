-- CreateTable
CREATE TABLE "RegistryServer" (
    "registryId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "syncedAt" TIMESTAMP(3),
    "error" TEXT,
    "fingerprint" TEXT,
    "jobId" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "RegistryServer_pkey" PRIMARY KEY ("registryId","serverId")
);

-- CreateIndex
CREATE INDEX "RegistryServer_serverId_idx" ON "RegistryServer"("serverId");

-- AddForeignKey
ALTER TABLE "RegistryServer" ADD CONSTRAINT "RegistryServer_registryId_fkey" FOREIGN KEY ("registryId") REFERENCES "Registry"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "RegistryServer" ADD CONSTRAINT "RegistryServer_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server"("id") ON DELETE CASCADE ON UPDATE CASCADE;
