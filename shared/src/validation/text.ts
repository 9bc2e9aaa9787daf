import { z } from "zod";

/**
 * One rule for control characters in everything a client sends (issue 15): no string of a
 * request body, path or query may hold a C0 control (U+0000-U+001F), DEL (U+007F) or a C1
 * control (U+0080-U+009F). A NUL cannot be stored in PostgreSQL or passed to a process, a
 * newline in a host name splits a proxy or compose file, and none of them belongs in a name.
 *
 * Multi-line text (environment values, compose YAML, Dockerfiles, private keys, descriptions)
 * is marked with `multiline()` in its schema and may hold tab, line feed and carriage return,
 * but no other control character (YAML, PEM and Dockerfiles have no use for them either).
 *
 * The rule is applied by the HTTP edge to every request (control-plane/src/http/app.ts), guided
 * by the route's zod schemas: a field needs no refinement of its own, so a new field is covered
 * the day it is added, and single-line is the default.
 */

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// eslint-disable-next-line no-control-regex
const CONTROL_IN_TEXT = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;

export const CONTROL_CHARACTERS_MESSAGE = "Must not contain control characters.";
export const CONTROL_CHARACTERS_IN_TEXT_MESSAGE = "Must not contain control characters other than tab, line feed and carriage return.";

/** Whether a single-line value holds a control character. */
export const hasControlCharacter = (v: string): boolean => CONTROL.test(v);
/** Whether a multi-line value holds a control character other than tab, LF and CR. */
export const hasControlCharacterInText = (v: string): boolean => CONTROL_IN_TEXT.test(v);

const MULTILINE = "x-capstan-multiline";

/** Marks a string schema as multi-line text: tab, LF and CR are allowed in it (see above). */
export function multiline<T extends z.ZodType>(schema: T): T {
  return schema.meta({ [MULTILINE]: true }) as T;
}

export interface TextIssue {
  path: (string | number)[];
  message: string;
}

/** At most this many issues are reported for one value (a 1 MiB array of bad strings stays one short answer). */
const MAX_ISSUES = 20;

const NONE: Node[] = [];

interface Node {
  schema: z.ZodType;
  multiline: boolean;
}

type Def = {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  out?: z.ZodType;
  getter?: () => z.ZodType;
  options?: z.ZodType[];
  left?: z.ZodType;
  right?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  catchall?: z.ZodType;
  valueType?: z.ZodType;
  element?: z.ZodType;
  items?: z.ZodType[];
  rest?: z.ZodType | null;
};

const defOf = (s: z.ZodType) => (s as unknown as { _zod: { def: Def } })._zod.def;
const marked = (s: z.ZodType) => z.globalRegistry.get(s)?.[MULTILINE] === true;

/** The schemas a value at this place may be checked against, wrappers removed (several for unions). */
function resolve(schema: z.ZodType | undefined, multi = false, out: Node[] = [], depth = 0): Node[] {
  if (!schema || depth > 32) return out;
  const m = multi || marked(schema);
  const def = defOf(schema);
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "nonoptional":
    case "readonly":
    case "catch":
      return resolve(def.innerType, m, out, depth + 1);
    case "pipe":
      // z.preprocess is a pipe from a transform: the shape is on the way out.
      return resolve(defOf(def.in!).type === "transform" ? def.out : def.in, m, out, depth + 1);
    case "lazy":
      return resolve(def.getter!(), m, out, depth + 1);
    case "union":
      for (const o of def.options ?? []) resolve(o, m, out, depth + 1);
      return out;
    case "intersection":
      resolve(def.left, m, out, depth + 1);
      return resolve(def.right, m, out, depth + 1);
    default:
      out.push({ schema, multiline: m });
      return out;
  }
}

function childrenOf(nodes: Node[], key: string | number, isArray: boolean): Node[] {
  const out: Node[] = [];
  for (const n of nodes) {
    const def = defOf(n.schema);
    if (isArray) {
      if (def.type === "array") resolve(def.element, false, out);
      else if (def.type === "tuple") resolve(typeof key === "number" && def.items && key < def.items.length ? def.items[key] : (def.rest ?? undefined), false, out);
    } else if (def.type === "object") {
      // Own fields only: a client's "__proto__" or "constructor" must not find Object.prototype's.
      const field = def.shape && Object.hasOwn(def.shape, key) ? def.shape[key as string] : undefined;
      resolve(field ?? def.catchall, false, out);
    } else if (def.type === "record") {
      resolve(def.valueType, false, out);
    }
  }
  return out;
}

/**
 * The control-character problems of a value a client sent, checked against the schema that
 * will parse it: object keys and strings are single-line unless the schema marks the field
 * multiline(). Iterative, so a deeply nested body cannot exhaust the stack.
 */
export function controlCharacterIssues(schema: z.ZodType | undefined, value: unknown): TextIssue[] {
  interface Entry {
    value: unknown;
    nodes: Node[];
    parent: Entry | null;
    key: string | number | null;
  }
  // Paths are built only for a problem, from parent links: copying them at every level would
  // make a deeply nested body cost quadratic time.
  const pathOf = (e: Entry, last?: string): (string | number)[] => {
    const path: (string | number)[] = last === undefined ? [] : [last];
    for (let at: Entry | null = e; at && at.key !== null; at = at.parent) path.push(at.key);
    return path.reverse();
  };
  const issues: TextIssue[] = [];
  const stack: Entry[] = [{ value, nodes: resolve(schema), parent: null, key: null }];
  while (stack.length && issues.length < MAX_ISSUES) {
    const e = stack.pop()!;
    const v = e.value;
    if (typeof v === "string") {
      const multi = e.nodes.some((n) => n.multiline);
      if (multi ? CONTROL_IN_TEXT.test(v) : CONTROL.test(v)) {
        issues.push({ path: pathOf(e), message: multi ? CONTROL_CHARACTERS_IN_TEXT_MESSAGE : CONTROL_CHARACTERS_MESSAGE });
      }
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], nodes: e.nodes.length ? childrenOf(e.nodes, i, true) : NONE, parent: e, key: i });
    } else if (v !== null && typeof v === "object") {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) {
        const k = keys[i]!;
        if (CONTROL.test(k)) {
          issues.push({ path: pathOf(e, k), message: "The field name must not contain control characters." });
          continue;
        }
        stack.push({ value: (v as Record<string, unknown>)[k], nodes: e.nodes.length ? childrenOf(e.nodes, k, false) : NONE, parent: e, key: k });
      }
    }
  }
  return issues;
}
