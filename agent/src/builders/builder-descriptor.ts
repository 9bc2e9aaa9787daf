import { z } from "zod";
import { BASE_IMAGE_ROLES, type BaseImageRole, isImageRef } from "@capstan/shared";
import { type Dockerfile, NOT_SIMPLE_NOTE, assertEnvKey, assertSafePath, startCommand } from "./dockerfile.js";
import { type PlanContext, buildArgs, image } from "./context.js";
import { BuildPlanError } from "./errors.js";
import { TomlError, parseToml } from "./toml.js";

export const DESCRIPTOR_FILE = "capstan.toml";

const isRole = (v: string): v is BaseImageRole => (BASE_IMAGE_ROLES as readonly string[]).includes(v);

const ImageChoice = z
  .string()
  .refine((v) => isRole(v) || isImageRef(v), `use a base image role (${BASE_IMAGE_ROLES.join(", ")}) or an image reference such as python:3.12-slim`);
const Command = z.string().min(1).max(16_384);
const Path = z.string().min(1).max(1024);
/** TOML numbers and booleans are accepted as values and written as text. */
const EnvTable = z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String));

/** capstan.toml; see docs/builders.md. Unknown keys are errors, so a typo never goes unnoticed. */
export const Descriptor = z.strictObject({
  build: z
    .strictObject({
      image: ImageChoice.optional(),
      /** Copied before `install` runs, so its layer is reused while they are unchanged. */
      install_files: z.array(Path).max(64).default([]),
      install: z.array(Command).max(64).default([]),
      commands: z.array(Command).max(64).default([]),
      env: EnvTable.default({}),
    })
    .prefault({}),
  run: z.strictObject({
    image: ImageChoice.optional(),
    /** Run on the runtime image before the app is copied in (system packages...). */
    setup: z.array(Command).max(64).default([]),
    /** What the runtime stage takes from the build stage; by default all of /app. */
    copy: z.array(Path).min(1).max(256).optional(),
    command: z.union([Command, z.array(z.string().max(16_384)).min(1).max(256)]),
    env: EnvTable.default({}),
    /** Used when the application exposes no port. */
    port: z.number().int().min(1).max(65_535).optional(),
  }),
});
export type Descriptor = z.infer<typeof Descriptor>;

/**
 * builder_d: the project describes its build declaratively in capstan.toml: the images (base
 * image roles of this instance, or image references), install and build commands, what the
 * runtime stage keeps, the start command and default environment.
 */
export async function planDescriptor(df: Dockerfile, ctx: PlanContext): Promise<string> {
  const raw = await ctx.tree.read(DESCRIPTOR_FILE);
  if (raw === null) {
    throw new BuildPlanError(`builder_d builds from a ${DESCRIPTOR_FILE} in the base directory, and there is none (see docs/builders.md for its format)`);
  }
  const d = parseDescriptor(raw);
  const buildImage = d.build.image ?? d.run.image;
  const runImage = d.run.image ?? d.build.image;
  if (!buildImage || !runImage) throw new BuildPlanError(`${DESCRIPTOR_FILE}: set run.image (or build.image)`);

  df.from(resolveImage(ctx, buildImage, "build"), "build");
  buildArgs(df, ctx);
  df.env(checkedEnv(d.build.env, "build.env"));
  df.workdir("/app");
  const early = d.build.install.length > 0 && d.build.install_files.length > 0;
  if (early) {
    for (const f of d.build.install_files) {
      const path = relPath(f, "build.install_files");
      if (!(await ctx.tree.kind(path))) throw new BuildPlanError(`${DESCRIPTOR_FILE}: build.install_files: "${f}" does not exist`);
      df.copy([path], `./${path}`);
    }
    for (const c of d.build.install) df.sh(c, "install command");
  }
  df.copySource("/app");
  if (!early) for (const c of d.build.install) df.sh(c, "install command");
  for (const c of d.build.commands) df.sh(c);
  df.blank();

  df.from(resolveImage(ctx, runImage, "run"));
  for (const c of d.run.setup) df.sh(c, "setup command");
  df.workdir("/app");
  df.env(checkedEnv(d.run.env, "run.env"));
  const port = ctx.ports[0] ?? d.run.port ?? null;
  if (port !== null) df.env({ PORT: String(port) });
  for (const p of d.run.copy ?? ["/app"]) {
    const src = p.startsWith("/") ? assertSafePath(p, "run.copy") : `/app/${relPath(p, "run.copy")}`;
    df.copy([src], src, "build");
  }
  df.expose(port);
  const start = typeof d.run.command === "string" ? startCommand(d.run.command) : { argv: d.run.command, simple: true };
  df.cmd(start.argv, "run.command");
  if (!start.simple) ctx.notes.push(`run.command: ${NOT_SIMPLE_NOTE}`);

  const steps = d.build.install.length + d.build.commands.length;
  ctx.notes.push(`build on ${buildImage}: ${steps} command${steps === 1 ? "" : "s"}`);
  ctx.notes.push(`run on ${runImage}: ${typeof d.run.command === "string" ? d.run.command : JSON.stringify(d.run.command)}`);
  if (d.run.copy) ctx.notes.push(`kept from the build: ${d.run.copy.join(", ")}`);
  if (port === null) ctx.notes.push("no port: the app exposes none and run.port is not set");
  return `${DESCRIPTOR_FILE}`;
}

export function parseDescriptor(raw: string): Descriptor {
  let doc: unknown;
  try {
    doc = parseToml(raw);
  } catch (err) {
    if (err instanceof TomlError) throw new BuildPlanError(`${DESCRIPTOR_FILE}: ${err.message}`);
    throw err;
  }
  const parsed = Descriptor.safeParse(doc);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join(".") || "(top level)"}: ${i.message}`);
    throw new BuildPlanError(`${DESCRIPTOR_FILE}: ${problems.slice(0, 5).join("; ")}`);
  }
  return parsed.data;
}

function resolveImage(ctx: PlanContext, choice: string, stage: string): string {
  if (isRole(choice)) return image(ctx, choice);
  ctx.notes.push(`${stage} image ${choice} comes from ${DESCRIPTOR_FILE}, not from this instance's base images`);
  return choice;
}

function relPath(p: string, what: string): string {
  const clean = p.replace(/^\.\/+/, "").replace(/\/+$/, "");
  if (clean === "" || clean.startsWith("/")) throw new BuildPlanError(`${DESCRIPTOR_FILE}: ${what}: "${p}" must be a path inside the project`);
  return assertSafePath(clean, `${DESCRIPTOR_FILE} ${what}`);
}

function checkedEnv(env: Record<string, string>, what: string): Record<string, string> {
  for (const k of Object.keys(env)) assertEnvKey(k, `${DESCRIPTOR_FILE} ${what}`);
  return env;
}
