import { createHash } from "node:crypto";
import { posix } from "node:path";
import { LABEL_SERVICE_COMPONENT, type ResourceBackupPayload, type ResourceBackupResult, type ResourceJobBackupType, type VolumeManifest } from "@capstan/shared";
import { configurationEntry } from "./configuration.js";
import { appContainers, servingContainer } from "../deploy/app-containers.js";
import type { ContainerSummary, Engine } from "../docker/engine.js";
import { BackupToolError } from "./exec.js";
import { storeBackup } from "./store.js";
import { removeStopJournal, writeStopJournal } from "./stop-journal.js";
import { TAR_END, entryHeaders, readTar, tarPadding } from "./tar.js";

export const MANIFEST_NAME = "manifest.json";
export const VOLUMES_DIR = "volumes";

interface Ctx {
  signal: AbortSignal;
  progress(line: string): void;
}

/** What the archive is read from: the engine's tar stream of one path of a container (the volume's: a service's volumes live in several). */
export type ArchiveSource = (mountPath: string, volume: ResourceBackupPayload["volumes"][number]) => Promise<AsyncIterable<Buffer | Uint8Array | string>>;

// ---- w8/rbsources: services and databases as sources ----
/**
 * The container a volume is read and written through: its service component's newest running
 * container (else newest) for a service's volume, the resource's serving container otherwise
 * (an application's, or a standalone database's only one). Null: none on this server.
 */
export function volumeContainer(all: ContainerSummary[], volume: ResourceBackupPayload["volumes"][number]): ContainerSummary | null {
  if (volume.component === undefined) return servingContainer(all);
  return servingContainer(all.filter((c) => c.labels[LABEL_SERVICE_COMPONENT] === volume.component));
}

/** Each volume's container, or the reason a volume has none (the resource is not deployed, or a component is missing). */
export function volumeContainers(all: ContainerSummary[], p: Pick<ResourceBackupPayload, "resource" | "volumes">, then: string): Map<string, ContainerSummary> {
  const out = new Map<string, ContainerSummary>();
  const what = `the ${p.resource.kind} ${p.resource.name}`;
  if (!all.length) throw new BackupToolError(`${what} has no container on this server; ${then}`);
  for (const v of p.volumes) {
    const c = volumeContainer(all, v);
    if (!c) throw new BackupToolError(`${what} has no container of the component that mounts ${v.name} on this server; ${then}`);
    out.set(v.name, c);
  }
  return out;
}

/**
 * The archive of a resource's volumes, streamed: each volume's files under
 * `volumes/<storage name>/` (the engine's archive of its mount path, re-packed entry by entry,
 * bodies passed through as they arrive), then `manifest.json` with every regular file's path,
 * size and sha256 (hashed on the way). Directories, symbolic and hard links keep their modes,
 * owners and times; device files and FIFOs are left out with a progress line. Only the manifest
 * (a line per file) is held in memory.
 */
export async function* volumeArchive(
  resource: ResourceBackupPayload["resource"],
  volumes: ResourceBackupPayload["volumes"],
  source: ArchiveSource,
  progress: (line: string) => void,
  /** (w8/rbconfig) configuration and full backups: the type, and the configuration document added as a file */
  extra: { backupType: ResourceJobBackupType; configuration: string | null } = { backupType: "volume", configuration: null },
): AsyncGenerator<Buffer> {
  const files: VolumeManifest["files"] = [];
  for (const v of volumes) {
    const base = posix.basename(posix.normalize(v.mount_path));
    const root = `${VOLUMES_DIR}/${v.name}`;
    // The engine names the entries after the path's last segment: "data", "data/a/b".
    const rename = (name: string): string | null => {
      const n = name.replace(/\/+$/, "");
      if (n === base) return root;
      if (n.startsWith(`${base}/`)) return `${root}/${n.slice(base.length + 1)}`;
      return null;
    };
    let count = 0;
    for await (const { header, body } of readTar(await source(v.mount_path, v))) {
      const name = rename(header.name);
      if (name === null || name.split("/").includes("..")) {
        progress(`skipped ${JSON.stringify(header.name)} of ${v.name}: outside the volume`);
        continue;
      }
      const common = { mode: header.mode, uid: header.uid, gid: header.gid, mtime: header.mtime ?? 0 };
      if (header.type === "0" || header.type === "\0" || header.type === "7") {
        files.push(yield* regularEntry({ ...common, name, size: header.size }, body));
        count++;
      } else if (header.type === "5") {
        for (const b of entryHeaders({ ...common, name: `${name}/`, type: "5", size: 0 })) yield b;
      } else if (header.type === "2") {
        for (const b of entryHeaders({ ...common, name, type: "2", size: 0, linkname: header.linkname ?? "" })) yield b;
      } else if (header.type === "1") {
        const target = rename(header.linkname ?? "");
        if (target === null) {
          progress(`skipped hard link ${JSON.stringify(header.name)} of ${v.name}: its target is outside the volume`);
          continue;
        }
        for (const b of entryHeaders({ ...common, name, type: "1", size: 0, linkname: target })) yield b;
      } else {
        progress(`skipped ${JSON.stringify(header.name)} of ${v.name}: a special file (tar type ${JSON.stringify(header.type)})`);
      }
    }
    progress(`volume ${v.name} (${v.mount_path}): ${count} file(s)`);
  }
  if (extra.configuration !== null) files.push(yield* configurationEntry(extra.configuration));
  const manifest: VolumeManifest = {
    format: "capstan-volume-backup/1",
    resource: { kind: resource.kind, uuid: resource.uuid },
    ...(extra.backupType !== "volume" ? { backup_type: extra.backupType } : {}),
    volumes: volumes.map((v) => ({ name: v.name, mount_path: v.mount_path })),
    files,
  };
  const bytes = Buffer.from(JSON.stringify(manifest), "utf8");
  for (const b of entryHeaders({ name: MANIFEST_NAME, type: "0", size: bytes.length, mode: 0o600, uid: 0, gid: 0, mtime: Math.floor(Date.now() / 1000) })) yield b;
  yield bytes;
  yield tarPadding(bytes.length);
  yield TAR_END;
}

/** One regular file as a tar entry (header, body passed through, padding), hashed on the way: its manifest line. */
export async function* regularEntry(
  h: { name: string; size: number; mode: number; uid: number; gid: number; mtime: number },
  body: AsyncIterable<Buffer>,
): AsyncGenerator<Buffer, VolumeManifest["files"][number]> {
  for (const b of entryHeaders({ ...h, type: "0" })) yield b;
  const hash = createHash("sha256");
  let size = 0;
  for await (const chunk of body) {
    hash.update(chunk);
    size += chunk.length;
    yield chunk;
  }
  yield tarPadding(size);
  return { path: h.name, size, sha256: hash.digest("hex") };
}

export interface VolumeBackupOptions {
  stateDir: string;
}

/**
 * resource.backup: the volumes are read through the resource's serving container (its newest
 * running one, else its newest: the engine's archive works on stopped containers too), so the
 * backup runs live, and stored by storeBackup (gzip, OpenPGP AEAD, file, S3, retention).
 * With stop_during_backup the resource's running containers are stopped first (written to the
 * stop journal before the first stop) and started again whatever happened (the journal entry is
 * removed once they run); a crash in between is repaired at the agent's next start-up.
 */
export async function runVolumeBackup(engine: Engine, p: ResourceBackupPayload, opts: VolumeBackupOptions, ctx: Ctx): Promise<ResourceBackupResult> {
  const { signal, progress } = ctx;
  const spec = { stateDir: opts.stateDir, ownerUuid: p.resource.uuid, scheduleUuid: p.schedule_uuid, filename: p.filename, keepLocally: p.keep_locally, s3: p.s3, passphrase: p.passphrase };
  // Payloads are parsed with their defaults; callers that build one by hand (tests, benches) may leave these out.
  const extra = { backupType: p.backup_type ?? "volume", configuration: p.configuration ?? null };
  // (w8/rbconfig) a configuration backup reads no volume: no container is needed, nothing is stopped.
  if (extra.backupType === "configuration") {
    return storeBackup(spec, ctx, async (write) => {
      progress(`archiving the configuration of ${p.resource.name}${p.passphrase ? " (tar, gzip, OpenPGP encrypted)" : " (tar, gzip)"}`);
      const noVolume: ArchiveSource = async (path) => {
        throw new BackupToolError(`a configuration backup reads no volume (${path})`);
      };
      await write(volumeArchive(p.resource, [], noVolume, progress, extra));
    });
  }
  const all = await appContainers(engine, p.resource.uuid, signal);
  const containers = volumeContainers(all, p, "deploy it first");
  const store = () =>
    storeBackup(spec, ctx, async (write) => {
      const names = [...new Set([...containers.values()].map((c) => c.name))];
      progress(`archiving ${p.volumes.length} volume(s) of ${p.resource.name} from container ${names.join(", ")}${p.passphrase ? " (tar, gzip, OpenPGP encrypted)" : " (tar, gzip)"}`);
      const source: ArchiveSource = async (path, volume) => {
        const container = containers.get(volume.name)!;
        try {
          return (await engine.getArchive(container.id, path, signal)) as AsyncIterable<Buffer>;
        } catch (err) {
          throw new BackupToolError(`reading ${path} of container ${container.name} failed: ${(err as Error).message}`);
        }
      };
      await write(volumeArchive(p.resource, p.volumes, source, progress, extra));
    });
  if (!p.stop_during_backup) return store();
  return stoppedDuring(engine, { stateDir: opts.stateDir, resourceUuid: p.resource.uuid, journalKey: p.execution_uuid, label: "stop_during_backup", doneNote: "the backup was stored, but " }, ctx, all.filter((c) => c.state === "running"), store);
}

/** Whose containers stoppedDuring stops, under which journal key, and how its lines and failures read. */
export interface StopRun {
  stateDir: string;
  resourceUuid: string;
  /** the stop journal entry's key (a backup's or restore's execution) */
  journalKey: string;
  /** the progress lines' prefix */
  label: string;
  /** said before "starting the containers again failed" when `fn` itself succeeded */
  doneNote: string;
}

/** Seconds a container gets to stop before the engine kills it (as for an application's stop). */
const STOP_TIMEOUT_S = 30;

/** Runs `fn` with `running` stopped (journalled first), then starts them again, also when `fn` fails. */
export async function stoppedDuring<T>(engine: Engine, run: StopRun, ctx: Ctx, running: { id: string; name: string }[], fn: () => Promise<T>): Promise<T> {
  const { progress } = ctx;
  if (running.length === 0) {
    progress(`${run.label}: no container of the resource is running; nothing to stop`);
    return fn();
  }
  const containers = running.map((c) => ({ id: c.id, name: c.name }));
  await writeStopJournal(run.stateDir, { resource_uuid: run.resourceUuid, execution_uuid: run.journalKey, containers, at: new Date().toISOString() });
  let outcome: { ok: true; value: T } | { ok: false; err: unknown };
  try {
    progress(`${run.label}: stopping ${containers.map((c) => c.name).join(", ")}`);
    // Not under the job's signal: a cancelled backup still stops and starts as a whole.
    for (const c of containers) await engine.stopContainer(c.id, STOP_TIMEOUT_S);
    outcome = { ok: true, value: await fn() };
  } catch (err) {
    outcome = { ok: false, err };
  }
  const failed: string[] = [];
  for (const c of containers) {
    try {
      await engine.startContainer(c.id);
    } catch (err) {
      failed.push(`${c.name}: ${(err as Error).message}`);
    }
  }
  if (failed.length) {
    // The entry stays: the agent's next start-up tries again.
    const stored = outcome.ok ? run.doneNote : "";
    throw new BackupToolError(`${stored}starting the resource's containers again failed (${failed.join("; ")}); the agent tries again at its next start`);
  }
  await removeStopJournal(run.stateDir, run.journalKey);
  progress(`${run.label}: started ${containers.map((c) => c.name).join(", ")} again`);
  if (!outcome.ok) throw outcome.err;
  return outcome.value;
}
