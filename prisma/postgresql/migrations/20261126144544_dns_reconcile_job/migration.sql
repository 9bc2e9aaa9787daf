-- AlterTable
ALTER TABLE "DnsDomain" ADD COLUMN     "lastApplied" TEXT NOT NULL DEFAULT '{}',
ADD COLUMN     "reconcileHeartbeatAt" TIMESTAMP(3),
ADD COLUMN     "reconcileRequestedAt" TIMESTAMP(3),
ADD COLUMN     "reconcileSeq" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "reconcileState" TEXT NOT NULL DEFAULT 'idle';

-- CreateIndex
CREATE INDEX "DnsDomain_reconcileState_idx" ON "DnsDomain"("reconcileState");
