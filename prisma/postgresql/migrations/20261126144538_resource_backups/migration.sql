-- AlterTable
ALTER TABLE "BackupSchedule" ADD COLUMN     "applicationId" INTEGER,
ADD COLUMN     "backupType" TEXT,
ADD COLUMN     "keepLocally" BOOLEAN NOT NULL DEFAULT true;

-- CreateIndex
CREATE INDEX "BackupSchedule_applicationId_id_idx" ON "BackupSchedule"("applicationId", "id");

-- CreateIndex
CREATE INDEX "BackupSchedule_teamId_backupType_id_idx" ON "BackupSchedule"("teamId", "backupType", "id");

-- AddForeignKey
ALTER TABLE "BackupSchedule" ADD CONSTRAINT "BackupSchedule_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application"("id") ON DELETE CASCADE ON UPDATE CASCADE;
