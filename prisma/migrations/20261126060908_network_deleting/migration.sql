-- A network whose removal the server has not confirmed yet (issue 15; docs/networks.md).
-- Edited by hand from the generated script: ADD COLUMN with a constant default instead of
-- Prisma's "new_Network" redefinition (the column order does not matter to Prisma), so the
-- table, its indexes and anything later attached to it stay as they are.
ALTER TABLE "Network" ADD COLUMN "deleting" BOOLEAN NOT NULL DEFAULT false;
