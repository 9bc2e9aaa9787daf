-- RedefineTables
PRAGMA defer_foreign_keys=ON;
PRAGMA foreign_keys=OFF;
CREATE TABLE "new_GitApp" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "uuid" TEXT NOT NULL,
    "teamId" INTEGER NOT NULL,
    "name" TEXT NOT NULL,
    "appId" BIGINT NOT NULL,
    "installationId" BIGINT NOT NULL,
    "privateKey" TEXT NOT NULL,
    "apiUrl" TEXT NOT NULL,
    "htmlUrl" TEXT NOT NULL,
    "webhookSecret" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "GitApp_teamId_fkey" FOREIGN KEY ("teamId") REFERENCES "Team" ("id") ON DELETE CASCADE ON UPDATE CASCADE
);
INSERT INTO "new_GitApp" ("apiUrl", "appId", "createdAt", "htmlUrl", "id", "installationId", "name", "privateKey", "teamId", "updatedAt", "uuid", "webhookSecret") SELECT "apiUrl", "appId", "createdAt", "htmlUrl", "id", "installationId", "name", "privateKey", "teamId", "updatedAt", "uuid", "webhookSecret" FROM "GitApp";
DROP TABLE "GitApp";
ALTER TABLE "new_GitApp" RENAME TO "GitApp";
CREATE UNIQUE INDEX "GitApp_uuid_key" ON "GitApp"("uuid");
CREATE INDEX "GitApp_teamId_id_idx" ON "GitApp"("teamId", "id");
PRAGMA foreign_keys=ON;
PRAGMA defer_foreign_keys=OFF;
