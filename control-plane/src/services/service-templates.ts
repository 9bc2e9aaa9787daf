import type { TemplateSummary } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { builtInCatalog, templateSummary, type LoadedTemplates } from "../templates/index.js";
import { storedTemplates } from "./template-sources/index.js";

export interface TemplateFilter {
  category?: string | undefined;
  tag?: string | undefined;
  search?: string | undefined;
}

/** Where a template comes from: the built-in catalog, or a template source's slug. */
export const BUILT_IN = "built-in";

/** A template offered to the team: the name POST /services will take, where it comes from, its header. */
export interface OfferedTemplate {
  name: string;
  source: string;
  template: TemplateSummary;
}

/**
 * The templates a team can create services from (docs/templates.md): the built-in catalog and
 * what the team's enabled template sources found at their last sync, in name order. A source's
 * template is named `slug/name` when the built-in catalog or another enabled source has a
 * template of the same name, so every name in the list is what POST /services will take.
 */
export class ServiceTemplateService {
  constructor(
    private readonly db: Db,
    private readonly builtIn: () => Promise<LoadedTemplates> = builtInCatalog,
  ) {}

  async list(scope: TeamScope, filter: TemplateFilter): Promise<OfferedTemplate[]> {
    const builtIn = (await this.builtIn()).templates.map((t) => ({ source: BUILT_IN, template: templateSummary(t) }));
    const sources = await this.db.templateSource.findMany({
      where: { ...scope.inTeam, isEnabled: true, templateCount: { gt: 0 } },
      orderBy: { id: "asc" },
      select: { slug: true, templates: true, brokenTemplates: true, ignoredTemplates: true },
    });
    const fromSources = sources.flatMap((s) => storedTemplates(s).templates.map((template) => ({ source: s.slug, template })));
    const all = [...builtIn, ...fromSources];
    const uses = new Map<string, number>();
    for (const { template } of all) uses.set(template.name, (uses.get(template.name) ?? 0) + 1);
    return all
      .filter(({ template }) => matches(template, filter))
      .map(({ source, template }) => {
        const name = source !== BUILT_IN && uses.get(template.name)! > 1 ? `${source}/${template.name}` : template.name;
        return { name, source, template };
      })
      .sort((a, b) => a.name.localeCompare(b.name) || a.source.localeCompare(b.source));
  }
}

function matches(t: TemplateSummary, f: TemplateFilter): boolean {
  const lower = (s: string) => s.toLowerCase();
  if (f.category && lower(t.category ?? "") !== lower(f.category)) return false;
  if (f.tag && !t.tags.some((tag) => lower(tag) === lower(f.tag!))) return false;
  if (f.search) {
    const text = lower([t.name, t.slogan, ...t.tags].join(" "));
    if (!lower(f.search).split(/\s+/).every((w) => text.includes(w))) return false;
  }
  return true;
}
