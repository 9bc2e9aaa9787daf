-- CreateTable
CREATE TABLE "Registry" (
    "id" SERIAL NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "type" TEXT NOT NULL,
    "url" TEXT NOT NULL,
    "username" TEXT NOT NULL,
    "credentials" TEXT NOT NULL,
    "defaultSlot" INTEGER,
    "lastSyncedAt" TIMESTAMP(3),
    "createdAt" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "Registry_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "Registry_teamId_id_idx" ON "Registry"("teamId", "id");

-- CreateIndex
CREATE UNIQUE INDEX "Registry_teamId_defaultSlot_key" ON "Registry"("teamId", "defaultSlot");

-- AddForeignKey
ALTER TABLE "Registry" ADD CONSTRAINT "Registry_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team"("id") ON DELETE CASCADE ON UPDATE CASCADE;
