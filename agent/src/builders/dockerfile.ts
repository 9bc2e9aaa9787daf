import { isImageRef } from "@capstan/shared";
import { BuildPlanError } from "./errors.js";

/** Where the plan's extra files go inside the build context (removed again from the app's tree). */
export const EXTRA_DIR = ".capstan-build";
/** The caller writes the generated Dockerfile here (contract with agent/src/deploy). */
export const DOCKERFILE_NAME = "Dockerfile.capstan";
/** Never part of the application: the clone's history and the builder's own files. */
export const NOT_APP_FILES = [".git", DOCKERFILE_NAME, EXTRA_DIR];

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
/**
 * Paths the builder writes into COPY / WORKDIR. COPY expands `$VAR`, and spaces or quotes
 * would need escaping rules of their own, so anything outside this set is refused instead.
 */
const SAFE_PATH = /^[A-Za-z0-9._@+\-/]+$/;
const STAGE = /^[a-z][a-z0-9-]{0,31}$/;
// Tab is the one control character a Dockerfile line can carry as is.
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f]/;

export function assertSafePath(path: string, what: string): string {
  if (!SAFE_PATH.test(path) || path.split("/").includes("..")) {
    throw new BuildPlanError(`${what} "${path}" must use only letters, digits and . _ @ + - / (no "..")`);
  }
  return path;
}

export function assertEnvKey(key: string, what: string): string {
  if (!ENV_KEY.test(key)) throw new BuildPlanError(`${what} "${key}" is not a valid variable name`);
  return key;
}

/** A command for exec form: NUL cannot reach a process, so it is refused rather than cut. */
function assertArgv(argv: string[], what: string): string[] {
  if (argv.length === 0) throw new BuildPlanError(`${what} is empty`);
  if (argv.some((a) => a.includes("\u0000"))) throw new BuildPlanError(`${what} contains a NUL character`);
  return argv;
}

/**
 * A value inside double quotes, for ENV. Docker's word parser treats backslash, double quote
 * and dollar specially there, and a line break would end the instruction, so the first three
 * are escaped and control characters are refused.
 */
export function quoteValue(value: string, what: string): string {
  if (CONTROL.test(value)) throw new BuildPlanError(`${what} contains a line break or control character`);
  return `"${value.replace(/[\\"$]/g, (c) => `\\${c}`)}"`;
}

/**
 * Builds a Dockerfile from typed instructions. Commands are always written in exec (JSON)
 * form, which JSON.stringify keeps on one line whatever the string holds, so nothing from
 * the repository can end an instruction or start another one.
 */
export class Dockerfile {
  private readonly lines: string[] = [];

  comment(text: string): this {
    this.lines.push(`# ${text.replace(/[\r\n]+/g, " ")}`);
    return this;
  }

  blank(): this {
    this.lines.push("");
    return this;
  }

  from(image: string, stage?: string): this {
    if (!isImageRef(image)) throw new BuildPlanError(`"${image}" is not an image reference`);
    if (stage !== undefined && !STAGE.test(stage)) throw new Error(`bad stage name ${stage}`);
    this.lines.push(stage ? `FROM ${image} AS ${stage}` : `FROM ${image}`);
    return this;
  }

  /** Build arguments: declared without a value, which arrives with the build (never in this file). */
  args(names: Iterable<string>, defaults: Record<string, string> = {}): this {
    for (const [name, value] of Object.entries(defaults)) {
      this.lines.push(`ARG ${assertEnvKey(name, "build argument")}=${quoteValue(value, `build argument ${name}`)}`);
    }
    for (const name of names) {
      if (Object.hasOwn(defaults, name)) continue;
      this.lines.push(`ARG ${assertEnvKey(name, "build variable")}`);
    }
    return this;
  }

  env(vars: Record<string, string>, opts: { expand?: boolean } = {}): this {
    const pairs = Object.entries(vars).map(([k, v]) => {
      assertEnvKey(k, "environment variable");
      // `expand` is for values this module writes itself, such as PATH=/x:$PATH.
      return `${k}=${opts.expand ? v : quoteValue(v, `environment variable ${k}`)}`;
    });
    if (pairs.length > 0) this.lines.push(`ENV ${pairs.join(" ")}`);
    return this;
  }

  workdir(path: string): this {
    this.lines.push(`WORKDIR ${assertSafePath(path, "working directory")}`);
    return this;
  }

  copy(sources: string[], dest: string, from?: string): this {
    const paths = [...sources.map((s) => assertSafePath(s, "path")), assertSafePath(dest, "path")];
    if (from !== undefined && !STAGE.test(from)) throw new Error(`bad stage name ${from}`);
    this.lines.push(`COPY ${from ? `--from=${from} ` : ""}${JSON.stringify(paths)}`);
    return this;
  }

  run(argv: string[], what = "build command"): this {
    this.lines.push(`RUN ${JSON.stringify(assertArgv(argv, what))}`);
    return this;
  }

  /** A shell command (the user's own build step or start command) run by /bin/sh -c. */
  sh(command: string, what = "build command"): this {
    return this.run(["/bin/sh", "-c", command], what);
  }

  expose(port: number | null): this {
    if (port !== null) this.lines.push(`EXPOSE ${port}`);
    return this;
  }

  entrypoint(argv: string[]): this {
    this.lines.push(`ENTRYPOINT ${JSON.stringify(assertArgv(argv, "entrypoint"))}`);
    return this;
  }

  cmd(argv: string[], what = "start command"): this {
    this.lines.push(`CMD ${JSON.stringify(assertArgv(argv, what))}`);
    return this;
  }

  /** Copies the context into `dir` and removes what is not the application's (see NOT_APP_FILES). */
  copySource(dir: string): this {
    this.copy(["."], dir.endsWith("/") ? dir : `${dir}/`);
    return this.run(["rm", "-rf", ...NOT_APP_FILES.map((f) => `${dir}/${f}`)]);
  }

  toString(): string {
    return `${this.lines.join("\n")}\n`;
  }
}

/** Shell command to start `argv`-like text with exec, for start commands this module writes. */
export function execSh(command: string): string[] {
  return ["/bin/sh", "-c", `exec ${command}`];
}

const COMPOUND = /[;&|<>()`\n\r]/;
const NOT_EXECABLE =
  /^\s*(?:[A-Za-z_][A-Za-z0-9_]*=|(?:cd|export|set|unset|\.|source|eval|exec|if|for|while|until|case|function|trap|umask|ulimit|alias|wait|read|shift|true|false|test|\[|\{|!)(?:\s|$))/;

/**
 * A user's start command (Procfile, start script, capstan.toml string) for /bin/sh -c. The
 * container's stop signal goes to PID 1 only, and /bin/sh does not pass it on, so a single
 * command gets `exec` and becomes PID 1 itself. Lists, pipes, builtins and assignments are
 * left as written (`exec` would change their meaning); `simple` tells the caller which.
 */
export function startCommand(command: string): { argv: string[]; simple: boolean } {
  if (/^\s*exec\s/.test(command)) return { argv: ["/bin/sh", "-c", command], simple: true };
  const simple = !COMPOUND.test(command) && !NOT_EXECABLE.test(command);
  return { argv: ["/bin/sh", "-c", simple ? `exec ${command.trim()}` : command], simple };
}

export const NOT_SIMPLE_NOTE = "it runs under /bin/sh, which does not pass stop signals on: begin its last command with exec";
