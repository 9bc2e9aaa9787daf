/**
 * Compose-style variable interpolation (`$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
 * `${VAR:?error}`, `${VAR?error}`, `${VAR:+alt}`, `${VAR+alt}`, `$$` for a literal `$`),
 * resolved by the control plane from the application's own variables only. The file the agent
 * runs has every `$` escaped, so compose never reads the agent's environment.
 */

export class TemplateError extends Error {
  override name = "TemplateError";
}

type Part =
  | { kind: "text"; text: string }
  | { kind: "var"; name: string; op: "" | ":-" | "-" | ":?" | "?" | ":+" | "+"; arg: Part[] };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;
/** Two-character operators first: ":-" must not be read as ":" followed by "-". */
const OPERATORS = [":-", ":?", ":+", "-", "?", "+"] as const;
/** Nesting of `${A:-${B:-...}}`; compose files never need more, and it bounds recursion. */
const MAX_DEPTH = 8;

function parse(src: string, depth: number): Part[] {
  if (depth > MAX_DEPTH) throw new TemplateError(`variables nested more than ${MAX_DEPTH} deep`);
  const parts: Part[] = [];
  let text = "";
  let i = 0;
  while (i < src.length) {
    const ch = src[i]!;
    if (ch !== "$") {
      text += ch;
      i++;
      continue;
    }
    const next = src[i + 1];
    if (next === "$") {
      text += "$";
      i += 2;
      continue;
    }
    if (next === "{") {
      const end = closingBrace(src, i + 2);
      if (end < 0) throw new TemplateError(`unterminated "\${" in ${JSON.stringify(clip(src))}`);
      const body = src.slice(i + 2, end);
      const name = NAME.exec(body)?.[0];
      if (!name) throw new TemplateError(`invalid variable "\${${clip(body)}}": use \${NAME} with letters, digits and _, or $$ for a literal $`);
      const rest = body.slice(name.length);
      const op = rest === "" ? "" : OPERATORS.find((o) => rest.startsWith(o));
      if (op === undefined) throw new TemplateError(`invalid variable "\${${clip(body)}}": after the name use :-, -, :?, ?, :+ or +`);
      if (text) parts.push({ kind: "text", text });
      text = "";
      parts.push({ kind: "var", name, op, arg: op === "" ? [] : parse(rest.slice(op.length), depth + 1) });
      i = end + 1;
      continue;
    }
    const name = NAME.exec(src.slice(i + 1))?.[0];
    if (!name) throw new TemplateError(`a "$" in ${JSON.stringify(clip(src))} does not start a variable: write $$ for a literal $`);
    if (text) parts.push({ kind: "text", text });
    text = "";
    parts.push({ kind: "var", name, op: "", arg: [] });
    i += 1 + name.length;
  }
  if (text) parts.push({ kind: "text", text });
  return parts;
}

/** Index of the `}` closing a `${` whose body starts at `from`, honouring nested `${...}`. */
function closingBrace(src: string, from: number): number {
  let depth = 0;
  for (let i = from; i < src.length; i++) {
    const ch = src[i];
    if (ch === "$" && src[i + 1] === "$") {
      i++;
    } else if (ch === "$" && src[i + 1] === "{") {
      depth++;
      i++;
    } else if (ch === "}") {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

const clip = (s: string) => (s.length > 60 ? `${s.slice(0, 57)}...` : s);

/** Throws TemplateError when `src` is not a valid template. */
export function checkTemplate(src: string): void {
  parse(src, 0);
}

/** Names of the variables `src` refers to (including those in defaults). */
export function variablesIn(src: string): string[] {
  const out = new Set<string>();
  const walk = (parts: Part[]) => {
    for (const p of parts) {
      if (p.kind === "var") {
        out.add(p.name);
        walk(p.arg);
      }
    }
  };
  walk(parse(src, 0));
  return [...out];
}

/** One variable reference of a template: its operator, and its argument when that is plain text. */
export interface Reference {
  name: string;
  op: "" | ":-" | "-" | ":?" | "?" | ":+" | "+";
  /** The default, message or alternative when it holds no variable; null otherwise (or without an operator). */
  literal: string | null;
}

/**
 * Every reference of `src`, nested ones included, in order. Template services read defaults
 * (`${DB:-app}`) and required inputs (`${KEY:?message}`) from it (control-plane/src/templates/).
 */
export function referencesIn(src: string): Reference[] {
  const out: Reference[] = [];
  const walk = (parts: Part[]) => {
    for (const p of parts) {
      if (p.kind !== "var") continue;
      const literal = p.op !== "" && p.arg.every((a) => a.kind === "text") ? p.arg.map((a) => (a.kind === "text" ? a.text : "")).join("") : null;
      out.push({ name: p.name, op: p.op, literal });
      walk(p.arg);
    }
  };
  walk(parse(src, 0));
  return out;
}

/**
 * Resolves `src` from `env`. Unset variables become "" (as compose does); `${VAR:?msg}` and
 * `${VAR?msg}` throw TemplateError with the author's message.
 */
export function interpolate(src: string, env: Readonly<Record<string, string>>): string {
  return render(parse(src, 0), env);
}

function render(parts: Part[], env: Readonly<Record<string, string>>): string {
  let out = "";
  for (const p of parts) {
    if (p.kind === "text") {
      out += p.text;
      continue;
    }
    const set = Object.hasOwn(env, p.name);
    const value = set ? env[p.name]! : undefined;
    const nonEmpty = value !== undefined && value !== "";
    switch (p.op) {
      case "":
        out += value ?? "";
        break;
      case ":-":
        out += nonEmpty ? value : render(p.arg, env);
        break;
      case "-":
        out += set ? value : render(p.arg, env);
        break;
      case ":?":
      case "?":
        if (p.op === ":?" ? !nonEmpty : !set) {
          const msg = render(p.arg, env);
          throw new TemplateError(`variable ${p.name} is required${msg ? `: ${msg}` : ""}`);
        }
        out += value;
        break;
      case ":+":
        out += nonEmpty ? render(p.arg, env) : "";
        break;
      case "+":
        out += set ? render(p.arg, env) : "";
        break;
    }
  }
  return out;
}
