import type { ServiceTemplate } from "@capstan/shared";
import { builtInCatalog, templateSummary, type LoadedTemplates, type Template } from "../templates/index.js";

export interface TemplateFilter {
  category?: string | undefined;
  tag?: string | undefined;
  search?: string | undefined;
}

/**
 * The templates a team can create services from: the built-in catalog (control-plane/templates),
 * in name order. Every member of the team may browse it (nothing in it is the team's).
 */
export class ServiceTemplateService {
  constructor(private readonly builtIn: () => Promise<LoadedTemplates> = builtInCatalog) {}

  async list(filter: TemplateFilter): Promise<ServiceTemplate[]> {
    const { templates } = await this.builtIn();
    return templates
      .filter((t) => matches(t, filter))
      .map((t) => listing(t, "built-in"))
      .sort((a, b) => a.name.localeCompare(b.name));
  }
}

function matches(t: Template, f: TemplateFilter): boolean {
  const lower = (s: string) => s.toLowerCase();
  if (f.category && lower(t.header.category ?? "") !== lower(f.category)) return false;
  if (f.tag && !t.header.tags.some((tag) => lower(tag) === lower(f.tag!))) return false;
  if (f.search) {
    const text = lower([t.name, t.header.slogan, ...t.header.tags].join(" "));
    if (!lower(f.search).split(/\s+/).every((w) => text.includes(w))) return false;
  }
  return true;
}

function listing(t: Template, source: string): ServiceTemplate {
  const summary = templateSummary(t);
  return { ...summary, tags: summary.tags.join(","), source };
}
