-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_BackupSchedule" (
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
    "applicationId" INTEGER,
    "backupType" TEXT,
    "keepLocally" BOOLEAN NOT NULL DEFAULT true,
    "stopDuringBackup" BOOLEAN NOT NULL DEFAULT false,
    "serviceId" INTEGER,
    CONSTRAINT "BackupSchedule_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "BackupSchedule_databaseId_fkey" FOREIGN KEY ("databaseId") REFERENCES "StandaloneDatabase" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "BackupSchedule_s3StorageId_fkey" FOREIGN KEY ("s3StorageId") REFERENCES "S3Storage" ("id") ON DELETE RESTRICT ON UPDATE CASCADE,
    CONSTRAINT "BackupSchedule_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "BackupSchedule_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_BackupSchedule" ("applicationId", "backupType", "createdAt", "databaseId", "enabled", "frequency", "id", "keepLocally", "numberOfBackupsLocally", "numberOfBackupsRemote", "s3StorageId", "stopDuringBackup", "teamId", "updatedAt", "uuid") SELECT "applicationId", "backupType", "createdAt", "databaseId", "enabled", "frequency", "id", "keepLocally", "numberOfBackupsLocally", "numberOfBackupsRemote", "s3StorageId", "stopDuringBackup", "teamId", "updatedAt", "uuid" FROM "BackupSchedule";
DROP TABLE "BackupSchedule";
ALTER TABLE "new_BackupSchedule" RENAME TO "BackupSchedule";
CREATE UNIQUE INDEX "BackupSchedule_uuid_key" ON "BackupSchedule"("uuid");
CREATE INDEX "BackupSchedule_databaseId_id_idx" ON "BackupSchedule"("databaseId", "id");
CREATE INDEX "BackupSchedule_applicationId_id_idx" ON "BackupSchedule"("applicationId", "id");
CREATE INDEX "BackupSchedule_serviceId_id_idx" ON "BackupSchedule"("serviceId", "id");
CREATE INDEX "BackupSchedule_teamId_backupType_id_idx" ON "BackupSchedule"("teamId", "backupType", "id");
CREATE INDEX "BackupSchedule_s3StorageId_idx" ON "BackupSchedule"("s3StorageId");
CREATE INDEX "BackupSchedule_enabled_idx" ON "BackupSchedule"("enabled");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;
