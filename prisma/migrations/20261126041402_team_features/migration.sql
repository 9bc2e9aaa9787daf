-- Paid features per team (shared/src/api/features.ts, docs/features.md).
-- Edited by hand from the generated script: Prisma redefines the table ("new_Team" copy) to keep
-- its column order, and SQLite drops a table's triggers with the table, which would lose the
-- TeamVersion triggers of "Team" (20261122025000_team_version). ADD COLUMN with a constant
-- default keeps the table and its triggers; the column order does not matter to Prisma.
ALTER TABLE "Team" ADD COLUMN "features" TEXT NOT NULL DEFAULT '';

-- The root team (the one the first start created) gets every feature, as new root teams do.
UPDATE "Team" SET "features" = '*'
 WHERE "id" = (SELECT MIN("id") FROM "Team" WHERE "name" = 'Root Team' AND "description" = 'Created on first start');
