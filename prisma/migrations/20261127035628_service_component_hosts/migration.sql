-- CreateTable
CREATE TABLE "ServiceComponentHost" (
    "componentId" INTEGER NOT NULL,
    "host" TEXT NOT NULL,

    PRIMARY KEY ("componentId", "host"),
    CONSTRAINT "ServiceComponentHost_componentId_fkey" FOREIGN KEY ("componentId") REFERENCES "ServiceComponent" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "ServiceComponentHost_host_idx" ON "ServiceComponentHost"("host");
