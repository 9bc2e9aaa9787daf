-- AlterTable
ALTER TABLE "BackupSchedule" ADD COLUMN     "serviceId" INTEGER;

-- CreateIndex
CREATE INDEX "BackupSchedule_serviceId_id_idx" ON "BackupSchedule"("serviceId", "id");

-- AddForeignKey
ALTER TABLE "BackupSchedule" ADD CONSTRAINT "BackupSchedule_serviceId_fkey" FOREIGN KEY ("serviceId") REFERENCES "Service"("id") ON DELETE CASCADE ON UPDATE CASCADE;
