-- AlterTable
ALTER TABLE "Server" ADD COLUMN "gatewayReplica" TEXT;

-- CreateTable
CREATE TABLE "GatewayReplica" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "beatAt" DATETIME NOT NULL
);

-- CreateIndex
CREATE INDEX "GatewayReplica_beatAt_idx" ON "GatewayReplica"("beatAt");

-- CreateIndex
CREATE INDEX "Server_status_gatewayReplica_idx" ON "Server"("status", "gatewayReplica");
