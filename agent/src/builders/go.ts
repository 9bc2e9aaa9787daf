import { type Dockerfile } from "./dockerfile.js";
import { type PlanContext, buildArgs, image } from "./context.js";
import { BuildPlanError } from "./errors.js";

export interface GoProject {
  module: string;
  hasSum: boolean;
  hasRequires: boolean;
  /** vendor/ or replace directives to local paths: `go mod download` needs the whole tree. */
  downloadNeedsSource: boolean;
  /** Main packages: "." and/or "./cmd/<name>". */
  mains: string[];
}

const MAX_GO_FILES = 200;

export async function detectGo(ctx: PlanContext): Promise<GoProject | null> {
  const gomod = await ctx.tree.read("go.mod");
  if (gomod === null) return null;
  const module = /^\s*module\s+("?)([^\s"]+)\1\s*$/m.exec(gomod)?.[2];
  if (!module) throw new BuildPlanError("go.mod has no module line");
  const mains: string[] = [];
  if (await isMainPackage(ctx, ".")) mains.push(".");
  for (const entry of await ctx.tree.list("cmd")) {
    if (entry.kind === "dir" && (await isMainPackage(ctx, `cmd/${entry.name}`))) mains.push(`./cmd/${entry.name}`);
  }
  return {
    module,
    hasSum: await ctx.tree.isFile("go.sum"),
    hasRequires: /^\s*require\b/m.test(gomod),
    downloadNeedsSource: (await ctx.tree.isDir("vendor")) || /=>\s*\.{1,2}\//.test(gomod),
    mains,
  };
}

async function isMainPackage(ctx: PlanContext, dir: string): Promise<boolean> {
  const files = (await ctx.tree.list(dir)).filter((e) => e.kind === "file" && e.name.endsWith(".go") && !e.name.endsWith("_test.go"));
  for (const f of files.slice(0, MAX_GO_FILES)) {
    const src = await ctx.tree.head(dir === "." ? f.name : `${dir}/${f.name}`);
    if (src !== null && /^package\s+main\s*(\/\/.*)?$/m.test(src)) return true;
  }
  return false;
}

/** The one main package builder_a runs: the root, else the only cmd/*, else cmd/<module name>. */
export function pickMain(project: GoProject): string {
  if (project.mains.includes(".")) return ".";
  if (project.mains.length === 1) return project.mains[0]!;
  if (project.mains.length === 0) throw new BuildPlanError("go.mod found but no main package (package main) in the base directory or in cmd/*");
  const byName = project.mains.find((m) => m === `./cmd/${binaryName(project.module, ".")}`);
  if (byName) return byName;
  throw new BuildPlanError(
    `several main packages (${project.mains.join(", ")}): set the base directory to the one to run, or use builder_c with a Procfile`,
  );
}

/** The file name `go build -o dir/` gives a package's binary. */
export function binaryName(module: string, pkg: string): string {
  if (pkg !== ".") return pkg.split("/").pop()!;
  const parts = module.split("/");
  const last = parts.pop()!;
  return /^v[0-9]+$/.test(last) && parts.length > 0 ? parts.pop()! : last;
}

/** Stage "build": modules downloaded (cached layer), then `go build` of `pkgs` into `out`. */
export function goBuildStage(df: Dockerfile, ctx: PlanContext, project: GoProject, pkgs: string[], out: string): void {
  df.from(image(ctx, "go"), "build");
  // Static binaries by default so that any runtime image runs them; CGO_ENABLED=1 as a build variable turns cgo on.
  buildArgs(df, ctx, { CGO_ENABLED: "0" });
  df.workdir("/src");
  if (project.hasRequires && !project.downloadNeedsSource) {
    df.copy(project.hasSum ? ["go.mod", "go.sum"] : ["go.mod"], "./");
    df.run(["go", "mod", "download"], "module download");
  }
  df.copySource("/src");
  df.run(["go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ...pkgs]);
  ctx.notes.push(`build: go build -o ${out} ${pkgs.join(" ")}`);
}

/** Final stage on the runtime image: the tree (templates, assets) in /app and the CA bundle. */
export function goRunStage(df: Dockerfile, ctx: PlanContext, port: number): void {
  df.from(image(ctx, "runtime"));
  df.workdir("/app");
  df.copy(["/etc/ssl/certs/ca-certificates.crt"], "/etc/ssl/certs/ca-certificates.crt", "build");
  df.copy(["/src"], "/app", "build");
  df.env({ PORT: String(port) });
  df.expose(port);
}
