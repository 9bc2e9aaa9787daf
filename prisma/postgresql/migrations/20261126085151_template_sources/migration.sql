-- CreateTable
CREATE TABLE "TemplateSource" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "slug" TEXT NOT NULL,
    "repositoryUrl" TEXT NOT NULL,
    "branch" TEXT NOT NULL DEFAULT 'main',
    "folderPath" TEXT NOT NULL DEFAULT '',
    "authToken" TEXT,
    "isEnabled" BOOLEAN NOT NULL DEFAULT true,
    "syncStatus" TEXT NOT NULL DEFAULT 'pending',
    "syncError" TEXT,
    "syncHeartbeatAt" TIMESTAMP(3),
    "lastSyncedAt" TIMESTAMP(3),
    "syncedCommit" TEXT,
    "templateCount" INTEGER NOT NULL DEFAULT 0,
    "templates" TEXT NOT NULL DEFAULT '[]',
    "brokenTemplates" TEXT NOT NULL DEFAULT '[]',
    "ignoredTemplates" TEXT NOT NULL DEFAULT '[]',
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "TemplateSource_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "TemplateSource_uuid_key" ON "TemplateSource"("uuid");

-- CreateIndex
CREATE INDEX "TemplateSource_teamId_id_idx" ON "TemplateSource"("teamId", "id");

-- CreateIndex
CREATE INDEX "TemplateSource_teamId_isEnabled_idx" ON "TemplateSource"("teamId", "isEnabled");

-- CreateIndex
CREATE INDEX "TemplateSource_syncStatus_syncHeartbeatAt_idx" ON "TemplateSource"("syncStatus", "syncHeartbeatAt");

-- CreateIndex
CREATE UNIQUE INDEX "TemplateSource_teamId_slug_key" ON "TemplateSource"("teamId", "slug");

-- AddForeignKey
ALTER TABLE "TemplateSource" ADD CONSTRAINT "TemplateSource_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;
