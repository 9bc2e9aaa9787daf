/**
 * The four source builders against the real local engine: for each fixture app, planBuild,
 * `docker build` of the plan, a container from the image, and HTTP answers that carry the
 * app's environment (changed on a second run, or rebuilt for build-time variables).
 * Base images are the local capstan-test/{node,python,go,static,debian} (test/kit/images.sh):
 * no registry, and the fixtures need no package downloads. Built images keep stable tags
 * (capstan-test/builders-*) so that later runs reuse their layers; containers carry
 * capstan.test=1 and are removed at the end.
 */
import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BaseImages, SourceBuilder } from "@capstan/shared";
import { DOCKERFILE_NAME, planBuild } from "../../agent/src/builders/index.js";
import { repo, until } from "./support/kit.js";

const IMAGES: BaseImages = {
  node: "capstan-test/node:latest",
  python: "capstan-test/python:latest",
  go: "capstan-test/go:latest",
  static: "capstan-test/static:latest",
  runtime: "capstan-test/debian:latest",
};
const RUN = `capstan-builders-${randomBytes(3).toString("hex")}`;
// Fixed, so that the checked-out trees are identical from run to run and builds hit the cache.
const SECRET = "capstan-test-git-remote-token-5f1d";
let work = "";
const timings: { case: string; buildS: number; sizeMB: number }[] = [];

/** argv only; `env` adds variables (build-arg values travel this way, never in argv). */
function run(cmd: string, args: string[], env: Record<string, string> = {}, timeoutMs = 600_000): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.slice(0, 3).join(" ")} failed: ${(stderr || err.message).slice(-3000)}`));
      else resolve(stdout.trim());
    });
  });
}

/** The fixture copied to a fresh directory, with what a real clone would add. */
async function checkout(fixture: string): Promise<string> {
  const dir = join(work, `${fixture}-${randomBytes(3).toString("hex")}`);
  await cp(join(repo, "test/fixtures/apps", fixture), dir, { recursive: true });
  // A clone's history must never reach the image (a static site would serve it).
  await mkdir(join(dir, ".git"));
  await writeFile(join(dir, ".git/config"), `[remote "origin"]\n\turl = https://x-access-token:${SECRET}@example.invalid/repo.git\n`);
  return dir;
}

interface Built {
  tag: string;
  plan: Awaited<ReturnType<typeof planBuild>>;
}

async function build(name: string, pack: SourceBuilder, dir: string, buildEnv: Record<string, string>, ports: number[]): Promise<Built> {
  const plan = await planBuild({ pack, dir, baseImages: IMAGES, buildEnv, ports });
  for (const [rel, content] of Object.entries(plan.files)) {
    await mkdir(dirname(join(dir, rel)), { recursive: true });
    await writeFile(join(dir, rel), content);
  }
  await writeFile(join(dir, DOCKERFILE_NAME), plan.dockerfile);
  const tag = `capstan-test/builders-${name}:latest`;
  const buildArgs = Object.keys(buildEnv).flatMap((k) => ["--build-arg", k]);
  const started = Date.now();
  await run("docker", ["build", "-q", "-f", join(dir, DOCKERFILE_NAME), "-t", tag, "--label", "capstan.test=1", ...buildArgs, dir], buildEnv);
  const buildS = (Date.now() - started) / 1000;
  const size = Number(await run("docker", ["image", "inspect", "-f", "{{.Size}}", tag]));
  timings.push({ case: `${pack} ${name}`, buildS, sizeMB: Math.round(size / 1e5) / 10 });
  return { tag, plan };
}

/** Starts the image with `env`, publishing `port` on loopback; returns the base URL. */
async function start(tag: string, port: number, env: Record<string, string>): Promise<{ url: string; name: string }> {
  const name = `${RUN}-${randomBytes(3).toString("hex")}`;
  const envArgs = Object.keys(env).flatMap((k) => ["-e", k]);
  await run("docker", ["run", "-d", "--name", name, "--label", "capstan.test=1", ...envArgs, "-p", `127.0.0.1::${port}`, tag], env);
  const mapped = await run("docker", ["port", name, `${port}/tcp`]);
  const hostPort = /:(\d+)$/m.exec(mapped)?.[1];
  if (!hostPort) throw new Error(`no published port in "${mapped}"`);
  return { url: `http://127.0.0.1:${hostPort}`, name };
}

async function get(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: res.status, body: await res.text() };
}

/** Waits until the app answers `/` with a body containing `expected`. */
async function answers(url: string, expected: string): Promise<string> {
  return until(
    `${url} to answer with "${expected}"`,
    async () => {
      const r = await get(`${url}/`);
      return r.status === 200 && r.body.includes(expected) ? r.body : false;
    },
    30_000,
    250,
  );
}

async function stop(name: string): Promise<void> {
  await run("docker", ["rm", "-f", name]).catch(() => undefined);
}

/**
 * `docker stop` reaches the app itself (the start command is PID 1, not a shell in front of
 * it): the fixtures exit 0 on SIGTERM at once, where a shell would sit out the 10 s grace time.
 */
async function stopsGracefully(name: string): Promise<void> {
  const started = Date.now();
  await run("docker", ["stop", "-t", "10", name]);
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(await run("docker", ["inspect", "-f", "{{.State.ExitCode}}", name])).toBe("0");
}

/** Runs a command inside a throwaway container of the image (for checks on its files). */
function inImage(tag: string, script: string): Promise<string> {
  return run("docker", ["run", "--rm", "--label", "capstan.test=1", "--entrypoint", "/bin/sh", tag, "-c", script]);
}

async function assertNoRepoFiles(tag: string, appDir: string): Promise<void> {
  const out = await inImage(tag, `for f in .git ${DOCKERFILE_NAME} .capstan-build; do test -e ${appDir}/$f && echo "present: $f"; done; echo checked`);
  expect(out).toBe("checked");
}

describe("source builders on the real engine", () => {
  beforeAll(async () => {
    await run("bash", [join(repo, "test/kit/engine.sh"), "up"]);
    await run("bash", [join(repo, "test/kit/images.sh"), "debian", "busybox", "node", "python", "go", "static"], {}, 900_000);
    work = await mkdtemp(join(tmpdir(), "capstan-builders-"));
  }, 900_000);

  afterAll(async () => {
    const ids = await run("docker", ["ps", "-aq", "--filter", "label=capstan.test=1", "--filter", `name=${RUN}`]).catch(() => "");
    if (ids) await run("docker", ["rm", "-f", ...ids.split("\n")]).catch(() => undefined);
    if (work) await rm(work, { recursive: true, force: true });
    if (timings.length > 0) console.log(["build timings and image sizes:", ...timings.map((t) => `  ${t.case}: ${t.buildS.toFixed(1)} s, ${t.sizeMB} MB`)].join("\n"));
  });

  it("builder_a: Node.js app with a build step; build variables reach the build, not the image", async () => {
    const dir = await checkout("node");
    const { tag, plan } = await build("node", "builder_a", dir, { BUILD_NOTE: "note-from-build-arg" }, [3000]);
    expect(plan.summary).toContain("Node.js");
    let c = await start(tag, 3000, { GREETING: "hello-node-1" });
    try {
      expect(await answers(c.url, "hello-node-1")).toBe("node fixture: hello-node-1 | build: note-from-build-arg | NODE_ENV=production\n");
    } finally {
      await stop(c.name);
    }
    // A redeploy with a changed variable: same image, new container.
    c = await start(tag, 3000, { GREETING: "hello-node-2" });
    try {
      await answers(c.url, "node fixture: hello-node-2");
      await stopsGracefully(c.name);
    } finally {
      await stop(c.name);
    }
    // Multi-stage: the final image's history and environment do not carry the build variable's value.
    expect(await run("docker", ["history", "--no-trunc", tag])).not.toContain("note-from-build-arg");
    expect(await run("docker", ["image", "inspect", "-f", "{{json .Config.Env}}", tag])).not.toContain("BUILD_NOTE");
    await assertNoRepoFiles(tag, "/app");
  });

  it("builder_a: Python app (standard library), start command by convention", async () => {
    const dir = await checkout("python");
    const { tag, plan } = await build("python", "builder_a", dir, {}, [8000]);
    expect(plan.summary).toContain("start: python3 app.py");
    for (const greeting of ["hello-python-1", "hello-python-2"]) {
      const c = await start(tag, 8000, { GREETING: greeting });
      try {
        expect(await answers(c.url, greeting)).toBe(`python fixture: ${greeting}\n`);
      } finally {
        await stop(c.name);
      }
    }
    await assertNoRepoFiles(tag, "/app");
  });

  it("builder_a: Go app built in the go image, run from the runtime image", async () => {
    const dir = await checkout("go");
    const { tag } = await build("go", "builder_a", dir, {}, [8080]);
    for (const greeting of ["hello-go-1", "hello-go-2"]) {
      const c = await start(tag, 8080, { GREETING: greeting });
      try {
        expect(await answers(c.url, greeting)).toBe(`go fixture: ${greeting}\n`);
      } finally {
        await stop(c.name);
      }
    }
    // The runtime stage has the binary and the CA bundle, not the Go toolchain.
    expect(await inImage(tag, "test -x /usr/local/bin/app && test -s /etc/ssl/certs/ca-certificates.crt && ! command -v go && echo ok")).toBe("ok");
  });

  it("builder_b: plain static site: pages, clean URLs, 404 page, no repository files served", async () => {
    const dir = await checkout("static");
    await writeFile(join(dir, ".env"), "FIXTURE_SECRET=do-not-serve\n");
    const { tag, plan } = await build("static", "builder_b", dir, {}, [8080]);
    expect(plan.files).toHaveProperty([".capstan-build/Caddyfile"]);
    const c = await start(tag, 8080, {});
    try {
      await answers(c.url, "static fixture: plain site");
      expect(await get(`${c.url}/about`)).toMatchObject({ status: 200, body: expect.stringContaining("about page") });
      expect(await get(`${c.url}/style.css`)).toMatchObject({ status: 200 });
      expect(await get(`${c.url}/no/such/page`)).toMatchObject({ status: 404, body: expect.stringContaining("page not found") });
      for (const path of ["/.git/config", "/.env", `/${DOCKERFILE_NAME}`, "/.capstan-build/Caddyfile"]) {
        const r = await get(`${c.url}${path}`);
        expect(r.status, path).toBe(404);
        expect(r.body).not.toContain(SECRET);
        expect(r.body).not.toContain("do-not-serve");
      }
    } finally {
      await stop(c.name);
    }
  });

  it("builder_b: site built by npm run build from a build-time variable; a rebuild shows the new value", async () => {
    for (const greeting of ["hello <static> 1", "hello static 2"]) {
      const dir = await checkout("static-build");
      const { tag, plan } = await build("static-build", "builder_b", dir, { GREETING: greeting }, [8080]);
      expect(plan.summary).toContain("npm run build");
      const c = await start(tag, 8080, {});
      try {
        const escaped = greeting.replace(/</g, "&#60;").replace(/>/g, "&#62;");
        await answers(c.url, `static-build fixture: ${escaped}`);
        // Single-page app fallback: unknown paths get index.html.
        expect(await get(`${c.url}/some/client/route`)).toMatchObject({ status: 200, body: expect.stringContaining("static-build fixture") });
        expect(await get(`${c.url}/app.js`)).toMatchObject({ status: 200, body: expect.stringContaining("document.title") });
      } finally {
        await stop(c.name);
      }
    }
  });

  it("builder_c: the Procfile's web process on the detected Python runtime", async () => {
    const dir = await checkout("procfile");
    const { tag, plan } = await build("procfile", "builder_c", dir, {}, [5000]);
    expect(plan.summary).toContain("worker: not run");
    for (const greeting of ["hello-procfile-1", "hello-procfile-2"]) {
      const c = await start(tag, 5000, { GREETING: greeting });
      try {
        expect(await answers(c.url, greeting)).toBe(`procfile fixture: ${greeting}\n`);
        await stopsGracefully(c.name);
      } finally {
        await stop(c.name);
      }
    }
  });

  it("builder_d: capstan.toml build and run stages, its env (quoted values intact) overridable at run time", async () => {
    const dir = await checkout("descriptor");
    const { tag } = await build("descriptor", "builder_d", dir, {}, [8080]);
    const odd = `odd: say "hi" to $HOME and C:\\temp`;
    let c = await start(tag, 8080, {});
    try {
      const body = await answers(c.url, "descriptor fixture");
      expect(body).toBe(`descriptor fixture: default greeting from capstan.toml | stamp: descriptor-build | ${odd}\n`);
    } finally {
      await stop(c.name);
    }
    c = await start(tag, 8080, { GREETING: "hello-descriptor-2" });
    try {
      await answers(c.url, "descriptor fixture: hello-descriptor-2 |");
      await stopsGracefully(c.name);
    } finally {
      await stop(c.name);
    }
    // run.copy keeps only out/ from the build stage.
    expect(await inImage(tag, "ls -A /app")).toBe("out");
  });
});
