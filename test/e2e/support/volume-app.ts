import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ResourceBackupPayload, S3Target } from "@capstan/shared";
import { DockerodeEngine } from "../../../agent/src/docker/dockerode-engine.js";
import type { JobContext } from "../../../agent/src/dispatch/types.js";
import { createHandlers } from "../../../agent/src/handlers/index.js";
import { startS3Server, type S3Server } from "../../support/s3-server.js";
import { removeLabelled, sh } from "./kit.js";

/**
 * The setup resource backup and restore e2e tests share (resource-backups.test.ts,
 * resource-restore.test.ts): the agent's handlers in this process on the real local engine (as a
 * host-process agent runs them), a real S3-compatible server, and applications made of a
 * busybox container labelled as the agent labels an application's, with two named volumes
 * (<uuid>-site at /srv/site, <uuid>-uploads at /data/uploads). Everything is labelled with the
 * run and removed by label.
 */
export interface VolumeAppKit {
  run: string;
  labels: Record<string, string>;
  engine: DockerodeEngine;
  handlers: ReturnType<typeof createHandlers>;
  stateDir: string;
  s3: S3Server;
  target: S3Target;
  job(): JobContext & { lines: string[] };
  /** The application's container `<uuid>-app`, filled by `script` (which must `touch /srv/site/.ready` last). */
  app(uuid: string, script: string): Promise<void>;
  payload(uuid: string, opts?: { passphrase?: string | null; s3?: S3Target | null; keepLocally?: number }): ResourceBackupPayload;
  stop(): Promise<void>;
}

export async function startVolumeAppKit(): Promise<VolumeAppKit> {
  const run = randomBytes(4).toString("hex");
  const labels = { "capstan.test": "1", "capstan.test.run": run };
  const engine = new DockerodeEngine();
  const stateDir = await mkdtemp(join(tmpdir(), "capstan-agent-state-"));
  const s3 = await startS3Server({ buckets: ["capstan-backups"] });
  const target: S3Target = { endpoint: s3.endpoint, region: "us-east-1", bucket: s3.bucket, path_style: true, access_key: s3.accessKey, secret_key: s3.secretKey, allow_private: true };
  // The helper container of resource.restore: the agent's own image in production, busybox here.
  const handlers = createHandlers(engine, { extraLabels: labels, stateDir, db: { pollMs: 100, stopTimeoutS: 10 }, helperImage: async () => "capstan-test/busybox" });
  return {
    run,
    labels,
    engine,
    handlers,
    stateDir,
    s3,
    target,
    job() {
      const lines: string[] = [];
      return { signal: AbortSignal.timeout(120_000), progress: (l) => void lines.push(l), job: { id: `job-${randomUUID()}`, attempt: 1 }, lines };
    },
    async app(uuid, script) {
      const l = Object.entries(labels).flatMap(([k, v]) => ["--label", `${k}=${v}`]);
      for (const v of ["site", "uploads"]) await sh("docker", ["volume", "create", ...l, `${uuid}-${v}`]);
      await sh("docker", [
        "run", "-d", "--name", `${uuid}-app`, ...l, "--label", "capstan.managed=true", "--label", `capstan.resource.uuid=${uuid}`,
        "-v", `${uuid}-site:/srv/site`, "-v", `${uuid}-uploads:/data/uploads`,
        // A shell that exits on SIGTERM (a stop then does not wait its full timeout).
        // The script fills the volumes once (not again when the container is started again).
        "capstan-test/busybox", "sh", "-c", `{ test -f /srv/site/.ready || { ${script}; }; } && trap 'exit 0' TERM; while true; do sleep 1; done`,
      ]);
      // The script has run once the marker exists.
      for (let i = 0; i < 100; i++) {
        if ((await sh("docker", ["exec", `${uuid}-app`, "sh", "-c", "test -f /srv/site/.ready && echo yes"]).catch(() => "")).trim() === "yes") return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error("the application container did not get ready");
    },
    payload(uuid, opts = {}) {
      const execution = randomUUID();
      const passphrase = opts.passphrase ?? null;
      return {
        resource: { kind: "application", uuid, name: `app ${uuid.slice(0, 8)}` },
        volumes: [
          { name: "site", mount_path: "/srv/site" },
          { name: "uploads", mount_path: "/data/uploads" },
        ],
        schedule_uuid: "schedule-1",
        execution_uuid: execution,
        filename: `volume-20260301T030000Z-${execution.slice(0, 8)}.tar.gz${passphrase ? ".gpg" : ""}`,
        keep_locally: opts.keepLocally ?? 3,
        s3: opts.s3 === null ? null : { target: opts.s3 ?? target, prefix: `capstan/${uuid}/`, keep_remote: null },
        passphrase,
        stop_during_backup: false,
        backup_type: "volume",
        configuration: null,
      };
    },
    async stop() {
      await removeLabelled(run);
      await s3.stop();
      await rm(stateDir, { recursive: true, force: true });
    },
  };
}
