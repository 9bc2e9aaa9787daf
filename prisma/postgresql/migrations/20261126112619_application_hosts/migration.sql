-- CreateTable
CREATE TABLE "ApplicationHost" (
    "applicationId" INTEGER NOT NULL,
    "host" TEXT NOT NULL,

    CONSTRAINT "ApplicationHost_pkey" PRIMARY KEY ("applicationId","host")
);

-- CreateIndex
CREATE INDEX "ApplicationHost_host_idx" ON "ApplicationHost"("host");

-- AddForeignKey
ALTER TABLE "ApplicationHost" ADD CONSTRAINT "ApplicationHost_applicationId_fkey" FOREIGN KEY ("applicationId") REFERENCES "Application"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Hand-written (the backfill): the hosts of the applications that have domains already, so the
-- proxy's ownership table (services/domain-ownership.ts) is the same before and after. A stored
-- fqdn is normalised by the API (shared DomainList): "scheme://host[/path]" joined by commas,
-- the host in lower case and without a port, so a host is what stands between "://" and the
-- next "/". From here on services/applications.ts writes the rows with the fqdn.
INSERT INTO "ApplicationHost" ("applicationId", "host")
SELECT DISTINCT h."id", h."host" FROM (
    SELECT a."id", lower(split_part(regexp_replace(btrim(d."item"), '^[^/]*://', ''), '/', 1)) AS "host"
      FROM "Application" a CROSS JOIN LATERAL regexp_split_to_table(a."fqdn", ',') AS d("item")
     WHERE a."fqdn" IS NOT NULL
) h WHERE h."host" <> ''
ON CONFLICT DO NOTHING;
