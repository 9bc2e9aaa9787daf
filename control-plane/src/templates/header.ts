import { TemplateHeader } from "@capstan/shared";

/**
 * The header of a template: its leading comment lines of the form `# key: value` (the
 * catalog's format: documentation, slogan, tags, logo, category, port, ignore). Blank lines
 * may sit between them; the first line that is neither blank nor a comment ends the header.
 * Other comment lines, and keys Capstan does not use (the catalog has a few, such as
 * minversion), are skipped: a header written for a newer catalog still parses.
 */

const KNOWN = new Set(Object.keys(TemplateHeader.shape));
const LINE = /^#\s*([A-Za-z_]+)\s*:\s?(.*)$/;

export type HeaderResult = { ok: true; header: TemplateHeader } | { ok: false; problems: string[] };

/** The raw `key: value` pairs of the header (values trimmed), and repeated keys. */
export function headerFields(text: string): { fields: Record<string, string>; repeated: string[] } {
  const fields: Record<string, string> = {};
  const repeated: string[] = [];
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "") continue;
    if (!line.startsWith("#")) break;
    const m = LINE.exec(line);
    if (!m) continue;
    const key = m[1]!.toLowerCase();
    if (!KNOWN.has(key)) continue;
    if (Object.hasOwn(fields, key)) repeated.push(key);
    // The catalog quotes some values (`# slogan: "..."`): one pair of surrounding quotes is not part of the value.
    fields[key] = m[2]!.trim().replace(/^(["'])(.*)\1$/, "$2");
  }
  return { fields, repeated };
}

/** The header, checked against the shared schema; problems name the header key. */
export function parseHeader(text: string): HeaderResult {
  const { fields, repeated } = headerFields(text);
  const problems = repeated.map((k) => `header: ${k} is given twice`);
  // An empty value is as good as no value for the optional keys ("# logo:" in some templates).
  const present = Object.fromEntries(Object.entries(fields).filter(([k, v]) => v !== "" || k === "slogan" || k === "documentation"));
  const r = TemplateHeader.safeParse(present);
  if (!r.success) {
    for (const issue of r.error.issues) {
      const key = String(issue.path[0] ?? "");
      problems.push(!Object.hasOwn(present, key) ? `header: # ${key}: is missing` : `header: ${key}: ${issue.message}`);
    }
  }
  return problems.length || !r.success ? { ok: false, problems } : { ok: true, header: r.data };
}
