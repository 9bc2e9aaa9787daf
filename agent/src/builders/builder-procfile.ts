import { Dockerfile, NOT_SIMPLE_NOTE, startCommand } from "./dockerfile.js";
import { type PlanContext, appPort, image } from "./context.js";
import { BuildPlanError } from "./errors.js";
import { binaryName, detectGo, goBuildStage, goRunStage } from "./go.js";
import { detectNode, nodeBuildStage, nodeRunStage } from "./node.js";
import { parseProcfile } from "./procfile.js";
import { detectPython, pythonBuildStage, pythonRunStage } from "./python.js";

/** Heroku's convention for Procfile apps when nothing says otherwise. */
const PROCFILE_PORT = 5000;

/**
 * builder_c: the Procfile's `web` process on a detected runtime (Go, Node.js, Python, or the
 * plain runtime image for anything else). The command runs through /bin/sh -c, as on Heroku,
 * with $PORT set. Other process types are listed in the summary, not run: one application
 * is one container.
 */
export async function planProcfile(df: Dockerfile, ctx: PlanContext): Promise<string> {
  const text = await ctx.tree.read("Procfile");
  if (text === null) throw new BuildPlanError("builder_c runs the processes of a Procfile, and the base directory has none");
  const processes = parseProcfile(text);
  const web = processes.find((p) => p.name === "web");
  if (!web) {
    const names = processes.map((p) => p.name).join(", ") || "none";
    throw new BuildPlanError(`the Procfile has no web process (found: ${names}); the web process is the one the app serves HTTP with`);
  }
  const port = appPort(ctx, PROCFILE_PORT);
  let runtime: string;

  const go = await detectGo(ctx);
  const node = go ? null : await detectNode(ctx);
  const python = go || node ? null : await detectPython(ctx, { anyPyFile: true });
  if (go) {
    if (go.mains.length === 0) throw new BuildPlanError("go.mod found but no main package (package main) in the base directory or in cmd/*");
    // As the Go buildpack does: every main package becomes bin/<name>, on PATH.
    goBuildStage(df, ctx, go, go.mains, "/src/bin/");
    df.blank();
    goRunStage(df, ctx, port);
    df.env({ PATH: "/app/bin:$PATH" }, { expand: true });
    ctx.notes.push(`binaries on PATH: ${go.mains.map((m) => `bin/${binaryName(go.module, m)}`).join(", ")}`);
    runtime = "Go";
  } else if (node) {
    nodeBuildStage(df, ctx, node, { build: true, prune: true });
    df.blank();
    nodeRunStage(df, ctx, port);
    runtime = "Node.js";
  } else if (python) {
    pythonBuildStage(df, ctx, python);
    df.blank();
    pythonRunStage(df, ctx, python, port);
    runtime = "Python";
  } else {
    df.from(image(ctx, "runtime"), "build");
    df.copySource("/app");
    df.blank();
    df.from(image(ctx, "runtime"));
    df.workdir("/app");
    df.copy(["/app"], "/app", "build");
    df.env({ PORT: String(port) });
    df.expose(port);
    ctx.notes.push("no Go, Node.js or Python project detected: the tree runs as is on the runtime image");
    runtime = "the runtime image";
  }

  const start = startCommand(web.command);
  df.cmd(start.argv, "Procfile web command");
  ctx.notes.push(`web: ${web.command}`);
  if (!start.simple) ctx.notes.push(`web: ${NOT_SIMPLE_NOTE}`);
  for (const p of processes) {
    if (p.name !== "web") ctx.notes.push(`${p.name}: not run (only the web process runs; deploy other processes as their own applications)`);
  }
  return `Procfile web process on ${runtime}`;
}
