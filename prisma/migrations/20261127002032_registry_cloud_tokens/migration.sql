-- AlterTable
ALTER TABLE "Registry" ADD COLUMN "token" TEXT;
ALTER TABLE "Registry" ADD COLUMN "tokenClaimedAt" DATETIME;
ALTER TABLE "Registry" ADD COLUMN "tokenError" TEXT;
ALTER TABLE "Registry" ADD COLUMN "tokenExpiresAt" DATETIME;
