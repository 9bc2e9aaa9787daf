-- CreateTable
CREATE TABLE "Cluster" (
    "id" SERIAL NOT NULL,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "swarmId" TEXT NOT NULL,
    "nodes" TEXT NOT NULL DEFAULT '[]',
    "nodesAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Cluster_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "ClusterServer" (
    "clusterId" INTEGER NOT NULL,
    "serverId" INTEGER NOT NULL,
    "nodeId" TEXT NOT NULL,
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "ClusterServer_pkey" PRIMARY KEY ("clusterId","serverId")
);

-- CreateIndex
CREATE UNIQUE INDEX "Cluster_uuid_key" ON "Cluster"("uuid");

-- CreateIndex
CREATE INDEX "Cluster_teamId_id_idx" ON "Cluster"("teamId", "id");

-- CreateIndex
CREATE UNIQUE INDEX "Cluster_teamId_swarmId_key" ON "Cluster"("teamId", "swarmId");

-- CreateIndex
CREATE UNIQUE INDEX "ClusterServer_serverId_key" ON "ClusterServer"("serverId");

-- AddForeignKey
ALTER TABLE "Cluster" ADD CONSTRAINT "Cluster_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ClusterServer" ADD CONSTRAINT "ClusterServer_clusterId_fkey" FOREIGN KEY ("clusterId") REFERENCES "Cluster"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "ClusterServer" ADD CONSTRAINT "ClusterServer_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server"("id") ON DELETE CASCADE ON UPDATE CASCADE;
