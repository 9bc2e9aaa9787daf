-- Paid features per team (shared/src/api/features.ts, docs/features.md).
-- AlterTable
ALTER TABLE "Team" ADD COLUMN     "features" TEXT NOT NULL DEFAULT '';

-- The root team (the one the first start created) gets every feature, as new root teams do.
UPDATE "Team" SET "features" = '*'
 WHERE "id" = (SELECT MIN("id") FROM "Team" WHERE "name" = 'Root Team' AND "description" = 'Created on first start');
