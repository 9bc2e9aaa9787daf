-- AlterTable
ALTER TABLE "Deployment" ADD COLUMN     "slotServerId" INTEGER;

-- CreateIndex
CREATE INDEX "Deployment_slotServerId_status_idx" ON "Deployment"("slotServerId", "status");
