-- AlterTable
ALTER TABLE "Server" ADD COLUMN     "gatewayReplica" TEXT;

-- CreateTable
CREATE TABLE "GatewayReplica" (
    "id" TEXT NOT NULL,
    "beatAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "GatewayReplica_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "GatewayReplica_beatAt_idx" ON "GatewayReplica"("beatAt");

-- CreateIndex
CREATE INDEX "Server_status_gatewayReplica_idx" ON "Server"("status", "gatewayReplica");
