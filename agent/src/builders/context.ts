import type { BaseImageRole, BaseImages } from "@capstan/shared";
import { type Dockerfile, EXTRA_DIR } from "./dockerfile.js";
import { BuildPlanError } from "./errors.js";
import type { SourceTree } from "./tree.js";

/** What every builder works from. */
export interface PlanContext {
  tree: SourceTree;
  images: BaseImages;
  /** is_build_time variables: declared as ARGs in the stages that run build steps. */
  buildEnv: Record<string, string>;
  ports: number[];
  /** Lines of the plan's summary, in order. */
  notes: string[];
  /** Extra files for the build context, by path relative to it. */
  files: Record<string, string>;
}

export function image(ctx: PlanContext, role: BaseImageRole): string {
  const ref = ctx.images[role];
  if (!ref) throw new BuildPlanError(`this instance has no base image for the "${role}" role (PLATFORM_BUILDER_IMAGE_${role.toUpperCase()})`);
  return ref;
}

/** The port the app listens on: the first exposed port, or the runtime's convention. */
export function appPort(ctx: PlanContext, fallback: number): number {
  const port = ctx.ports[0];
  if (port !== undefined) return port;
  ctx.notes.push(`no ports exposed: the app gets PORT=${fallback}`);
  return fallback;
}

/** ARG lines for the build variables, so they reach the RUN steps of this stage only. */
export function buildArgs(df: Dockerfile, ctx: PlanContext, defaults: Record<string, string> = {}): void {
  df.args(Object.keys(ctx.buildEnv).sort(), defaults);
}

/** Adds an extra file under EXTRA_DIR; returns its context path. */
export async function addFile(ctx: PlanContext, name: string, content: string): Promise<string> {
  const path = `${EXTRA_DIR}/${name}`;
  ctx.files[path] = content;
  // A project's .dockerignore may exclude our directory; when the build honours it, that would
  // hide these files. Later lines win there, so re-including at the end is enough.
  const ignore = await ctx.tree.read(".dockerignore");
  if (ignore !== null) {
    ctx.files[".dockerignore"] = `${ignore.replace(/\n?$/, "\n")}# added by Capstan: the builder's own files\n!${EXTRA_DIR}\n!${EXTRA_DIR}/**\n`;
  }
  return path;
}
