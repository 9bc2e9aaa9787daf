import dockerignore from "@balena/dockerignore";
import { lstat, mkdir, readdir, readFile, realpath, rm, writeFile } from "node:fs/promises";
import { basename, dirname, isAbsolute, join, relative, resolve } from "node:path";
import { Readable } from "node:stream";
import { create as createTar } from "tar";

/** Directories never sent to the engine: the clone's history is not part of any image. */
const SKIP_TOP = new Set([".git"]);

/**
 * The .dockerignore rules of the context, as the docker CLI applies them: the Dockerfile and
 * .dockerignore itself are always sent. With exception rules (`!path`) excluded directories are
 * still walked, so an exception inside one can take effect.
 */
async function ignoreFilter(dir: string, dockerfile: string): Promise<(path: string, isDir: boolean) => boolean> {
  let text: string;
  try {
    text = await readFile(join(dir, ".dockerignore"), "utf8");
  } catch {
    return () => true;
  }
  // A CommonJS module: its factory is both module.exports and .default.
  const ig = dockerignore.default({ ignorecase: false }).add(text);
  const hasExceptions = text.split(/\r?\n/).some((l) => l.trim().startsWith("!"));
  const always = new Set([dockerfile.replace(/^\.\//, ""), ".dockerignore"]);
  return (path, isDir) => always.has(path) || !ig.ignores(path) || (isDir && hasExceptions);
}

/**
 * The build context as a tar stream read from disk as the engine consumes it (never whole in
 * memory), less what .dockerignore excludes. Symlinks are archived as links, not followed, so
 * a repository cannot pull host files into its image.
 */
export async function contextStream(dir: string, dockerfile = "Dockerfile"): Promise<Readable> {
  const keep = await ignoreFilter(dir, dockerfile);
  const entries = (await readdir(dir, { withFileTypes: true })).filter((e) => !SKIP_TOP.has(e.name) && keep(e.name, e.isDirectory())).map((e) => e.name).sort();
  if (entries.length === 0) throw new Error("the build context is empty");
  const pack = createTar(
    {
      cwd: dir,
      portable: true,
      follow: false,
      filter: (path, entry) => keep(path.replace(/^\.\//, ""), "isDirectory" in entry && typeof entry.isDirectory === "function" ? entry.isDirectory() : false),
    },
    entries,
  );
  return Readable.from(pack);
}

/** `path` inside `root` (both real paths), else null. */
function inside(root: string, path: string): boolean {
  const rel = relative(root, path);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/**
 * Resolves a repository directory (base_directory "/apps/web") inside the clone, refusing any
 * that leaves it, including through symlinks. Throws with a user-facing reason.
 */
export async function resolveRepoDir(cloneDir: string, baseDirectory: string): Promise<string> {
  const root = await realpath(cloneDir);
  const wanted = resolve(root, `.${baseDirectory.startsWith("/") ? baseDirectory : `/${baseDirectory}`}`);
  if (!inside(root, wanted)) throw new Error(`base directory ${baseDirectory} is outside the repository`);
  let real: string;
  try {
    real = await realpath(wanted);
  } catch {
    throw new Error(`base directory ${baseDirectory} does not exist in the repository`);
  }
  if (!inside(root, real)) throw new Error(`base directory ${baseDirectory} leaves the repository (symlink)`);
  if (!(await lstat(real)).isDirectory()) throw new Error(`base directory ${baseDirectory} is not a directory`);
  return real;
}

/**
 * Writes a generated file (Dockerfile.capstan, a builder's extra files) into the context dir.
 * A repository file or symlink of that name is replaced, never written through.
 */
export async function writeContextFile(dir: string, rel: string, content: string): Promise<void> {
  const root = await realpath(dir);
  const target = resolve(root, rel);
  if (isAbsolute(rel) || !inside(root, target) || target === root) throw new Error(`generated file path ${rel} is outside the build context`);
  const parent = dirname(target);
  await mkdir(parent, { recursive: true });
  const realParent = await realpath(parent);
  if (!inside(root, realParent)) throw new Error(`generated file path ${rel} leaves the build context (symlink)`);
  const final = join(realParent, basename(target));
  await rm(final, { force: true });
  // "wx": create only; a link planted between rm and here fails the write instead of being followed.
  await writeFile(final, content, { flag: "wx", mode: 0o644 });
}
