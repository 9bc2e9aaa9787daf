-- CreateTable
CREATE TABLE "Application" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "environmentId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "destinationId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "source" TEXT NOT NULL,
    "buildPack" TEXT NOT NULL,
    "gitRepository" TEXT,
    "gitBranch" TEXT,
    "gitAppId" INTEGER,
    "privateKeyId" INTEGER,
    "dockerfile" TEXT,
    "dockerImage" TEXT,
    "composeRaw" TEXT,
    "baseDirectory" TEXT NOT NULL DEFAULT '/',
    "fqdn" TEXT,
    "portsExposes" TEXT NOT NULL DEFAULT '80',
    "healthCheckEnabled" BOOLEAN NOT NULL DEFAULT false,
    "healthCheckPath" TEXT NOT NULL DEFAULT '/',
    "healthCheckPort" INTEGER,
    "healthCheckInterval" INTEGER NOT NULL DEFAULT 5,
    "healthCheckTimeout" INTEGER NOT NULL DEFAULT 5,
    "healthCheckRetries" INTEGER NOT NULL DEFAULT 10,
    "healthCheckStartPeriod" INTEGER NOT NULL DEFAULT 5,
    "limitsMemory" TEXT,
    "limitsCpus" TEXT,
    "status" TEXT NOT NULL DEFAULT 'exited',
    "webhookSecret" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "Application_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Application_environmentId_fkey" FOREIGN KEY ("environmentId") REFERENCES "Environment" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Application_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "Application_destinationId_fkey" FOREIGN KEY ("destinationId") REFERENCES "Destination" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "Application_gitAppId_fkey" FOREIGN KEY ("gitAppId") REFERENCES "GitApp" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "Application_privateKeyId_fkey" FOREIGN KEY ("privateKeyId") REFERENCES "PrivateKey" ("id") ON DELETE RESTRICT ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "EnvVar" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "applicationId" INTEGER,
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL,
    "isBuildTime" BOOLEAN NOT NULL DEFAULT false,
    "isPreview" BOOLEAN NOT NULL DEFAULT false,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "EnvVar_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Volume" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "applicationId" INTEGER,
    "name" TEXT NOT NULL,
    "mountPath" TEXT NOT NULL,
    "hostPath" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "Volume_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "Deployment" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "applicationId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'queued',
    "trigger" TEXT NOT NULL,
    "force" BOOLEAN NOT NULL DEFAULT false,
    "commit" TEXT,
    "commitMessage" TEXT,
    "branch" TEXT,
    "jobId" TEXT,
    "reason" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "startedAt" DATETIME,
    "finishedAt" DATETIME,
    CONSTRAINT "Deployment_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Deployment_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "Deployment_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "GitApp" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "appId" INTEGER NOT NULL,
    "installationId" INTEGER NOT NULL,
    "privateKey" TEXT NOT NULL,
    "apiUrl" TEXT NOT NULL,
    "htmlUrl" TEXT NOT NULL,
    "webhookSecret" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "GitApp_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE UNIQUE INDEX "Application_uuid_key" ON "Application"("uuid");

-- CreateIndex
CREATE INDEX "Application_teamId_id_idx" ON "Application"("teamId", "id");

-- CreateIndex
CREATE INDEX "Application_environmentId_idx" ON "Application"("environmentId");

-- CreateIndex
CREATE INDEX "Application_serverId_idx" ON "Application"("serverId");

-- CreateIndex
CREATE INDEX "Application_destinationId_idx" ON "Application"("destinationId");

-- CreateIndex
CREATE INDEX "Application_gitAppId_idx" ON "Application"("gitAppId");

-- CreateIndex
CREATE INDEX "Application_privateKeyId_idx" ON "Application"("privateKeyId");

-- CreateIndex
CREATE UNIQUE INDEX "EnvVar_uuid_key" ON "EnvVar"("uuid");

-- CreateIndex
CREATE UNIQUE INDEX "EnvVar_applicationId_key_isPreview_key" ON "EnvVar"("applicationId", "key", "isPreview");

-- CreateIndex
CREATE UNIQUE INDEX "Volume_uuid_key" ON "Volume"("uuid");

-- CreateIndex
CREATE UNIQUE INDEX "Volume_applicationId_mountPath_key" ON "Volume"("applicationId", "mountPath");

-- CreateIndex
CREATE UNIQUE INDEX "Volume_applicationId_name_key" ON "Volume"("applicationId", "name");

-- CreateIndex
CREATE UNIQUE INDEX "Deployment_uuid_key" ON "Deployment"("uuid");

-- CreateIndex
CREATE UNIQUE INDEX "Deployment_jobId_key" ON "Deployment"("jobId");

-- CreateIndex
CREATE INDEX "Deployment_teamId_id_idx" ON "Deployment"("teamId", "id");

-- CreateIndex
CREATE INDEX "Deployment_applicationId_id_idx" ON "Deployment"("applicationId", "id");

-- CreateIndex
CREATE INDEX "Deployment_serverId_status_idx" ON "Deployment"("serverId", "status");

-- CreateIndex
CREATE UNIQUE INDEX "GitApp_uuid_key" ON "GitApp"("uuid");

-- CreateIndex
CREATE INDEX "GitApp_teamId_id_idx" ON "GitApp"("teamId", "id");
