-- AlterTable
ALTER TABLE "Team" ADD COLUMN     "allowMemberBindMounts" BOOLEAN NOT NULL DEFAULT false;
