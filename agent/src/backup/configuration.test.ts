import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { gzipSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { APPLICATION_CONFIGURATION_FORMAT, CONFIGURATION_FILE, DATABASE_CONFIGURATION_FORMAT, VolumeManifest, type ApplicationConfiguration, type DatabaseConfiguration, type ResourceBackupPayload, type ResourceRestorePayload } from "@capstan/shared";
import type { Engine } from "../docker/engine.js";
import { TAR_END, entryHeaders, readTar, tarPadding } from "./tar.js";
import { runVolumeRestore } from "./volume-restore.js";
import { openVolumeArchive } from "./volume-stage.js";
import { MANIFEST_NAME, runVolumeBackup } from "./volumes.js";

/**
 * Configuration backups and restores on the agent (issue 19, w8/rbconfig), with real files,
 * gzip and OpenPGP: the archive holds configuration.json and a manifest listing it with its
 * sha256; the restore hands the document back once the archive checks out, and a tampered,
 * truncated or unreadable one fails with the reason. No container is touched: the engine here
 * throws on any call.
 */
const engine = new Proxy({}, { get: (_t, name) => () => Promise.reject(new Error(`the engine was called (${String(name)})`)) }) as unknown as Engine;

const doc = (over: Partial<ApplicationConfiguration["application"]> = {}): string =>
  JSON.stringify({
    format: APPLICATION_CONFIGURATION_FORMAT,
    kind: "application",
    taken_at: "2026-11-27T09:00:00.000Z",
    application: {
      uuid: "app-1",
      name: "web",
      description: "",
      source: "dockerimage",
      build_pack: "containerimage",
      git_repository: null,
      git_branch: null,
      base_directory: "/",
      git_app_uuid: null,
      private_key_uuid: null,
      dockerfile: null,
      docker_registry_image_name: "nginx:1",
      docker_compose_raw: null,
      ports_exposes: "80",
      fqdn: "https://web.example.com",
      health_check_enabled: false,
      health_check_path: "/",
      health_check_port: null,
      health_check_interval: 5,
      health_check_timeout: 5,
      health_check_retries: 10,
      health_check_start_period: 5,
      limits_memory: null,
      limits_cpus: null,
      ...over,
    },
    envs: [{ uuid: "env-1", key: "TOKEN", value_sealed: "v1:aXY=:dGFn:Ym9keQ==", is_build_time: false, is_preview: false, is_generated: false }],
    storages: [{ uuid: "vol-1", name: "data", mount_path: "/data", host_path: null }],
  } satisfies ApplicationConfiguration);

function setup() {
  const stateDir = mkdtempSync(join(tmpdir(), "capstan-config-state-"));
  const lines: string[] = [];
  const ctx = { signal: AbortSignal.timeout(30_000), progress: (l: string) => void lines.push(l) };
  const backup = (text: string, passphrase: string | null): ResourceBackupPayload => ({
    resource: { kind: "application", uuid: "app-1", name: "web" },
    volumes: [],
    schedule_uuid: "s-1",
    execution_uuid: "exec-1",
    filename: `configuration-20261127T090000Z-exec0001.tar.gz${passphrase ? ".gpg" : ""}`,
    keep_locally: 5,
    s3: null,
    passphrase,
    stop_during_backup: false,
    backup_type: "configuration",
    configuration: text,
  });
  const restore = (localPath: string, passphrase: string | null): ResourceRestorePayload => ({
    resource: { kind: "application", uuid: "app-1", name: "web" },
    volumes: [],
    execution_uuid: "exec-1",
    from: { local_path: localPath, s3: null },
    passphrase,
    backup_type: "configuration",
    apply: null,
  });
  const opts = { stateDir, helperImage: async () => null };
  /** A file under the schedule's backup directory (restores read only from there). */
  const place = (name: string, bytes: Buffer) => {
    const dir = join(stateDir, "backups", "app-1", "s-1");
    mkdirSync(dir, { recursive: true });
    const path = join(dir, name);
    writeFileSync(path, bytes);
    return path;
  };
  return { stateDir, lines, ctx, backup, restore, opts, place };
}

/** A gzipped tar of configuration.json (`text`) and a manifest that lists `listed` as its contents. */
function handMade(text: string, listed: string): Buffer {
  const body = Buffer.from(text);
  const listedBytes = Buffer.from(listed);
  const manifest: VolumeManifest = {
    format: "capstan-volume-backup/1",
    resource: { kind: "application", uuid: "app-1" },
    backup_type: "configuration",
    volumes: [],
    files: [{ path: CONFIGURATION_FILE, size: listedBytes.length, sha256: createHash("sha256").update(listedBytes).digest("hex") }],
  };
  const m = Buffer.from(JSON.stringify(manifest));
  const h = { type: "0", mode: 0o600, uid: 0, gid: 0, mtime: 0 };
  return gzipSync(
    Buffer.concat([...entryHeaders({ ...h, name: CONFIGURATION_FILE, size: body.length }), body, tarPadding(body.length), ...entryHeaders({ ...h, name: MANIFEST_NAME, size: m.length }), m, tarPadding(m.length), TAR_END]),
  );
}

describe("configuration backups on the agent", () => {
  it("archives the document alone (no container read), encrypted, with a manifest listing it; the restore hands it back", async () => {
    const t = setup();
    const text = doc();
    const r = await runVolumeBackup(engine, t.backup(text, "correct horse"), { stateDir: t.stateDir }, t.ctx);
    expect(r.is_encrypted).toBe(true);
    expect(r.local_path).toMatch(/configuration-20261127T090000Z-exec0001\.tar\.gz\.gpg$/);
    const bytes = readFileSync(r.local_path!);
    expect(bytes.includes(Buffer.from("v1:aXY="))).toBe(false);

    const names: string[] = [];
    let manifest: VolumeManifest | null = null;
    let stored = "";
    for await (const e of readTar(await openVolumeArchive(Readable.from([bytes]), "correct horse"))) {
      const chunks: Buffer[] = [];
      for await (const c of e.body) chunks.push(c);
      names.push(e.header.name);
      if (e.header.name === MANIFEST_NAME) manifest = VolumeManifest.parse(JSON.parse(Buffer.concat(chunks).toString()));
      if (e.header.name === CONFIGURATION_FILE) stored = Buffer.concat(chunks).toString();
    }
    expect(names).toEqual([CONFIGURATION_FILE, MANIFEST_NAME]);
    expect(stored).toBe(text);
    expect(manifest).toMatchObject({ backup_type: "configuration", volumes: [], files: [{ path: CONFIGURATION_FILE, size: Buffer.byteLength(text), sha256: createHash("sha256").update(text).digest("hex") }] });

    const restored = await runVolumeRestore(engine, t.restore(r.local_path!, "correct horse"), t.opts, t.ctx);
    expect(restored).toEqual({ files: 0, bytes: 0, volumes: [], configuration: text });
    expect(t.lines.join("\n")).toContain("checked out against its manifest");
  });

  it("a tampered document, a tampered or truncated archive, and a document this version cannot read fail with the reason", async () => {
    const t = setup();
    const text = doc();
    const enc = await runVolumeBackup(engine, t.backup(text, "pw"), { stateDir: t.stateDir }, t.ctx);
    const plain = await runVolumeBackup(engine, { ...t.backup(text, null), execution_uuid: "exec-2", filename: "configuration-20261127T090100Z-exec0002.tar.gz" }, { stateDir: t.stateDir }, t.ctx);

    // The document changed after its manifest was written (a domain swapped in): its sha256 no longer matches.
    const swapped = t.place("configuration-20261127T090200Z-swapped0.tar.gz", handMade(doc({ fqdn: "https://evil.example.com" }), text));
    await expect(runVolumeRestore(engine, t.restore(swapped, null), t.opts, t.ctx)).rejects.toThrow(/configuration\.json (has \d+ bytes, the manifest says|does not match its sha256)/);

    // One byte flipped in the encrypted archive: the AEAD tag fails.
    const flipped = Buffer.from(readFileSync(enc.local_path!));
    flipped[Math.floor(flipped.length / 2)]! ^= 0x20;
    const tampered = t.place("configuration-20261127T090300Z-tampered.tar.gz.gpg", flipped);
    await expect(runVolumeRestore(engine, t.restore(tampered, "pw"), t.opts, t.ctx)).rejects.toThrow(/damaged|authenticat|tag|integrity|modification/i);

    // The plain archive cut short.
    const whole = readFileSync(plain.local_path!);
    const cut = t.place("configuration-20261127T090400Z-cut00000.tar.gz", whole.subarray(0, Math.floor(whole.length / 2)));
    await expect(runVolumeRestore(engine, t.restore(cut, null), t.opts, t.ctx)).rejects.toThrow(/truncated|damaged/i);

    // A document whose manifest matches but whose format this agent does not read.
    const future = JSON.stringify({ ...JSON.parse(text), format: "capstan-application-configuration/9" });
    const unknown = t.place("configuration-20261127T090500Z-future00.tar.gz", handMade(future, future));
    await expect(runVolumeRestore(engine, t.restore(unknown, null), t.opts, t.ctx)).rejects.toThrow(/not a configuration document this agent reads/);

    // The untouched archives still restore (the failures above are the archives', not the setup's).
    expect((await runVolumeRestore(engine, t.restore(plain.local_path!, null), t.opts, t.ctx)).configuration).toBe(text);
  });

  it("a database's document round-trips as an application's does; a document of a kind this agent does not know fails", async () => {
    const t = setup();
    const text = JSON.stringify({
      format: DATABASE_CONFIGURATION_FORMAT,
      kind: "database",
      taken_at: "2026-11-27T09:00:00.000Z",
      database: { uuid: "db-1", name: "orders", description: "", engine: "postgresql", image: "postgres:16", is_public: false, public_port: null, limits_memory: null, limits_cpus: null, credentials_sealed: "v1:aXY=:dGFn:Ym9keQ==" },
      envs: [{ uuid: "env-1", key: "PGTZ", value_sealed: "v1:aXY=:dGFn:Ym9keQ==", is_preview: false }],
    } satisfies DatabaseConfiguration);
    const r = await runVolumeBackup(engine, { ...t.backup(text, null), resource: { kind: "database", uuid: "app-1", name: "orders" } }, { stateDir: t.stateDir }, t.ctx);
    expect((await runVolumeRestore(engine, t.restore(r.local_path!, null), t.opts, t.ctx)).configuration).toBe(text);
    const service = JSON.stringify({ ...JSON.parse(text), kind: "service" });
    const unknown = t.place("configuration-20261127T090700Z-service0.tar.gz", handMade(service, service));
    await expect(runVolumeRestore(engine, t.restore(unknown, null), t.opts, t.ctx)).rejects.toThrow(/not a configuration document this agent reads/);
  });

  it("a volume archive restored as a configuration one fails: it has no document", async () => {
    const t = setup();
    const bare = t.place("configuration-20261127T090600Z-bare0000.tar.gz", gzipSync(TAR_END));
    await expect(runVolumeRestore(engine, t.restore(bare, null), t.opts, t.ctx)).rejects.toThrow(/truncated|no configuration\.json/);
  });
});
