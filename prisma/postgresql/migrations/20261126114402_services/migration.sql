-- AlterTable
ALTER TABLE "EnvVar" ADD COLUMN     "isGenerated" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "serviceId" INTEGER;

-- CreateTable
CREATE TABLE "Service" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "environmentId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "destinationId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "type" TEXT,
    "templateSource" TEXT,
    "composeRaw" TEXT NOT NULL,
    "composeRendered" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'exited',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Service_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ServiceComponent" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "serviceId" INTEGER NOT NULL,
    "kind" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "image" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'exited',
    "fqdn" TEXT,
    "excludeFromStatus" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "ServiceComponent_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ServiceStorage" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "serviceId" INTEGER NOT NULL,
    "componentId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "mountPath" TEXT NOT NULL,
    "hostPath" TEXT,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ServiceStorage_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "Service_uuid_key" ON "Service"("uuid");

-- CreateIndex
CREATE INDEX "Service_teamId_id_idx" ON "Service"("teamId", "id");

-- CreateIndex
CREATE INDEX "Service_environmentId_idx" ON "Service"("environmentId");

-- CreateIndex
CREATE INDEX "Service_serverId_idx" ON "Service"("serverId");

-- CreateIndex
CREATE INDEX "Service_destinationId_idx" ON "Service"("destinationId");

-- CreateIndex
CREATE UNIQUE INDEX "ServiceComponent_uuid_key" ON "ServiceComponent"("uuid");

-- CreateIndex
CREATE UNIQUE INDEX "ServiceComponent_serviceId_name_key" ON "ServiceComponent"("serviceId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "ServiceStorage_uuid_key" ON "ServiceStorage"("uuid");

-- CreateIndex
CREATE UNIQUE INDEX "ServiceStorage_serviceId_name_key" ON "ServiceStorage"("serviceId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "ServiceStorage_componentId_mountPath_key" ON "ServiceStorage"("componentId", "mountPath");

-- CreateIndex
CREATE UNIQUE INDEX "EnvVar_serviceId_key_isPreview_key" ON "EnvVar"("serviceId", "key", "isPreview");

-- AddForeignKey
ALTER TABLE "EnvVar" ADD CONSTRAINT "EnvVar_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Service" ADD CONSTRAINT "Service_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Service" ADD CONSTRAINT "Service_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Service" ADD CONSTRAINT "Service_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "Service" ADD CONSTRAINT "Service_destinationId_fkey" FOREIGN KEY ("destinationId") REFERENCES "Destination"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ServiceComponent" ADD CONSTRAINT "ServiceComponent_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ServiceStorage" ADD CONSTRAINT "ServiceStorage_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ServiceStorage" ADD CONSTRAINT "ServiceStorage_componentId_fkey" FOREIGN KEY ("componentId") REFERENCES "ServiceComponent"("id") ON DELETE CASCADE ON UPDATE CASCADE;
