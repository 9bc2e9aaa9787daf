import { constants } from "node:fs";
import { open, readdir } from "node:fs/promises";
import { join } from "node:path";
import { LIMITS } from "../compose/index.js";
import { headerFields } from "./header.js";
import { parseTemplate } from "./template.js";
import type { Template } from "./types.js";

/**
 * Loads every template of one folder: the built-in catalog, and (later) a template source's
 * git checkout. The folder is read flat (as the catalog's templates/compose is laid out), each
 * `*.yaml` / `*.yml` file is one template named by its file name. Every file ends up in exactly
 * one list: loaded, ignored by its own header (`# ignore: true`), or broken with a reason.
 */

export interface TemplateDirLimits {
  /** Bytes of one template file (the compose checker's own limit). */
  fileBytes: number;
  /** Template files in the folder: more fails the whole load (a partial catalog would look complete). */
  files: number;
  /** Bytes of all template files together. */
  totalBytes: number;
}

export const TEMPLATE_DIR_LIMITS: TemplateDirLimits = {
  fileBytes: LIMITS.rawBytes,
  files: 1000,
  totalBytes: 64 * 1024 * 1024,
};

export interface BrokenTemplate {
  file: string;
  reason: string;
}

export interface LoadedTemplates {
  templates: Template[];
  broken: BrokenTemplate[];
  /** Files whose header says `ignore: true` (the catalog keeps drafts that way). */
  ignored: string[];
}

/** The folder as a whole is over a limit, or cannot be read. */
export class TemplateDirError extends Error {
  override name = "TemplateDirError";
}

const TEMPLATE_FILE = /\.ya?ml$/i;
const utf8 = new TextDecoder("utf-8", { fatal: true });

export async function loadTemplateDir(dir: string, limits: TemplateDirLimits = TEMPLATE_DIR_LIMITS): Promise<LoadedTemplates> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    throw new TemplateDirError(`cannot read the template folder: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  const files = entries.filter((e) => TEMPLATE_FILE.test(e.name)).map((e) => e.name).sort();
  if (files.length > limits.files) throw new TemplateDirError(`the folder has ${files.length} template files; the limit is ${limits.files}`);

  const out: LoadedTemplates = { templates: [], broken: [], ignored: [] };
  const seen = new Map<string, string>();
  let total = 0;
  for (const file of files) {
    const name = file.replace(TEMPLATE_FILE, "");
    const read = await readTemplateFile(join(dir, file), limits.fileBytes);
    if ("reason" in read) {
      out.broken.push({ file, reason: read.reason });
      continue;
    }
    total += read.bytes;
    if (total > limits.totalBytes) throw new TemplateDirError(`the template files hold more than ${limits.totalBytes} bytes`);
    const earlier = seen.get(name);
    if (earlier !== undefined) {
      out.broken.push({ file, reason: `${earlier} already defines template ${name}` });
      continue;
    }
    seen.set(name, file);
    // A draft the catalog keeps out (`# ignore: true`) is not checked: drafts are often unfinished.
    if (headerFields(read.text).fields.ignore === "true") {
      out.ignored.push(file);
      continue;
    }
    const parsed = parseTemplate(name, read.text);
    if (!parsed.ok) out.broken.push({ file, reason: parsed.reason });
    else out.templates.push(parsed.template);
  }
  return out;
}

/**
 * One file's text. Opened without following symlinks: a checkout's symlink could point
 * anywhere on the control plane's disk, and its target must not become a template.
 */
async function readTemplateFile(path: string, maxBytes: number): Promise<{ text: string; bytes: number } | { reason: string }> {
  let handle;
  try {
    handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ELOOP") return { reason: "a symbolic link (not followed)" };
    return { reason: `cannot be read (${code ?? "error"})` };
  }
  try {
    const st = await handle.stat();
    if (!st.isFile()) return { reason: "not a regular file" };
    if (st.size > maxBytes) return { reason: `${st.size} bytes; the limit is ${maxBytes}` };
    // Read one byte more than allowed: a file that grew since stat is still caught.
    const buf = Buffer.alloc(maxBytes + 1);
    const { bytesRead } = await handle.read(buf, 0, maxBytes + 1, 0);
    if (bytesRead > maxBytes) return { reason: `more than ${maxBytes} bytes` };
    try {
      return { text: utf8.decode(buf.subarray(0, bytesRead)), bytes: bytesRead };
    } catch {
      return { reason: "not UTF-8 text" };
    }
  } finally {
    await handle.close();
  }
}
