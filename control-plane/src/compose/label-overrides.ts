import { isAlias, isNode, parse, parseDocument, stringify, visit } from "yaml";
import { Invalid } from "../domain/errors.js";
import { LABEL_KEY } from "./schema.js";

/**
 * Label overrides (spec 4.15): a user's own labels for a service container, stored as YAML (a
 * map of label key to value) and merged over the labels the platform generates when the compose
 * file is rendered; the user's value wins a collision. Keys the platform owns are dropped, not
 * refused, and the caller is told which. What the proxy does with them: the `proxy.*` namespace
 * of docs/proxy-labels.md (shared/src/protocol/proxy-labels.ts).
 *
 * Pure functions, used by the service render path (services/services: applyLabelOverrides)
 * and the GET/PUT/DELETE /service-applications|service-databases/{uuid}/label-overrides routes.
 */

/** The field errors are reported under: the PUT body's `yaml`. */
export const LABEL_OVERRIDES_FIELD = "yaml";

export const LABEL_OVERRIDE_LIMITS = {
  /** Bytes of YAML accepted. */
  bytes: 64 * 1024,
  labels: 256,
  valueChars: 4096,
} as const;

/** Prefixes no user label may carry: the platform's own, and compose's (it would misread its project). */
const RESERVED = ["capstan.", "com.docker.compose."] as const;

export function isReservedOverride(key: string): boolean {
  const k = key.toLowerCase();
  return RESERVED.some((p) => k.startsWith(p));
}

export interface LabelOverrides {
  /** The labels to apply, reserved ones removed; values exactly as written (no variables). */
  labels: Record<string, string>;
  /** Keys dropped for their reserved prefix, in the order written. */
  dropped: string[];
}

const fail = (reasons: string[]): never => {
  throw new Invalid({ [LABEL_OVERRIDES_FIELD]: reasons.slice(0, 20) });
};

/**
 * Checks the stored or submitted YAML. Empty text (or only comments) is no overrides. Throws
 * Invalid {yaml} for YAML errors, anything but a flat map of scalars, bad keys, values over the
 * limit, aliases and tags. Values are literal: the render path writes them escaped (`$$`), so a
 * `$VAR` in one is never interpolated.
 */
export function parseLabelOverrides(yaml: string): LabelOverrides {
  if (typeof yaml !== "string") return fail(["send the label overrides as a YAML string"]);
  const bytes = Buffer.byteLength(yaml, "utf8");
  if (bytes > LABEL_OVERRIDE_LIMITS.bytes) fail([`the label overrides are ${bytes} bytes; the limit is ${LABEL_OVERRIDE_LIMITS.bytes}`]);
  if (yaml.includes("\u0000")) fail(["the label overrides contain NUL characters"]);
  let data: unknown;
  try {
    const doc = parseDocument(yaml, { uniqueKeys: true, prettyErrors: true, resolveKnownTags: false, strict: true });
    const problems = [...doc.errors, ...doc.warnings].map((e) => `YAML: ${(e.message.split("\n")[0] ?? "").replace(/:$/, "")}`);
    if (problems.length) fail(problems);
    let refused: string | null = null;
    visit(doc, {
      Node(_key, node) {
        // No anchors or aliases at all: a flat map needs none, and none means no expansion.
        if (isAlias(node)) refused ??= "YAML aliases are not supported here";
        else if (isNode(node) && node.tag && !/^tag:yaml\.org,2002:(str|int|float|bool|null|map)$/.test(node.tag)) refused ??= `YAML tag ${node.tag} is not supported`;
      },
    });
    if (refused) fail([refused]);
    data = doc.toJS({ maxAliasCount: 0 });
  } catch (err) {
    if (err instanceof Invalid) throw err;
    fail([`YAML: ${((err as Error).message.split("\n")[0] ?? "").replace(/:$/, "")}`]);
  }
  if (data === null || data === undefined) return { labels: {}, dropped: [] };
  if (typeof data !== "object" || Array.isArray(data)) return fail(["use a map of label: value"]);

  const labels: Record<string, string> = {};
  const dropped: string[] = [];
  const reasons: string[] = [];
  const entries = Object.entries(data as Record<string, unknown>);
  for (const [key, value] of entries) {
    const shown = JSON.stringify(key.slice(0, 80));
    if (!LABEL_KEY.test(key)) {
      reasons.push(`${shown} is not a valid label key (letters, digits, . _ / -, at most 255)`);
      continue;
    }
    if (isReservedOverride(key)) {
      dropped.push(key);
      continue;
    }
    if (value !== null && typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
      reasons.push(`${key}: use a string, number or boolean`);
      continue;
    }
    const text = value === null ? "" : String(value);
    if (text.length > LABEL_OVERRIDE_LIMITS.valueChars) {
      reasons.push(`${key}: the value is ${text.length} characters; the limit is ${LABEL_OVERRIDE_LIMITS.valueChars}`);
      continue;
    }
    labels[key] = text;
  }
  if (Object.keys(labels).length > LABEL_OVERRIDE_LIMITS.labels) reasons.push(`at most ${LABEL_OVERRIDE_LIMITS.labels} labels`);
  if (reasons.length) fail(reasons);
  return { labels, dropped };
}

/**
 * The labels a container gets: the generated ones with the user's over them (the user wins a
 * collision, spec 4.15). A reserved key in `overrides` is ignored even here, so a caller that
 * skipped parseLabelOverrides still cannot replace the platform's labels.
 */
export function mergeLabels(generated: Readonly<Record<string, string>>, overrides: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = { ...generated };
  for (const [k, v] of Object.entries(overrides)) if (!isReservedOverride(k)) out[k] = v;
  return out;
}

// w5/svcextras: the service render path

const plainMap = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A compose service's `labels` (list of `k=v` or map) as a map; values as text. */
function labelMap(labels: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  if (Array.isArray(labels)) {
    for (const item of labels) {
      if (typeof item !== "string") continue;
      const eq = item.indexOf("=");
      if (eq === -1) out[item] = "";
      else out[item.slice(0, eq)] = item.slice(eq + 1);
    }
  } else if (plainMap(labels)) {
    for (const [k, v] of Object.entries(labels)) out[k] = v === null || v === undefined ? "" : String(v);
  }
  return out;
}

/**
 * A rendered service compose file (templates/render.ts: every `$` already written `$$`) with
 * each compose service's overrides merged over its labels (mergeLabels: the user wins, reserved
 * keys never). Override values are literal, so their `$` are escaped the same way. A file
 * without overrides comes back as it was, byte for byte.
 */
export function applyLabelOverrides(compose: string, byService: Readonly<Record<string, Readonly<Record<string, string>>>>): string {
  const wanted = Object.entries(byService).filter(([, labels]) => Object.keys(labels).length > 0);
  if (wanted.length === 0 || compose === "") return compose;
  const doc = parse(compose, { maxAliasCount: 0 }) as unknown;
  if (!plainMap(doc) || !plainMap(doc.services)) return compose;
  const services = doc.services;
  for (const [name, labels] of wanted) {
    const service = services[name];
    if (!plainMap(service)) continue;
    const escaped = Object.fromEntries(Object.entries(labels).map(([k, v]) => [k, v.split("$").join("$$")]));
    service.labels = mergeLabels(labelMap(service.labels), escaped);
  }
  return stringify(doc, { aliasDuplicateObjects: false, lineWidth: 0 });
}
