-- CreateTable
CREATE TABLE "StandaloneDatabase" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "environmentId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "destinationId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "engine" TEXT NOT NULL,
    "image" TEXT NOT NULL,
    "isPublic" BOOLEAN NOT NULL DEFAULT false,
    "publicPort" INTEGER,
    "limitsMemory" TEXT,
    "limitsCpus" TEXT,
    "credentials" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'exited',
    "lastError" TEXT,
    "lastErrorAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "StandaloneDatabase_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "StandaloneDatabase_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "StandaloneDatabase_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "StandaloneDatabase_destinationId_fkey" FOREIGN KEY ("destinationId") REFERENCES "Destination" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "S3Storage" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "endpoint" TEXT NOT NULL,
    "region" TEXT NOT NULL DEFAULT 'us-east-1',
    "bucket" TEXT NOT NULL,
    "pathPrefix" TEXT NOT NULL DEFAULT '',
    "pathStyle" BOOLEAN NOT NULL DEFAULT true,
    "accessKey" TEXT NOT NULL,
    "secretKey" TEXT NOT NULL,
    "encryptionPassphrase" TEXT,
    "isUsable" BOOLEAN NOT NULL DEFAULT false,
    "lastTestedAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "S3Storage_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "BackupSchedule" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "databaseId" INTEGER,
    "frequency" TEXT NOT NULL,
    "enabled" BOOLEAN NOT NULL DEFAULT true,
    "s3StorageId" INTEGER,
    "numberOfBackupsLocally" INTEGER NOT NULL DEFAULT 7,
    "numberOfBackupsRemote" INTEGER,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "BackupSchedule_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "BackupSchedule_databaseId_fkey" FOREIGN KEY ("databaseId") REFERENCES "StandaloneDatabase" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "BackupSchedule_s3StorageId_fkey" FOREIGN KEY ("s3StorageId") REFERENCES "S3Storage" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "BackupExecution" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "scheduleId" INTEGER NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "trigger" TEXT NOT NULL,
    "scheduledFor" DATETIME,
    "filename" TEXT,
    "size" BIGINT,
    "isEncrypted" BOOLEAN NOT NULL DEFAULT false,
    "s3Key" TEXT,
    "s3StorageId" INTEGER,
    "localPath" TEXT,
    "jobId" TEXT,
    "reason" TEXT,
    "restoreStatus" TEXT,
    "restoreReason" TEXT,
    "restoreJobId" TEXT,
    "restoredAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "finishedAt" DATETIME,
    CONSTRAINT "BackupExecution_scheduleId_fkey" FOREIGN KEY ("scheduleId") REFERENCES "BackupSchedule" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "BackupExecution_s3StorageId_fkey" FOREIGN KEY ("s3StorageId") REFERENCES "S3Storage" ("id") ON DELETE SET NULL ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Network" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "environmentId" INTEGER,
    "name" TEXT NOT NULL,
    "scope" TEXT NOT NULL,
    "driver" TEXT NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "containerEngineId" TEXT,
    "isProxyNetwork" BOOLEAN NOT NULL DEFAULT false,
    "encrypted" BOOLEAN NOT NULL DEFAULT false,
    "reason" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "Network_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Network_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Network_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment" ("id") ON DELETE SET NULL ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "NetworkAttachment" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "networkId" INTEGER NOT NULL,
    "resourceType" TEXT NOT NULL,
    "resourceId" INTEGER NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "NetworkAttachment_networkId_fkey" FOREIGN KEY ("networkId") REFERENCES "Network" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_Server" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "ip" TEXT NOT NULL,
    "port" INTEGER NOT NULL DEFAULT 22,
    "user" TEXT NOT NULL DEFAULT 'root',
    "privateKeyId" INTEGER NOT NULL,
    "isBuildServer" BOOLEAN NOT NULL DEFAULT false,
    "isLocal" BOOLEAN NOT NULL DEFAULT false,
    "sshHostKey" TEXT,
    "status" TEXT NOT NULL DEFAULT 'pending',
    "isUsable" BOOLEAN NOT NULL DEFAULT false,
    "lastSeenAt" DATETIME,
    "agentTokenHash" TEXT NOT NULL,
    "agentVersion" TEXT,
    "agentConnection" TEXT,
    "facts" TEXT,
    "proxyIsolation" TEXT NOT NULL DEFAULT 'none',
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "Server_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Server_privateKeyId_fkey" FOREIGN KEY ("privateKeyId") REFERENCES "PrivateKey" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);
INSERT INTO "new_Server" ("agentConnection", "agentTokenHash", "agentVersion", "createdAt", "description", "facts", "id", "ip", "isBuildServer", "isLocal", "isUsable", "lastSeenAt", "name", "port", "privateKeyId", "sshHostKey", "status", "teamId", "updatedAt", "user", "uuid") SELECT "agentConnection", "agentTokenHash", "agentVersion", "createdAt", "description", "facts", "id", "ip", "isBuildServer", "isLocal", "isUsable", "lastSeenAt", "name", "port", "privateKeyId", "sshHostKey", "status", "teamId", "updatedAt", "user", "uuid" FROM "Server";
DROP TABLE "Server";
ALTER TABLE "new_Server" RENAME TO "Server";
CREATE UNIQUE INDEX "Server_uuid_key" ON "Server"("uuid");
CREATE UNIQUE INDEX "Server_agentTokenHash_key" ON "Server"("agentTokenHash");
CREATE INDEX "Server_teamId_id_idx" ON "Server"("teamId", "id");
CREATE INDEX "Server_privateKeyId_idx" ON "Server"("privateKeyId");
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
    CONSTRAINT "EnvVar_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "EnvVar_databaseId_fkey" FOREIGN KEY ("databaseId") REFERENCES "StandaloneDatabase" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_EnvVar" ("applicationId", "createdAt", "id", "isBuildTime", "isPreview", "key", "updatedAt", "uuid", "value") SELECT "applicationId", "createdAt", "id", "isBuildTime", "isPreview", "key", "updatedAt", "uuid", "value" FROM "EnvVar";
DROP TABLE "EnvVar";
ALTER TABLE "new_EnvVar" RENAME TO "EnvVar";
CREATE UNIQUE INDEX "EnvVar_uuid_key" ON "EnvVar"("uuid");
CREATE UNIQUE INDEX "EnvVar_applicationId_key_isPreview_key" ON "EnvVar"("applicationId", "key", "isPreview");
CREATE UNIQUE INDEX "EnvVar_databaseId_key_isPreview_key" ON "EnvVar"("databaseId", "key", "isPreview");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;

-- CreateIndex
CREATE UNIQUE INDEX "StandaloneDatabase_uuid_key" ON "StandaloneDatabase"("uuid");

-- CreateIndex
CREATE INDEX "StandaloneDatabase_teamId_id_idx" ON "StandaloneDatabase"("teamId", "id");

-- CreateIndex
CREATE INDEX "StandaloneDatabase_environmentId_idx" ON "StandaloneDatabase"("environmentId");

-- CreateIndex
CREATE INDEX "StandaloneDatabase_serverId_idx" ON "StandaloneDatabase"("serverId");

-- CreateIndex
CREATE INDEX "StandaloneDatabase_destinationId_idx" ON "StandaloneDatabase"("destinationId");

-- CreateIndex
CREATE UNIQUE INDEX "S3Storage_uuid_key" ON "S3Storage"("uuid");

-- CreateIndex
CREATE INDEX "S3Storage_teamId_id_idx" ON "S3Storage"("teamId", "id");

-- CreateIndex
CREATE UNIQUE INDEX "BackupSchedule_uuid_key" ON "BackupSchedule"("uuid");

-- CreateIndex
CREATE INDEX "BackupSchedule_databaseId_id_idx" ON "BackupSchedule"("databaseId", "id");

-- CreateIndex
CREATE INDEX "BackupSchedule_s3StorageId_idx" ON "BackupSchedule"("s3StorageId");

-- CreateIndex
CREATE INDEX "BackupSchedule_enabled_idx" ON "BackupSchedule"("enabled");

-- CreateIndex
CREATE UNIQUE INDEX "BackupExecution_uuid_key" ON "BackupExecution"("uuid");

-- CreateIndex
CREATE UNIQUE INDEX "BackupExecution_jobId_key" ON "BackupExecution"("jobId");

-- CreateIndex
CREATE UNIQUE INDEX "BackupExecution_restoreJobId_key" ON "BackupExecution"("restoreJobId");

-- CreateIndex
CREATE INDEX "BackupExecution_s3StorageId_idx" ON "BackupExecution"("s3StorageId");

-- CreateIndex
CREATE INDEX "BackupExecution_scheduleId_id_idx" ON "BackupExecution"("scheduleId", "id");

-- CreateIndex
CREATE INDEX "BackupExecution_status_idx" ON "BackupExecution"("status");

-- CreateIndex
CREATE UNIQUE INDEX "BackupExecution_scheduleId_scheduledFor_key" ON "BackupExecution"("scheduleId", "scheduledFor");

-- CreateIndex
CREATE UNIQUE INDEX "Network_uuid_key" ON "Network"("uuid");

-- CreateIndex
CREATE INDEX "Network_serverId_id_idx" ON "Network"("serverId", "id");

-- CreateIndex
CREATE INDEX "Network_teamId_id_idx" ON "Network"("teamId", "id");

-- CreateIndex
CREATE INDEX "Network_environmentId_idx" ON "Network"("environmentId");

-- CreateIndex
CREATE UNIQUE INDEX "Network_serverId_name_key" ON "Network"("serverId", "name");

-- CreateIndex
CREATE INDEX "NetworkAttachment_resourceType_resourceId_idx" ON "NetworkAttachment"("resourceType", "resourceId");

-- CreateIndex
CREATE UNIQUE INDEX "NetworkAttachment_networkId_resourceType_resourceId_key" ON "NetworkAttachment"("networkId", "resourceType", "resourceId");
