import { type Dockerfile } from "./dockerfile.js";
import { type PlanContext, appPort } from "./context.js";
import { BuildPlanError } from "./errors.js";
import { detectGo, goBuildStage, goRunStage, pickMain } from "./go.js";
import { detectNode, nodeBuildStage, nodeRunStage, nodeStart } from "./node.js";
import { detectPython, pythonBuildStage, pythonRunStage, pythonStart } from "./python.js";
import { planStatic } from "./builder-static.js";

/**
 * builder_a: detects the language from the files in the base directory, in this order:
 * go.mod (Go), package.json (Node.js), requirements.txt / pyproject.toml / setup.py / main.py /
 * app.py (Python), index.html (static site). Each gets a two-stage image: build, then a clean
 * runtime stage without build tools or build variables.
 */
export async function planAuto(df: Dockerfile, ctx: PlanContext): Promise<string> {
  const go = await detectGo(ctx);
  if (go) {
    const pkg = pickMain(go);
    goBuildStage(df, ctx, go, [pkg], "/out/app");
    df.blank();
    goRunStage(df, ctx, appPort(ctx, 8080));
    df.copy(["/out/app"], "/usr/local/bin/app", "build");
    df.cmd(["/usr/local/bin/app"]);
    ctx.notes.push(`start: the binary of ${pkg === "." ? "the module root" : pkg}`);
    return `Go (go.mod, module ${go.module})`;
  }

  const node = await detectNode(ctx);
  if (node) {
    const start = await nodeStart(ctx, node);
    if (!start) {
      if (node.scripts.build !== undefined) {
        ctx.notes.push("package.json has a build script but no start script, main or server file: serving the build output as a static site");
        return `Node.js build -> ${await planStatic(df, ctx)}`;
      }
      throw new BuildPlanError(
        "package.json found but no way to start the app: add a start script, a main file, or a server.js / index.js / app.js / main.js",
      );
    }
    nodeBuildStage(df, ctx, node, { build: true, prune: true });
    df.blank();
    nodeRunStage(df, ctx, appPort(ctx, 3000));
    df.cmd(start.argv);
    ctx.notes.push(`start: ${start.text}`);
    return "Node.js (package.json)";
  }

  const python = await detectPython(ctx, { anyPyFile: false });
  if (python) {
    const start = await pythonStart(ctx, python);
    if (!start) {
      throw new BuildPlanError(
        "Python project found but no way to start it: add main.py or app.py, gunicorn/uvicorn with an `app` in app.py/main.py, or use builder_c with a Procfile",
      );
    }
    pythonBuildStage(df, ctx, python);
    df.blank();
    pythonRunStage(df, ctx, python, appPort(ctx, 8000));
    df.cmd(start.argv);
    ctx.notes.push(`start: ${start.text}`);
    return "Python";
  }

  if (await ctx.tree.isFile("index.html")) return planStatic(df, ctx);

  throw new BuildPlanError(
    "builder_a could not detect the app: the base directory has none of go.mod, package.json, requirements.txt, pyproject.toml, setup.py, main.py, app.py or index.html",
  );
}
