/**
 * Writes the compose file the agent runs. The output is JSON, which every compose
 * implementation reads as YAML (PyYAML for docker-compose 1.29, go-yaml for v2) with no
 * YAML 1.1/1.2 ambiguity ("no", "0755" stay strings). Two things are added on top of JSON:
 *  - every `$` in a value is doubled, so compose interpolates nothing: variables were already
 *    resolved from the application's own environment, and the agent's is never read;
 *  - characters outside printable ASCII are written as \uXXXX escapes (pairs that form one
 *    character stay raw UTF-8): PyYAML refuses C1 controls in a stream and would fold U+2028
 *    inside quoted scalars.
 */
export function renderCompose(doc: unknown): string {
  const json = JSON.stringify(escapeDollars(doc), null, 2);
  return `${json.replace(/[\u007f-\ud7ff\ue000-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)}\n`;
}

function escapeDollars(v: unknown): unknown {
  if (typeof v === "string") return v.split("$").join("$$");
  if (Array.isArray(v)) return v.map(escapeDollars);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, val]) => [k, escapeDollars(val)]));
  return v;
}
