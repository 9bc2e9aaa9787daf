import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BuildPayload } from "@capstan/shared";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BuildImageOptions, Engine, RegistryCredentials } from "../docker/engine.js";
import { EngineError } from "../docker/engine.js";
import type { JobContext } from "../dispatch/types.js";
import { ensureImage, registryOf } from "../deploy/image.js";
import { splitImageRef } from "./app-build.js";
import { createHandlers } from "./index.js";

const APP = "0a1b2c3d-1111-4000-8000-000000000001";
const DEP = "0a1b2c3d-2222-4000-8000-000000000002";
const PASSWORD = "registry-pass-7f2e";
const TARGET = `registry.example.test:5000/capstan/${APP}:${DEP}`;
const DIGEST = `sha256:${"e".repeat(64)}`;

/** Just what app.build and an image pull touch: images, builds, pushes, pulls. */
class FakeEngine implements Partial<Engine> {
  readonly socketPath = "/fake.sock";
  images = new Map<string, Record<string, string>>();
  calls: string[] = [];
  pushes: { repository: string; tag: string; auth: RegistryCredentials | null }[] = [];
  pulls: { ref: string; auth: RegistryCredentials | null | undefined }[] = [];
  removed: { ref: string; keepParents: boolean }[] = [];
  pushError: string | null = null;

  async imageExists(ref: string) {
    return this.images.has(ref);
  }
  async buildImage(_ctx: NodeJS.ReadableStream, opts: BuildImageOptions, onLine: (l: string) => void) {
    this.calls.push(`build ${opts.tag}`);
    onLine(`Step 1/2 : ARG TOKEN=${opts.buildargs.TOKEN ?? ""}`);
    this.images.set(opts.tag, opts.labels);
    return { id: "sha256:abc" };
  }
  async pushImage(repository: string, tag: string, auth: RegistryCredentials | null, onLine: (l: string) => void) {
    this.calls.push(`push ${repository}:${tag}`);
    this.pushes.push({ repository, tag, auth });
    if (this.pushError) throw new EngineError(`push image ${repository}:${tag}: ${this.pushError}`);
    onLine("abc123: Pushed");
    return { digest: DIGEST };
  }
  async pullImage(ref: string, _onLine: (l: string) => void, _signal?: AbortSignal, auth?: RegistryCredentials | null) {
    this.calls.push(`pull ${ref}`);
    this.pulls.push({ ref, auth });
    this.images.set(ref, {});
  }
  async listImages(labels: Record<string, string>) {
    return [...this.images].filter(([, l]) => Object.entries(labels).every(([k, v]) => l[k] === v)).map(([tag, l]) => ({ id: `sha256:${tag}`, tags: [tag], labels: l }));
  }
  async removeImage(ref: string, _signal?: AbortSignal, opts: { keepParents?: boolean } = {}) {
    this.removed.push({ ref, keepParents: opts.keepParents === true });
    this.images.delete(ref);
  }
}

const job = (signal = new AbortController().signal): JobContext & { lines: string[] } => {
  const lines: string[] = [];
  return { signal, progress: (l) => lines.push(l), job: { id: "job-1", attempt: 1 }, lines };
};

const payload = (over: Partial<BuildPayload> = {}): BuildPayload => ({
  deployment_uuid: DEP,
  app: { uuid: APP, name: "web" },
  source: { kind: "dockerfile", dockerfile: "FROM capstan-test/busybox:latest\nARG TOKEN\n" },
  build: { pack: "containerfile", no_cache: false, base_directory: "/", env: { TOKEN: "build-token-value" }, base_images: { node: "n:1", python: "p:1", go: "g:1", static: "s:1", runtime: "r:1" } },
  ports: [8080],
  push: { image: TARGET, auth: { username: "pusher", password: PASSWORD } },
  ...over,
});

let stateDir = "";
beforeAll(async () => {
  stateDir = await mkdtemp(join(tmpdir(), "capstan-app-build-"));
});
afterAll(async () => {
  await rm(stateDir, { recursive: true, force: true });
});

function setup() {
  const engine = new FakeEngine();
  const handlers = createHandlers(engine as unknown as Engine, { extraLabels: { "capstan.test": "1" }, stateDir });
  return { engine, handlers };
}

describe("app.build", () => {
  it("builds under the registry reference, pushes it with the login, reports it by digest, and removes the local image (keeping the cache)", async () => {
    const { engine, handlers } = setup();
    const ctx = job();
    const result = await handlers["app.build"](payload(), ctx);
    expect(result).toEqual({ image: `registry.example.test:5000/capstan/${APP}@${DIGEST}`, commit: null, commit_message: null });
    expect(engine.calls).toEqual([`build ${TARGET}`, `push registry.example.test:5000/capstan/${APP}:${DEP}`]);
    expect(engine.pushes[0]!.auth).toEqual({ username: "pusher", password: PASSWORD, serveraddress: "registry.example.test:5000" });
    expect(engine.removed).toEqual([{ ref: TARGET, keepParents: true }]);
    // Every line is the build phase's, and no secret is printed.
    expect(ctx.lines.every((l) => l.startsWith("[build] "))).toBe(true);
    expect(ctx.lines.join("\n")).toContain("[build] Step 1/2 : ARG TOKEN=********");
    expect(ctx.lines.join("\n")).not.toContain(PASSWORD);
    expect(ctx.lines.join("\n")).toContain(`pushing ${TARGET} to registry.example.test:5000 as pusher`);
  });

  it("a refused push fails with the registry's reason (secrets masked) and leaves no local image", async () => {
    const { engine, handlers } = setup();
    engine.pushError = `unauthorized: authentication required for pusher:${PASSWORD}`;
    const err = await handlers["app.build"](payload(), job()).catch((e: Error) => e);
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toBe("pushing the image to the registry registry.example.test:5000 failed: unauthorized: authentication required for pusher:********");
    expect(engine.images.has(TARGET)).toBe(false);
  });

  it("an image this deployment already built (an earlier delivery) is pushed without building again", async () => {
    const { engine, handlers } = setup();
    engine.images.set(TARGET, { "capstan.deployment": DEP, "capstan.commit": "f".repeat(40) });
    const result = await handlers["app.build"](payload(), job());
    expect(engine.calls).toEqual([`push registry.example.test:5000/capstan/${APP}:${DEP}`]);
    expect(result.commit).toBe("f".repeat(40));
  });

  it("an anonymous registry gets no login", async () => {
    const { engine, handlers } = setup();
    await handlers["app.build"](payload({ push: { image: TARGET, auth: null } }), job());
    expect(engine.pushes[0]!.auth).toBeNull();
  });

  it("cancel before the push: nothing is pushed", async () => {
    const { engine, handlers } = setup();
    const ac = new AbortController();
    ac.abort(new Error("cancelled by the control plane"));
    await expect(handlers["app.build"](payload(), job(ac.signal))).rejects.toThrow();
    expect(engine.pushes).toEqual([]);
  });
});

describe("splitImageRef", () => {
  it("splits at the tag's colon, not the registry port's", () => {
    expect(splitImageRef("reg:5000/a/b:t1")).toEqual({ repository: "reg:5000/a/b", tag: "t1" });
    expect(splitImageRef("reg:5000/a/b")).toEqual({ repository: "reg:5000/a/b", tag: "latest" });
  });
});

describe("pulling a pushed image (app.deploy's image source with a login)", () => {
  it("always pulls, with the login for the image's registry, even when an image of that name is present", async () => {
    const engine = new FakeEngine();
    const ref = `registry.example.test:5000/capstan/${APP}@${DIGEST}`;
    engine.images.set(ref, {});
    const auth = { username: "pusher", password: PASSWORD, serveraddress: registryOf(ref) };
    await ensureImage(engine as unknown as Engine, ref, job(), { auth, always: true });
    expect(engine.pulls).toEqual([{ ref, auth: { username: "pusher", password: PASSWORD, serveraddress: "registry.example.test:5000" } }]);
    // Without `always`, a present image is used as it is.
    await ensureImage(engine as unknown as Engine, ref, job());
    expect(engine.pulls).toHaveLength(1);
    expect(registryOf("nginx:1.27")).toBe("docker.io");
    expect(registryOf("localhost/app:1")).toBe("localhost");
  });
});
