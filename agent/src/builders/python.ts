import { type Dockerfile, execSh } from "./dockerfile.js";
import { type PlanContext, buildArgs, image } from "./context.js";
import { BuildPlanError } from "./errors.js";
import { TomlError, type TomlValue, parseToml } from "./toml.js";

export type PythonInstall =
  | { kind: "none" }
  | { kind: "requirements"; needsSource: boolean }
  /** PEP 621 [project].dependencies of an app that is not itself a package. */
  | { kind: "dependencies"; specs: string[] }
  /** pip install . (a build-system, or setup.py). */
  | { kind: "package" };

export interface PythonProject {
  install: PythonInstall;
  /** Normalised names of the declared dependencies (to spot gunicorn, uvicorn, ...). */
  deps: Set<string>;
}

const VENV = "/opt/venv";
const VENV_PATH = { PATH: `${VENV}/bin:$PATH` };

/** Python files or manifests in the tree, or null when it is not a Python project. */
export async function detectPython(ctx: PlanContext, opts: { anyPyFile: boolean }): Promise<PythonProject | null> {
  const t = ctx.tree;
  const requirements = await t.read("requirements.txt");
  const pyprojectRaw = await t.read("pyproject.toml");
  const setupPy = await t.isFile("setup.py");
  let entryFile = false;
  if (opts.anyPyFile) entryFile = (await t.list(".")).some((e) => e.kind === "file" && e.name.endsWith(".py"));
  else for (const f of ["main.py", "app.py"]) entryFile ||= await t.isFile(f);
  if (requirements === null && pyprojectRaw === null && !setupPy && !entryFile) {
    if (await t.isFile("Pipfile")) {
      throw new BuildPlanError("Pipfile without requirements.txt is not supported: export one with `pipenv requirements > requirements.txt`");
    }
    return null;
  }

  if (requirements !== null) {
    const req = parseRequirements(requirements);
    ctx.notes.push(req.entries > 0 ? `dependencies: requirements.txt (${req.entries} entries)` : "requirements.txt lists nothing to install");
    return { install: req.entries > 0 ? { kind: "requirements", needsSource: req.needsSource } : { kind: "none" }, deps: req.names };
  }
  if (pyprojectRaw !== null) {
    let doc: Record<string, TomlValue>;
    try {
      doc = parseToml(pyprojectRaw);
    } catch (err) {
      if (err instanceof TomlError) throw new BuildPlanError(`pyproject.toml: ${err.message}`);
      throw err;
    }
    const project = table(doc.project);
    const specs = Array.isArray(project?.dependencies) ? project.dependencies.filter((d): d is string => typeof d === "string") : [];
    const poetry = table(table(table(doc.tool)?.poetry)?.dependencies);
    const deps = new Set([...specs.map(requirementName), ...Object.keys(poetry ?? {}).map(normalise)].filter((n): n is string => !!n));
    if (doc["build-system"] !== undefined || poetry || setupPy) {
      ctx.notes.push("dependencies: pip install . (pyproject.toml with a build system)");
      return { install: { kind: "package" }, deps };
    }
    for (const spec of specs) {
      if (spec.trim().startsWith("-")) throw new BuildPlanError(`pyproject.toml: dependency "${spec}" looks like a pip option`);
    }
    ctx.notes.push(specs.length > 0 ? `dependencies: pyproject.toml [project].dependencies (${specs.length})` : "pyproject.toml declares no dependencies");
    return { install: specs.length > 0 ? { kind: "dependencies", specs } : { kind: "none" }, deps };
  }
  if (setupPy) {
    ctx.notes.push("dependencies: pip install . (setup.py)");
    return { install: { kind: "package" }, deps: new Set() };
  }
  ctx.notes.push("no requirements.txt or pyproject.toml: standard library only");
  return { install: { kind: "none" }, deps: new Set() };
}

/** Stage "build": a virtualenv at /opt/venv with the dependencies, the app's tree in /app. */
export function pythonBuildStage(df: Dockerfile, ctx: PlanContext, project: PythonProject): void {
  const inst = project.install;
  df.from(image(ctx, "python"), "build");
  buildArgs(df, ctx);
  df.env({ PIP_DISABLE_PIP_VERSION_CHECK: "1", PIP_NO_CACHE_DIR: "1" });
  df.workdir("/app");
  if (inst.kind !== "none") {
    df.run(["python3", "-m", "venv", VENV]);
    df.env(VENV_PATH, { expand: true });
  }
  if (inst.kind === "requirements" && !inst.needsSource) {
    df.copy(["requirements.txt"], "./");
    df.run(["pip", "install", "-r", "requirements.txt"], "dependency install");
  }
  if (inst.kind === "dependencies") df.run(["pip", "install", ...inst.specs], "dependency install");
  df.copySource("/app");
  if (inst.kind === "requirements" && inst.needsSource) df.run(["pip", "install", "-r", "requirements.txt"], "dependency install");
  if (inst.kind === "package") df.run(["pip", "install", "."], "dependency install");
}

export function pythonRunStage(df: Dockerfile, ctx: PlanContext, project: PythonProject, port: number, extraEnv: Record<string, string> = {}): void {
  const venv = project.install.kind !== "none";
  df.from(image(ctx, "python"));
  df.workdir("/app");
  df.env({ PYTHONUNBUFFERED: "1", PORT: String(port) });
  if (venv || Object.keys(extraEnv).length > 0) df.env({ ...(venv ? VENV_PATH : {}), ...extraEnv }, { expand: true });
  if (venv) df.copy([VENV], VENV, "build");
  df.copy(["/app"], "/app", "build");
  df.expose(port);
}

const MODULES = ["main", "app", "server", "wsgi", "asgi"];
const SCRIPTS = ["main.py", "app.py", "server.py", "run.py"];
const ASGI_FRAMEWORKS = ["fastapi", "starlette", "quart", "litestar", "django-ninja"];

/**
 * A start command by convention: Django through gunicorn (or its dev server), an ASGI app
 * through uvicorn, a WSGI app through gunicorn, else `python3 main.py` / app.py / server.py.
 */
export async function pythonStart(ctx: PlanContext, project: PythonProject): Promise<{ argv: string[]; text: string } | null> {
  const t = ctx.tree;
  const has = (n: string) => project.deps.has(n);
  if (await t.isFile("manage.py")) {
    for (const dir of await t.list(".")) {
      if (dir.kind !== "dir" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(dir.name)) continue;
      if (!(await t.isFile(`${dir.name}/wsgi.py`))) continue;
      if (has("gunicorn")) return shell(`gunicorn --bind "0.0.0.0:$PORT" ${dir.name}.wsgi:application`, `gunicorn ${dir.name}.wsgi (Django)`);
      ctx.notes.push("Django without gunicorn in the dependencies runs on its development server; add gunicorn for production");
      return shell(`python3 manage.py runserver "0.0.0.0:$PORT"`, "python3 manage.py runserver (Django)");
    }
  }
  const asgi = has("uvicorn") && (ASGI_FRAMEWORKS.some(has) || !has("gunicorn"));
  if (asgi || has("gunicorn")) {
    for (const mod of MODULES) {
      const src = await t.head(`${mod}.py`);
      const variable = src === null ? null : /^(app|application)\s*(?::[^=\n]*)?=/m.exec(src)?.[1];
      if (!variable) continue;
      if (asgi) return shell(`uvicorn ${mod}:${variable} --host 0.0.0.0 --port "$PORT"`, `uvicorn ${mod}:${variable}`);
      return shell(`gunicorn --bind "0.0.0.0:$PORT" ${mod}:${variable}`, `gunicorn ${mod}:${variable}`);
    }
  }
  for (const file of SCRIPTS) {
    if (await t.isFile(file)) return { argv: ["python3", file], text: `python3 ${file}` };
  }
  return null;
}

function shell(command: string, text: string): { argv: string[]; text: string } {
  return { argv: execSh(command), text };
}

export function parseRequirements(text: string): { entries: number; names: Set<string>; needsSource: boolean } {
  const names = new Set<string>();
  let entries = 0;
  let needsSource = false;
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.replace(/(^|\s)#.*$/, "").trim();
    if (!line) continue;
    // Includes, editables and local paths refer to other files of the tree.
    if (/^(-r|--requirement|-c|--constraint|-e|--editable)\b/.test(line) || /^(\.|\/)/.test(line) || line.includes("file:")) {
      needsSource = true;
      entries++;
      continue;
    }
    if (line.startsWith("-")) continue;
    entries++;
    const name = requirementName(line);
    if (name) names.add(name);
  }
  return { entries, names, needsSource };
}

function requirementName(spec: string): string | null {
  const m = /^\s*([A-Za-z0-9][A-Za-z0-9._-]*)/.exec(spec);
  return m ? normalise(m[1]!) : null;
}

function normalise(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

function table(v: TomlValue | undefined): Record<string, TomlValue> | null {
  return typeof v === "object" && v !== null && !Array.isArray(v) ? v : null;
}
