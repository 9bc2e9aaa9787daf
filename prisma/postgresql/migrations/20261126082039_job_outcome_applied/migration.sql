-- AlterTable
ALTER TABLE "Job" ADD COLUMN     "outcomeAppliedAt" TIMESTAMP(3),
ADD COLUMN     "outcomeClaimedAt" TIMESTAMP(3);

-- CreateIndex
CREATE INDEX "Job_outcomeAppliedAt_finishedAt_idx" ON "Job"("outcomeAppliedAt", "finishedAt");

-- Jobs that ended before this migration had their finish hooks run already: their outcome
-- counts as applied, so the repair sweep does not run every old job's handler again.
UPDATE "Job" SET "outcomeAppliedAt" = "finishedAt" WHERE "status" IN ('succeeded', 'failed', 'cancelled');
