-- CreateTable
CREATE TABLE "Service" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
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
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "Service_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Service_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Service_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "Service_destinationId_fkey" FOREIGN KEY ("destinationId") REFERENCES "Destination" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "ServiceComponent" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "serviceId" INTEGER NOT NULL,
    "kind" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "image" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'exited',
    "fqdn" TEXT,
    "excludeFromStatus" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "ServiceComponent_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "ServiceStorage" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "serviceId" INTEGER NOT NULL,
    "componentId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "mountPath" TEXT NOT NULL,
    "hostPath" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "ServiceStorage_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "ServiceStorage_componentId_fkey" FOREIGN KEY ("componentId") REFERENCES "ServiceComponent" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_EnvVar" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "applicationId" INTEGER,
    "databaseId" INTEGER,
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "isBuildTime" BOOLEAN NOT NULL DEFAULT false,
    "isPreview" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    "serviceId" INTEGER,
    "isGenerated" BOOLEAN NOT NULL DEFAULT false,
    CONSTRAINT "EnvVar_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "EnvVar_databaseId_fkey" FOREIGN KEY ("databaseId") REFERENCES "StandaloneDatabase" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "EnvVar_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_EnvVar" ("applicationId", "createdAt", "databaseId", "id", "isBuildTime", "isPreview", "key", "updatedAt", "uuid", "value") SELECT "applicationId", "createdAt", "databaseId", "id", "isBuildTime", "isPreview", "key", "updatedAt", "uuid", "value" FROM "EnvVar";
DROP TABLE "EnvVar";
ALTER TABLE "new_EnvVar" RENAME TO "EnvVar";
CREATE UNIQUE INDEX "EnvVar_uuid_key" ON "EnvVar"("uuid");
CREATE UNIQUE INDEX "EnvVar_applicationId_key_isPreview_key" ON "EnvVar"("applicationId", "key", "isPreview");
CREATE UNIQUE INDEX "EnvVar_databaseId_key_isPreview_key" ON "EnvVar"("databaseId", "key", "isPreview");
CREATE UNIQUE INDEX "EnvVar_serviceId_key_isPreview_key" ON "EnvVar"("serviceId", "key", "isPreview");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

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
