-- AlterTable
ALTER TABLE "BackupSchedule" ADD COLUMN     "stopDuringBackup" BOOLEAN NOT NULL DEFAULT false;
