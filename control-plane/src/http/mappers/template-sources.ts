import { TemplateSyncStatus, type TemplateSource, type TemplateSourceDetail } from "@capstan/shared";
import { storedTemplates, type TemplateSourceRecord } from "../../services/template-sources/index.js";
import type { Out } from "./types.js";
import { iso } from "../dto.js";

/** The token is never mapped: has_auth_token says whether one is set. */
export const templateSourceDto = (s: TemplateSourceRecord): Out<typeof TemplateSource> => ({
  uuid: s.uuid,
  name: s.name,
  slug: s.slug,
  repository_url: s.repositoryUrl,
  branch: s.branch,
  folder_path: s.folderPath,
  is_enabled: s.isEnabled,
  has_auth_token: s.authToken !== null,
  sync_status: TemplateSyncStatus.parse(s.syncStatus),
  sync_error: s.syncError,
  last_synced_at: s.lastSyncedAt ? iso(s.lastSyncedAt) : null,
  synced_commit: s.syncedCommit,
  template_count: s.templateCount,
  broken_count: storedTemplates(s).broken.length,
  created_at: iso(s.createdAt),
  updated_at: iso(s.updatedAt),
});

/** The detail: the source and what its last sync found (templates that passed, broken ones with the reason, drafts). */
export const templateSourceDetailDto = (s: TemplateSourceRecord): Out<typeof TemplateSourceDetail> => {
  const stored = storedTemplates(s);
  return {
    ...templateSourceDto(s),
    templates: stored.templates.map((t) => ({ name: t.name, slogan: t.slogan, tags: t.tags.join(","), logo: t.logo, documentation: t.documentation, lint: "ok" as const })),
    broken_templates: stored.broken.map((b) => ({ file: b.file, lint: b.reason })),
    ignored_templates: stored.ignored,
  };
};
