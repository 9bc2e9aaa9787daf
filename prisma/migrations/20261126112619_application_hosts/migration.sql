-- CreateTable
CREATE TABLE "ApplicationHost" (
    "applicationId" INTEGER NOT NULL,
    "host" TEXT NOT NULL,

    PRIMARY KEY ("applicationId", "host"),
    CONSTRAINT "ApplicationHost_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "ApplicationHost_host_idx" ON "ApplicationHost"("host");

-- Hand-written (the backfill): the hosts of the applications that have domains already, so the
-- proxy's ownership table (services/domain-ownership.ts) is the same before and after. A stored
-- fqdn is normalised by the API (shared DomainList): "scheme://host[/path]" joined by commas,
-- the host in lower case and without a port, so a host is what stands between "://" and the
-- next "/". From here on services/applications.ts writes the rows with the fqdn.
WITH RECURSIVE "part"("id", "item", "rest") AS (
    SELECT "id", '', "fqdn" || ',' FROM "Application" WHERE "fqdn" IS NOT NULL
    UNION ALL
    SELECT "id", trim(substr("rest", 1, instr("rest", ',') - 1)), substr("rest", instr("rest", ',') + 1) FROM "part" WHERE "rest" <> ''
), "bare"("id", "item") AS (
    SELECT "id", CASE WHEN instr("item", '://') > 0 THEN substr("item", instr("item", '://') + 3) ELSE "item" END FROM "part" WHERE "item" <> ''
), "hosts"("id", "host") AS (
    SELECT "id", lower(CASE WHEN instr("item", '/') > 0 THEN substr("item", 1, instr("item", '/') - 1) ELSE "item" END) FROM "bare"
)
INSERT OR IGNORE INTO "ApplicationHost" ("applicationId", "host") SELECT "id", "host" FROM "hosts" WHERE "host" <> '';
