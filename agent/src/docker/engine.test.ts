/**
 * Integration test against a REAL Docker Engine on /var/run/docker.sock (or DOCKER_SOCKET).
 * Skipped, with a message saying why, when no engine answers: start one with
 * `bash test/kit/engine.sh up`. Uses the local image capstan-test/busybox:latest
 * (built by test/kit/images.sh, which this test runs when the image is missing; no pulls).
 * Everything it creates is labelled capstan.test=1, named capstan-agent-it-<run>-*, and removed
 * afterwards.
 */
import { randomBytes } from "node:crypto";
import Docker from "dockerode";
import { afterAll, describe, expect, it } from "vitest";
import { createHandlers } from "../handlers/index.js";
import type { JobContext } from "../dispatch/types.js";
import { DockerodeEngine } from "./dockerode-engine.js";
import { engineSkipReason } from "../testing/engine-prerequisites.js";

const SOCKET = process.env.DOCKER_SOCKET ?? "/var/run/docker.sock";
const IMAGE = "capstan-test/busybox:latest";
const TEST_LABEL = { "capstan.test": "1" };
const RUN = `capstan-agent-it-${randomBytes(3).toString("hex")}`;

const engine = new DockerodeEngine(SOCKET);
const docker = new Docker({ socketPath: SOCKET });

const skipReason = await engineSkipReason(engine, "busybox", "agent/src/docker/engine.test.ts");

const ctx = (id: string): JobContext => ({ signal: new AbortController().signal, progress: () => {}, job: { id, attempt: 1 } });
const handlers = createHandlers(engine, { extraLabels: TEST_LABEL });

async function containersNamed(name: string) {
  const list = await docker.listContainers({ all: true, filters: { name: [name] } });
  return list.filter((c) => c.Names.includes(`/${name}`));
}

describe.skipIf(skipReason !== null)(`real Docker Engine (${SOCKET})`, { timeout: 60_000 }, () => {
  afterAll(async () => {
    for (const c of await docker.listContainers({ all: true, filters: { label: ["capstan.test=1"] } })) {
      if (c.Names.some((n) => n.startsWith(`/${RUN}`))) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
    }
    for (const n of await docker.listNetworks({ filters: { label: ["capstan.test=1"] } })) {
      if (n.Name.startsWith(RUN)) await docker.getNetwork(n.Id).remove().catch(() => {});
    }
  });

  it("server.validate reports the engine's versions", async () => {
    const r = await handlers["server.validate"]({}, ctx("v"));
    const v = await docker.version();
    expect(r.docker_version).toBe(v.Version);
    expect(r.api_version).toBe(v.ApiVersion);
    expect(r.compose_version === null || /^\d+\.\d+/.test(r.compose_version)).toBe(true);
  });

  it("server.validate fails with a clear reason when the engine is not there", async () => {
    const nowhere = createHandlers(new DockerodeEngine("/nonexistent/docker.sock"));
    await expect(nowhere["server.validate"]({}, ctx("v"))).rejects.toThrow("Docker Engine is not reachable at /nonexistent/docker.sock (ENOENT)");
  });

  it("container.ensure twice -> one running container, created once", async () => {
    const name = `${RUN}-web`;
    const spec = { name, image: IMAGE, cmd: ["sleep", "3600"], env: { GREETING: "hi" }, labels: { app: "web" }, restart: "unless-stopped" as const };
    const first = await handlers["container.ensure"](spec, ctx("job-a"));
    const second = await handlers["container.ensure"](spec, ctx("job-b"));
    expect(first.created).toBe(true);
    expect(second).toEqual({ id: first.id, created: false });
    expect(await containersNamed(name)).toHaveLength(1);

    const info = await docker.getContainer(first.id).inspect();
    expect(info.State.Running).toBe(true);
    expect(info.Config.Labels).toMatchObject({ app: "web", "capstan.managed": "true", "capstan.job": "job-a", "capstan.test": "1" });
    expect(info.Config.Env).toContain("GREETING=hi");
    expect(info.HostConfig.RestartPolicy?.Name).toBe("unless-stopped");

    // Redelivered after the container stopped: started again, still the same one.
    await docker.getContainer(first.id).stop({ t: 0 });
    const third = await handlers["container.ensure"](spec, ctx("job-a"));
    expect(third).toEqual({ id: first.id, created: true }); // same job created it
    expect((await docker.getContainer(first.id).inspect()).State.Running).toBe(true);
  });

  it("container.ensure racing itself (two agents' worth of locks) still makes one container", async () => {
    const name = `${RUN}-race`;
    const spec = { name, image: IMAGE, cmd: ["sleep", "3600"], labels: {}, restart: "no" as const };
    const other = createHandlers(engine, { extraLabels: TEST_LABEL });
    const results = await Promise.all([handlers["container.ensure"](spec, ctx("r1")), other["container.ensure"](spec, ctx("r2"))]);
    expect(new Set(results.map((r) => r.id)).size).toBe(1);
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await containersNamed(name)).toHaveLength(1);
  });

  it("container.ensure fails clearly for an image that is not present (no pull)", async () => {
    const image = `capstan-test/absent-${RUN}:1`;
    await expect(handlers["container.ensure"]({ name: `${RUN}-noimg`, image, labels: {}, restart: "no" }, ctx("x"))).rejects.toThrow(
      `image ${image} is not present on this server`,
    );
    expect(await containersNamed(`${RUN}-noimg`)).toHaveLength(0);
  });

  it("inspect by name is exact: an id prefix of another container is not a match", async () => {
    const { id } = await handlers["container.ensure"]({ name: `${RUN}-exact`, image: IMAGE, cmd: ["sleep", "3600"], labels: {}, restart: "no" }, ctx("e"));
    expect(await engine.inspectContainer(id.slice(0, 12))).toBeNull();
    expect((await engine.inspectContainer(`${RUN}-exact`))?.id).toBe(id);
  });

  it("server.prepare twice -> one network; exact names, duplicates tolerated", async () => {
    const name = `${RUN}-net`;
    // A network whose name merely contains ours must not count (the engine's filter is a substring match).
    await docker.createNetwork({ Name: `${name}-other`, Labels: TEST_LABEL });
    const first = await handlers["server.prepare"]({ networks: [name] }, ctx("p1"));
    const second = await handlers["server.prepare"]({ networks: [name, name] }, ctx("p2"));
    expect(first).toEqual({ created: [name], existing: [] });
    expect(second).toEqual({ created: [], existing: [name] });
    const nets = (await docker.listNetworks({ filters: { name: [name] } })).filter((n) => n.Name === name);
    expect(nets).toHaveLength(1);
    expect(nets[0]?.Driver).toBe("bridge");
    expect(nets[0]?.Labels).toMatchObject({ "capstan.managed": "true", "capstan.test": "1" });

    // The engine allows two networks with one name (API < 1.44): prepare neither fails nor adds a third.
    const dup = `${RUN}-dup`;
    await docker.createNetwork({ Name: dup, Labels: TEST_LABEL, CheckDuplicate: false } as Docker.NetworkCreateOptions);
    await docker.createNetwork({ Name: dup, Labels: TEST_LABEL, CheckDuplicate: false } as Docker.NetworkCreateOptions).catch(() => {});
    const before = (await engine.listNetworks(dup)).length;
    expect(await handlers["server.prepare"]({ networks: [dup] }, ctx("p3"))).toEqual({ created: [], existing: [dup] });
    expect((await engine.listNetworks(dup)).length).toBe(before);
  });

  it("container.ensure joins its network; a missing network is a clear failure", async () => {
    const net = `${RUN}-appnet`;
    await handlers["server.prepare"]({ networks: [net] }, ctx("n"));
    const { id } = await handlers["container.ensure"]({ name: `${RUN}-onnet`, image: IMAGE, cmd: ["sleep", "3600"], labels: {}, network: net, restart: "no" }, ctx("n1"));
    expect(Object.keys((await docker.getContainer(id).inspect()).NetworkSettings.Networks)).toEqual([net]);
    await expect(
      handlers["container.ensure"]({ name: `${RUN}-nonet`, image: IMAGE, labels: {}, network: `${RUN}-nope`, restart: "no" }, ctx("n2")),
    ).rejects.toThrow(`network ${RUN}-nope does not exist on this server`);
  });

  it("containers.list shows managed containers with their composite status", async () => {
    await handlers["container.ensure"]({ name: `${RUN}-plain`, image: IMAGE, cmd: ["sleep", "3600"], labels: {}, restart: "no" }, ctx("l1"));
    // One with a health check (ContainerSpec has none yet): created directly, labelled as managed.
    const healthy = await docker.createContainer({
      name: `${RUN}-health`,
      Image: IMAGE,
      Cmd: ["sleep", "3600"],
      Labels: { ...TEST_LABEL, "capstan.managed": "true" },
      Healthcheck: { Test: ["CMD", "true"], Interval: 500_000_000, Timeout: 1_000_000_000, Retries: 1, StartPeriod: 0 },
    });
    await healthy.start();
    const stopped = await handlers["container.ensure"]({ name: `${RUN}-stopped`, image: IMAGE, cmd: ["true"], labels: {}, restart: "no" }, ctx("l2"));
    await docker.getContainer(stopped.id).wait();
    // Not managed: must not be listed.
    const unmanaged = await docker.createContainer({ name: `${RUN}-unmanaged`, Image: IMAGE, Cmd: ["sleep", "3600"], Labels: TEST_LABEL });

    let mine: Record<string, string> = {};
    await expect
      .poll(
        async () => {
          const { containers } = await handlers["containers.list"]({}, ctx("l"));
          mine = Object.fromEntries(containers.filter((c) => c.name.startsWith(RUN)).map((c) => [c.name, c.status]));
          return mine[`${RUN}-health`];
        },
        { timeout: 15_000, interval: 250 },
      )
      .toBe("running:healthy");
    expect(mine[`${RUN}-plain`]).toBe("running:unknown");
    expect(mine[`${RUN}-stopped`]).toBe("exited:unknown");
    expect(mine[`${RUN}-unmanaged`]).toBeUndefined();
    await unmanaged.remove({ force: true });
  });

  it("container.remove removes by name; a second time says removed:false", async () => {
    const name = `${RUN}-rm`;
    await handlers["container.ensure"]({ name, image: IMAGE, cmd: ["sleep", "3600"], labels: {}, restart: "no" }, ctx("rm"));
    expect(await handlers["container.remove"]({ name }, ctx("rm1"))).toEqual({ removed: true });
    expect(await handlers["container.remove"]({ name }, ctx("rm2"))).toEqual({ removed: false });
    expect(await containersNamed(name)).toHaveLength(0);
  });
});
