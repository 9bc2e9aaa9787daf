-- AlterTable
-- Written as ADD COLUMN (SQLite takes a NOT NULL column with a constant default) instead of the
-- table redefinition the generator wrote: dropping and renaming "Team" would drop the
-- TeamVersion triggers on it (20261122025000_team_version).
ALTER TABLE "Team" ADD COLUMN "allowMemberBindMounts" BOOLEAN NOT NULL DEFAULT false;
