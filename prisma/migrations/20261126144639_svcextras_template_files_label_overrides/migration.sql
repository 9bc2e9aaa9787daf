-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_TemplateSource" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
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
    "syncHeartbeatAt" DATETIME,
    "lastSyncedAt" DATETIME,
    "syncedCommit" TEXT,
    "templateCount" INTEGER NOT NULL DEFAULT 0,
    "templates" TEXT NOT NULL DEFAULT '[]',
    "brokenTemplates" TEXT NOT NULL DEFAULT '[]',
    "ignoredTemplates" TEXT NOT NULL DEFAULT '[]',
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    "templateFiles" TEXT NOT NULL DEFAULT '{}',
    CONSTRAINT "TemplateSource_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_TemplateSource" ("authToken", "branch", "brokenTemplates", "createdAt", "folderPath", "id", "ignoredTemplates", "isEnabled", "lastSyncedAt", "name", "repositoryUrl", "slug", "syncError", "syncHeartbeatAt", "syncStatus", "syncedCommit", "teamId", "templateCount", "templates", "updatedAt", "uuid") SELECT "authToken", "branch", "brokenTemplates", "createdAt", "folderPath", "id", "ignoredTemplates", "isEnabled", "lastSyncedAt", "name", "repositoryUrl", "slug", "syncError", "syncHeartbeatAt", "syncStatus", "syncedCommit", "teamId", "templateCount", "templates", "updatedAt", "uuid" FROM "TemplateSource";
DROP TABLE "TemplateSource";
ALTER TABLE "new_TemplateSource" RENAME TO "TemplateSource";
CREATE UNIQUE INDEX "TemplateSource_uuid_key" ON "TemplateSource"("uuid");
CREATE INDEX "TemplateSource_teamId_id_idx" ON "TemplateSource"("teamId", "id");
CREATE INDEX "TemplateSource_teamId_isEnabled_idx" ON "TemplateSource"("teamId", "isEnabled");
CREATE INDEX "TemplateSource_syncStatus_syncHeartbeatAt_idx" ON "TemplateSource"("syncStatus", "syncHeartbeatAt");
CREATE UNIQUE INDEX "TemplateSource_teamId_slug_key" ON "TemplateSource"("teamId", "slug");
CREATE TABLE "new_ServiceComponent" (
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
    "labelOverrides" TEXT NOT NULL DEFAULT '',
    CONSTRAINT "ServiceComponent_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_ServiceComponent" ("createdAt", "excludeFromStatus", "fqdn", "id", "image", "kind", "name", "serviceId", "status", "updatedAt", "uuid") SELECT "createdAt", "excludeFromStatus", "fqdn", "id", "image", "kind", "name", "serviceId", "status", "updatedAt", "uuid" FROM "ServiceComponent";
DROP TABLE "ServiceComponent";
ALTER TABLE "new_ServiceComponent" RENAME TO "ServiceComponent";
CREATE UNIQUE INDEX "ServiceComponent_uuid_key" ON "ServiceComponent"("uuid");
CREATE UNIQUE INDEX "ServiceComponent_serviceId_name_key" ON "ServiceComponent"("serviceId", "name");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;
