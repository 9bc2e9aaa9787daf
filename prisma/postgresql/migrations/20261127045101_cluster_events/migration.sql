-- AlterTable
ALTER TABLE "Cluster" ADD COLUMN     "eventsAt" TIMESTAMP(3);

-- CreateTable
CREATE TABLE "ClusterEvent" (
    "id" SERIAL NOT NULL,
    "clusterId" INTEGER NOT NULL,
    "timeNano" TEXT NOT NULL,
    "time" TIMESTAMP(3) NOT NULL,
    "type" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "actorId" TEXT NOT NULL,
    "attributes" TEXT NOT NULL DEFAULT '{}',
    "dedupeKey" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ClusterEvent_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "ClusterEvent_clusterId_time_idx" ON "ClusterEvent"("clusterId", "time");

-- CreateIndex
CREATE INDEX "ClusterEvent_clusterId_timeNano_idx" ON "ClusterEvent"("clusterId", "timeNano");

-- CreateIndex
CREATE UNIQUE INDEX "ClusterEvent_clusterId_dedupeKey_key" ON "ClusterEvent"("clusterId", "dedupeKey");

-- AddForeignKey
ALTER TABLE "ClusterEvent" ADD CONSTRAINT "ClusterEvent_clusterId_fkey" FOREIGN KEY ("clusterId") REFERENCES "Cluster"("id") ON DELETE CASCADE ON UPDATE CASCADE;
