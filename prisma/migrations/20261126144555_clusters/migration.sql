-- CreateTable
CREATE TABLE "Cluster" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "swarmId" TEXT NOT NULL,
    "nodes" TEXT NOT NULL DEFAULT '[]',
    "nodesAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "Cluster_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateTable
CREATE TABLE "ClusterServer" (
    "clusterId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "nodeId" TEXT NOT NULL,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,

    PRIMARY KEY ("clusterId", "serverId"),
    CONSTRAINT "ClusterServer_clusterId_fkey" FOREIGN KEY ("clusterId") REFERENCES "Cluster" ("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "ClusterServer_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE UNIQUE INDEX "Cluster_uuid_key" ON "Cluster"("uuid");

-- CreateIndex
CREATE INDEX "Cluster_teamId_id_idx" ON "Cluster"("teamId", "id");

-- CreateIndex
CREATE UNIQUE INDEX "Cluster_teamId_swarmId_key" ON "Cluster"("teamId", "swarmId");

-- CreateIndex
CREATE UNIQUE INDEX "ClusterServer_serverId_key" ON "ClusterServer"("serverId");
