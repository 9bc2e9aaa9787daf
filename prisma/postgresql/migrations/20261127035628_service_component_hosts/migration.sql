-- CreateTable
CREATE TABLE "ServiceComponentHost" (
    "componentId" INTEGER NOT NULL,
    "host" TEXT NOT NULL,

    CONSTRAINT "ServiceComponentHost_pkey" PRIMARY KEY ("componentId","host")
);

-- CreateIndex
CREATE INDEX "ServiceComponentHost_host_idx" ON "ServiceComponentHost"("host");

-- AddForeignKey
ALTER TABLE "ServiceComponentHost" ADD CONSTRAINT "ServiceComponentHost_componentId_fkey" FOREIGN KEY ("componentId") REFERENCES "ServiceComponent"("id") ON DELETE CASCADE ON UPDATE CASCADE;
