import { Dockerfile } from "./dockerfile.js";
import { type PlanContext, appPort } from "./context.js";
import { BuildPlanError } from "./errors.js";
import { detectNode, nodeBuildStage } from "./node.js";
import { staticOutputStep, staticServerStage, staticSourceStage } from "./static.js";

/**
 * builder_b: a static site served by Caddy. With a package.json build script the site is the
 * build's output; otherwise the base directory itself, which must hold an index.html.
 */
export async function planStatic(df: Dockerfile, ctx: PlanContext): Promise<string> {
  const node = await detectNode(ctx);
  if (node?.scripts.build !== undefined) {
    nodeBuildStage(df, ctx, node, { build: true, prune: false });
    staticOutputStep(df, ctx);
    df.blank();
    await staticServerStage(df, ctx, { spa: true, port: appPort(ctx, 80) });
    return "static site built by npm run build, served by Caddy";
  }
  if (!(await ctx.tree.isFile("index.html"))) {
    throw new BuildPlanError(
      node
        ? "package.json has no build script and the base directory has no index.html: add a build script, or set the base directory to the site"
        : "no index.html in the base directory (and no package.json with a build script): set the base directory to the folder holding the site",
    );
  }
  if (node) ctx.notes.push("package.json has no build script: the base directory is the site");
  staticSourceStage(df, ctx);
  df.blank();
  await staticServerStage(df, ctx, { spa: false, port: appPort(ctx, 80) });
  return "static site (the base directory as is), served by Caddy";
}
