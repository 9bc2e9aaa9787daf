-- CreateTable
CREATE TABLE "ServerConnectivity" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "serverId" INTEGER NOT NULL,
    "state" TEXT NOT NULL,
    "at" DATETIME NOT NULL,
    CONSTRAINT "ServerConnectivity_serverId_fkey" FOREIGN KEY ("serverId") REFERENCES "Server" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);

-- CreateIndex
CREATE INDEX "ServerConnectivity_serverId_id_idx" ON "ServerConnectivity"("serverId", "id");

-- Hand-written below (Prisma's schema does not model triggers): every change of a server's
-- status to reachable or unreachable (an agent's hello, its disconnect, the heartbeat's stale
-- sweep, any later writer) records one transition in the statement that makes it, so the hello
-- path runs no extra query. `at` is the server's lastSeenAt after the change: the hello's time,
-- the disconnect's time, or for the stale sweep the last time a replica vouched for the agent.
-- Retention: the newest 200 transitions per server (older ones are deleted by the same trigger,
-- through the ("serverId", "id") index); a server's rows go with it (ON DELETE CASCADE).
-- Caution: SQLite drops a table's triggers with the table. A later migration that redefines
-- "Server" (Prisma's "new_Server" copy) must create this trigger again.

CREATE TRIGGER "ServerConnectivity_transition" AFTER UPDATE OF "status" ON "Server"
    WHEN OLD."status" IS NOT NEW."status" AND NEW."status" IN ('reachable', 'unreachable') AND NEW."lastSeenAt" IS NOT NULL BEGIN
    INSERT INTO "ServerConnectivity" ("serverId", "state", "at") VALUES (NEW."id", NEW."status", NEW."lastSeenAt");
    DELETE FROM "ServerConnectivity" WHERE "serverId" = NEW."id" AND "id" <= (
        SELECT "id" FROM "ServerConnectivity" WHERE "serverId" = NEW."id" ORDER BY "id" DESC LIMIT 1 OFFSET 200);
END;

-- The state each known server is in now starts its history.
INSERT INTO "ServerConnectivity" ("serverId", "state", "at")
    SELECT "id", "status", "lastSeenAt" FROM "Server" WHERE "status" IN ('reachable', 'unreachable') AND "lastSeenAt" IS NOT NULL ORDER BY "id";
