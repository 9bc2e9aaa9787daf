import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { rm } from "node:fs/promises";
import { join, posix } from "node:path";
import type { ResourceRestorePayload, ResourceRestoreResult } from "@capstan/shared";
import { appContainers } from "../deploy/app-containers.js";
import type { ContainerMount, Engine } from "../docker/engine.js";
import { checkConfiguration } from "./configuration.js";
import { BackupToolError } from "./exec.js";
import { ensurePrivateDir } from "./paths.js";
import { openSource } from "./restore.js";
import { openVolumeArchive, stageVolumeArchive, type StagedVolumes } from "./volume-stage.js";
import { VOLUMES_DIR, stoppedDuring, volumeContainers } from "./volumes.js";

// ---- resource restores (issue 19, w7/restore) ----

interface Ctx {
  signal: AbortSignal;
  progress(line: string): void;
}

export interface VolumeRestoreOptions {
  stateDir: string;
  /** The image of the helper container that empties the volumes (the agent's own image; tests: a busybox). */
  helperImage: () => Promise<string | null>;
  /** Labels on the helper container (tests: capstan.test=1). */
  extraLabels?: Record<string, string>;
  /** How often the helper container is polled for its end (default 200 ms). */
  pollMs?: number;
}

/** Where the staged archive is written: `<state dir>/restore-staging/<execution>.tar` (private). */
export const stagingDir = (stateDir: string) => join(stateDir, "restore-staging");
/** Where the helper container mounts the volumes: `<root>/volumes/<storage name>`, the staged tar's own layout. */
const HELPER_ROOT = "/capstan-restore";
/** The helper's emptying of each volume gets this long. */
const HELPER_TIMEOUT_MS = 10 * 60_000;

/**
 * resource.restore: the backup file (on this server, else in S3) is streamed, decrypted
 * (OpenPGP AEAD: a tampered byte fails its chunk's tag) and gunzipped into a staging tar on the
 * agent's disk, every file checked against the archive's manifest (paths, sizes, sha256; a
 * truncated archive lacks files or its manifest). Only then are the application's running
 * containers stopped (journalled first, as stop_during_backup: started again whatever happens,
 * also after an agent crash), each archived volume emptied by a helper container that mounts
 * it, and the staged files written into it through the engine's archive API. The staging file
 * goes in every case. Volumes of the application that the archive does not have are left as
 * they are.
 */
export async function runVolumeRestore(engine: Engine, p: ResourceRestorePayload, opts: VolumeRestoreOptions, ctx: Ctx): Promise<ResourceRestoreResult> {
  // (w8/rbconfig) a configuration restore touches no container: the document is checked and handed back.
  if (p.backup_type === "configuration") return configurationRestore(p, opts, ctx);
  const { signal, progress } = ctx;
  const all = await appContainers(engine, p.resource.uuid, signal);
  // w8/rbsources: each volume through its own container (a service's components each mount theirs).
  const containers = volumeContainers(all, p, "deploy it first, then restore");
  const mountsOf = new Map<string, ContainerMount[]>();
  for (const c of new Set(containers.values())) mountsOf.set(c.name, (await engine.inspectContainer(c.name, signal))?.mounts ?? []);
  const image = await opts.helperImage();
  if (!image) throw new BackupToolError("no helper image to empty the volumes with (the agent does not run in a container: set CAPSTAN_AGENT_HELPER_IMAGE)");

  const staging = await stagingFile(opts.stateDir, p.execution_uuid);
  try {
    const staged = await stage(p, opts.stateDir, p.volumes.map((v) => v.name), staging, ctx);
    // (w8/rbconfig) full: the configuration document is checked too before anything is stopped.
    const configuration = p.backup_type === "full" ? checkConfiguration(staged.configuration) : null;
    const names = staged.manifest.volumes.map((v) => v.name);
    const unknown = names.filter((n) => !p.volumes.some((v) => v.name === n));
    if (unknown.length) throw new BackupToolError(`the backup has storages this ${p.resource.kind} does not have now: ${unknown.join(", ")}`);
    progress(`the archive checked out against its manifest: ${staged.files} file(s), ${staged.bytes} bytes in ${names.length} volume(s)`);
    const targets = names.map((name) => {
      const v = p.volumes.find((x) => x.name === name)!;
      const container = containers.get(name)!;
      const mount = mountsOf.get(container.name)!.find((m) => posix.normalize(m.target) === posix.normalize(v.mount_path));
      if (!mount) throw new BackupToolError(`the container ${container.name} has no mount at ${v.mount_path} (storage ${name}); redeploy the ${p.resource.kind}, then restore`);
      return { name, mount };
    });
    signal.throwIfAborted();
    const running = all.filter((c) => c.state === "running");
    await stoppedDuring(
      engine,
      { stateDir: opts.stateDir, resourceUuid: p.resource.uuid, journalKey: `restore-${p.execution_uuid}`, label: "restore", doneNote: "the volumes were restored, but " },
      ctx,
      running,
      () => swap(engine, image, targets, staging, opts, ctx, p.execution_uuid),
    );
    return { files: staged.files, bytes: staged.bytes, volumes: names, configuration };
  } finally {
    await rm(staging, { force: true });
  }
}

/**
 * (w8/rbconfig) resource.restore of a configuration backup: the archive is read and checked
 * against its manifest like a volume archive (it has no volume entries), its document against the
 * shared schema; the control plane applies it when the job has succeeded (its outcome).
 */
async function configurationRestore(p: ResourceRestorePayload, opts: VolumeRestoreOptions, ctx: Ctx): Promise<ResourceRestoreResult> {
  const staging = await stagingFile(opts.stateDir, p.execution_uuid);
  try {
    const staged = await stage(p, opts.stateDir, [], staging, ctx);
    const configuration = checkConfiguration(staged.configuration);
    ctx.progress(`the archive checked out against its manifest: the configuration document (${Buffer.byteLength(configuration)} bytes)`);
    return { files: 0, bytes: 0, volumes: [], configuration };
  } finally {
    await rm(staging, { force: true });
  }
}

/** The private staging file of a restore: `<state dir>/restore-staging/<execution>.tar`. */
async function stagingFile(stateDir: string, executionUuid: string): Promise<string> {
  await ensurePrivateDir(stagingDir(stateDir));
  return join(stagingDir(stateDir), `${executionUuid}.tar`);
}

/** The stored backup streamed (server or S3), opened and staged, checked against its manifest (volume-stage.ts). */
async function stage(p: ResourceRestorePayload, stateDir: string, volumes: string[], staging: string, ctx: Ctx): Promise<StagedVolumes> {
  const source = await openSource(p, stateDir, ctx.signal, ctx.progress);
  try {
    return await stageVolumeArchive(await openVolumeArchive(source, p.passphrase), volumes, staging);
  } finally {
    source.destroy();
  }
}

/** Empties each volume with a helper container that mounts it, then writes the staged tar into them. */
async function swap(engine: Engine, image: string, targets: { name: string; mount: ContainerMount }[], staging: string, opts: VolumeRestoreOptions, ctx: Ctx, executionUuid: string): Promise<void> {
  const { progress } = ctx;
  const name = `capstan-restore-${executionUuid.slice(0, 8)}-${randomBytes(3).toString("hex")}`;
  const dirs = targets.map((t) => `${HELPER_ROOT}/${VOLUMES_DIR}/${t.name}`);
  // Every entry of each volume, hidden ones too (globs that match nothing stay literal: rm -f ignores them).
  const script = 'for d in "$@"; do rm -rf -- "$d"/* "$d"/.[!.]* "$d"/..?* || exit 1; done';
  const { id } = await engine.createContainer({
    name,
    image,
    entrypoint: ["sh", "-c", script, "sh"],
    cmd: dirs,
    labels: { ...(opts.extraLabels ?? {}), "capstan.restore-helper": executionUuid },
    restart: "no",
    mounts: targets.map((t, i) => ({ type: t.mount.type, source: t.mount.source, target: dirs[i]! })),
  });
  try {
    progress(`emptying ${targets.map((t) => t.name).join(", ")}`);
    await engine.startContainer(id);
    const deadline = Date.now() + HELPER_TIMEOUT_MS;
    for (;;) {
      const d = await engine.inspectContainer(name);
      if (!d) throw new BackupToolError("the restore's helper container vanished");
      if (!d.running && d.state !== "created") {
        if (d.exitCode !== 0) {
          const logs = await engine.containerLogs(id, { since: 0, tail: 20, timestamps: false, maxBytes: 4096 }).catch(() => ({ lines: [] as string[] }));
          throw new BackupToolError(`emptying the volumes failed (exit ${d.exitCode}): ${logs.lines.join(" ").slice(0, 500)}`);
        }
        break;
      }
      if (Date.now() > deadline) throw new BackupToolError(`emptying the volumes took longer than ${HELPER_TIMEOUT_MS / 60_000} minutes`);
      await new Promise((r) => setTimeout(r, opts.pollMs ?? 200));
    }
    progress("writing the backup's files into the volumes");
    // Not under the job's signal: once the volumes are emptied, their files go back in whole.
    await engine.putArchive(id, HELPER_ROOT, createReadStream(staging));
  } finally {
    await engine.removeContainer(id).catch((err: Error) => progress(`removing the helper container ${name} failed: ${err.message}`));
  }
}
