-- A network whose removal the server has not confirmed yet (issue 15; docs/networks.md).
-- AlterTable
ALTER TABLE "Network" ADD COLUMN     "deleting" BOOLEAN NOT NULL DEFAULT false;
