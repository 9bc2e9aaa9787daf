-- AlterTable
ALTER TABLE "TemplateSource" ADD COLUMN     "templateFiles" TEXT NOT NULL DEFAULT '{}';

-- AlterTable
ALTER TABLE "ServiceComponent" ADD COLUMN     "labelOverrides" TEXT NOT NULL DEFAULT '';
