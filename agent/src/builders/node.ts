import { type Dockerfile, startCommand } from "./dockerfile.js";
import { type PlanContext, buildArgs, image } from "./context.js";
import { BuildPlanError } from "./errors.js";

export interface NodeProject {
  scripts: Record<string, string>;
  main: string | null;
  hasDevDependencies: boolean;
  lockfile: "package-lock.json" | "npm-shrinkwrap.json" | null;
  /** Lifecycle scripts or workspaces need the whole tree before `npm ci`, not just the manifests. */
  installNeedsSource: boolean;
}

const INSTALL_SCRIPTS = ["preinstall", "install", "postinstall", "prepare"];
/** Tried in order when package.json names no start script and no existing main. */
const ENTRY_FILES = ["server.js", "index.js", "app.js", "main.js", "server.mjs", "index.mjs", "app.mjs", "main.mjs"];

/** package.json read as a Node.js project, or null when there is none. */
export async function detectNode(ctx: PlanContext): Promise<NodeProject | null> {
  const raw = await ctx.tree.read("package.json");
  if (raw === null) return null;
  let pkg: unknown;
  try {
    pkg = JSON.parse(raw);
  } catch (err) {
    throw new BuildPlanError(`package.json is not valid JSON: ${(err as Error).message}`);
  }
  if (typeof pkg !== "object" || pkg === null || Array.isArray(pkg)) throw new BuildPlanError("package.json must hold a JSON object");
  const p = pkg as Record<string, unknown>;
  const scripts: Record<string, string> = {};
  if (typeof p.scripts === "object" && p.scripts !== null) {
    for (const [k, v] of Object.entries(p.scripts)) if (typeof v === "string" && v.trim() !== "") scripts[k] = v;
  }
  const lockfile = (await ctx.tree.isFile("npm-shrinkwrap.json"))
    ? "npm-shrinkwrap.json"
    : (await ctx.tree.isFile("package-lock.json"))
      ? "package-lock.json"
      : null;
  for (const other of ["yarn.lock", "pnpm-lock.yaml", "bun.lockb"]) {
    if (!lockfile && (await ctx.tree.isFile(other))) {
      ctx.notes.push(`${other} is not used: dependencies are installed with npm (builder_d can run another package manager)`);
    }
  }
  const devDeps = p.devDependencies;
  return {
    scripts,
    main: typeof p.main === "string" ? p.main : null,
    hasDevDependencies: typeof devDeps === "object" && devDeps !== null && Object.keys(devDeps).length > 0,
    lockfile,
    installNeedsSource: INSTALL_SCRIPTS.some((s) => s in scripts) || p.workspaces !== undefined,
  };
}

/**
 * Stage "build": dependencies installed (their layer reused while the manifests are unchanged),
 * the app's tree in /app, the build script run when asked, dev dependencies pruned after it.
 */
export function nodeBuildStage(df: Dockerfile, ctx: PlanContext, project: NodeProject, opts: { build: boolean; prune: boolean }): void {
  const install = project.lockfile ? ["npm", "ci"] : ["npm", "install"];
  df.from(image(ctx, "node"), "build");
  buildArgs(df, ctx);
  df.env({ NPM_CONFIG_UPDATE_NOTIFIER: "false", NPM_CONFIG_FUND: "false", NPM_CONFIG_AUDIT: "false" });
  df.workdir("/app");
  if (!project.installNeedsSource) {
    df.copy(project.lockfile ? ["package.json", project.lockfile] : ["package.json"], "./");
    df.run(install, "dependency install");
  }
  df.copySource("/app");
  if (project.installNeedsSource) df.run(install, "dependency install");
  ctx.notes.push(`install: ${install.join(" ")}${project.installNeedsSource ? " (after copying the whole tree: install scripts or workspaces)" : ""}`);
  if (opts.build && project.scripts.build !== undefined) {
    df.run(["npm", "run", "build"]);
    ctx.notes.push(`build: npm run build (${oneLine(project.scripts.build)})`);
  }
  if (opts.prune && project.hasDevDependencies) {
    if (ctx.buildEnv.NPM_CONFIG_PRODUCTION === "false") {
      ctx.notes.push("devDependencies kept (NPM_CONFIG_PRODUCTION=false)");
    } else {
      df.run(["npm", "prune", "--omit=dev"]);
      ctx.notes.push("devDependencies pruned after the build (set the build variable NPM_CONFIG_PRODUCTION=false to keep them)");
    }
  }
}

/** The final stage: the built /app on a fresh node image (no build variables in its history). */
export function nodeRunStage(df: Dockerfile, ctx: PlanContext, port: number): void {
  df.from(image(ctx, "node"));
  df.workdir("/app");
  df.env({ NODE_ENV: "production", NPM_CONFIG_UPDATE_NOTIFIER: "false", PORT: String(port) });
  // As under npm run: the project's own tools by name.
  df.env({ PATH: "/app/node_modules/.bin:$PATH" }, { expand: true });
  df.copy(["/app"], "/app", "build");
  df.expose(port);
}

/**
 * How the app starts: the start script, else main, else a conventional entry file. A start
 * script that is a single command runs directly as PID 1 (so it receives the stop signal);
 * others, and scripts with prestart/poststart hooks, run through `npm start`.
 */
export async function nodeStart(ctx: PlanContext, project: NodeProject): Promise<{ argv: string[]; text: string } | null> {
  const script = project.scripts.start;
  if (script !== undefined) {
    const direct = startCommand(script);
    if (direct.simple && project.scripts.prestart === undefined && project.scripts.poststart === undefined) {
      return { argv: direct.argv, text: `the start script, run directly (${oneLine(script)})` };
    }
    return { argv: ["npm", "start"], text: `npm start (${oneLine(script)})` };
  }
  const main = project.main?.replace(/^\.\//, "");
  if (main && !main.startsWith("/") && !main.split("/").includes("..") && (await ctx.tree.isFile(main))) {
    return { argv: ["node", main], text: `node ${main} (package.json main)` };
  }
  for (const file of ENTRY_FILES) {
    if (await ctx.tree.isFile(file)) return { argv: ["node", file], text: `node ${file}` };
  }
  return null;
}

export function oneLine(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > 120 ? `${flat.slice(0, 117)}...` : flat;
}
