-- CreateTable
CREATE TABLE "ServerConnectivity" (
    "id" SERIAL NOT NULL,
    "serverId" INTEGER NOT NULL,
    "state" TEXT NOT NULL,
    "at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "ServerConnectivity_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "ServerConnectivity_serverId_id_idx" ON "ServerConnectivity"("serverId", "id");

-- AddForeignKey
ALTER TABLE "ServerConnectivity" ADD CONSTRAINT "ServerConnectivity_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Hand-written below (see the SQLite twin): one row per change of a server's status to
-- reachable or unreachable, written by a row trigger in the statement that changes it; the
-- newest 200 per server are kept.

CREATE FUNCTION "ServerConnectivity_record"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO "ServerConnectivity" ("serverId", "state", "at") VALUES (NEW."id", NEW."status", NEW."lastSeenAt");
    DELETE FROM "ServerConnectivity" WHERE "serverId" = NEW."id" AND "id" <= (
        SELECT "id" FROM "ServerConnectivity" WHERE "serverId" = NEW."id" ORDER BY "id" DESC LIMIT 1 OFFSET 200);
    RETURN NULL;
END;
$$;

CREATE TRIGGER "ServerConnectivity_transition" AFTER UPDATE OF "status" ON "Server"
    FOR EACH ROW WHEN (OLD."status" IS DISTINCT FROM NEW."status" AND NEW."status" IN ('reachable', 'unreachable') AND NEW."lastSeenAt" IS NOT NULL)
    EXECUTE FUNCTION "ServerConnectivity_record"();

INSERT INTO "ServerConnectivity" ("serverId", "state", "at")
    SELECT "id", "status", "lastSeenAt" FROM "Server" WHERE "status" IN ('reachable', 'unreachable') AND "lastSeenAt" IS NOT NULL ORDER BY "id";
