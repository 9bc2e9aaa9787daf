-- AlterTable
ALTER TABLE "Cluster" ADD COLUMN "eventsAt" DATETIME;

-- CreateTable
CREATE TABLE "ClusterEvent" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "clusterId" INTEGER NOT NULL,
    "timeNano" TEXT NOT NULL,
    "time" DATETIME NOT NULL,
    "type" TEXT NOT NULL,
    "action" TEXT NOT NULL,
    "actorId" TEXT NOT NULL,
    "attributes" TEXT NOT NULL DEFAULT '{}',
    "dedupeKey" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "ClusterEvent_clusterId_fkey" FOREIGN KEY ("clusterId") REFERENCES "Cluster" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "ClusterEvent_clusterId_time_idx" ON "ClusterEvent"("clusterId", "time");

-- CreateIndex
CREATE INDEX "ClusterEvent_clusterId_timeNano_idx" ON "ClusterEvent"("clusterId", "timeNano");

-- CreateIndex
CREATE UNIQUE INDEX "ClusterEvent_clusterId_dedupeKey_key" ON "ClusterEvent"("clusterId", "dedupeKey");
