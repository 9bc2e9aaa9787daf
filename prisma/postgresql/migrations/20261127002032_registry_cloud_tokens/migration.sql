-- AlterTable
ALTER TABLE "Registry" ADD COLUMN     "token" TEXT,
ADD COLUMN     "tokenClaimedAt" TIMESTAMP(3),
ADD COLUMN     "tokenError" TEXT,
ADD COLUMN     "tokenExpiresAt" TIMESTAMP(3);
