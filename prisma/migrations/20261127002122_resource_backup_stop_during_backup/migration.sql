-- AlterTable (stop_during_backup of resource backups; a plain ADD COLUMN: no table rebuild, no trigger to re-create)
ALTER TABLE "BackupSchedule" ADD COLUMN "stopDuringBackup" BOOLEAN NOT NULL DEFAULT false;
