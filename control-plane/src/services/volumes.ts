import { MAX_STORAGES } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { isUniqueViolation } from "../db/errors.js";
import { assertMayAddBindMounts } from "./bind-mounts.js";

/** The Docker volume of an application's named storage on its server (agent contract). */
export const dockerVolumeName = (appUuid: string, name: string) => `${appUuid}-${name}`;

/**
 * Persistent storages of applications: named Docker volumes, or bind mounts of a host
 * directory (normalised and checked against system directories by the shared HostPath; only
 * owners and admins, or members where the team allows it, add one: bind-mounts.ts). Changes
 * take effect on the next deployment.
 */
export class VolumeService {
  constructor(private readonly db: Db) {}

  async list(scope: TeamScope, appUuid: string) {
    const app = await scope.application(appUuid, "view");
    const rows = await this.db.volume.findMany({ where: { applicationId: app.id }, orderBy: { id: "asc" } });
    return { app, rows };
  }

  async create(scope: TeamScope, appUuid: string, input: { name: string; mount_path: string; host_path?: string | null | undefined }) {
    const app = await scope.application(appUuid, "manage");
    // host_path arrives normalised and checked (shared HostPath); who may add one is the team's rule.
    if (input.host_path) await assertMayAddBindMounts(this.db, scope, [input.host_path]);
    const existing = await this.db.volume.findMany({ where: { applicationId: app.id }, select: { name: true, mountPath: true } });
    if (existing.length >= MAX_STORAGES) throw new Invalid({ name: [`An application has at most ${MAX_STORAGES} storages.`] });
    if (existing.some((v) => v.name === input.name)) throw new Conflict(`A storage named ${input.name} already exists on this application.`);
    if (existing.some((v) => v.mountPath === input.mount_path)) throw new Conflict(`Something is already mounted at ${input.mount_path} in this application.`);
    try {
      const row = await this.db.volume.create({
        data: { uuid: newUuid(), applicationId: app.id, name: input.name, mountPath: input.mount_path, hostPath: input.host_path ?? null },
      });
      return { app, row };
    } catch (err) {
      // A concurrent create of the same name or path.
      if (isUniqueViolation(err)) throw new Conflict(`A storage with this name or mount path already exists on this application.`);
      throw err;
    }
  }

  async remove(scope: TeamScope, appUuid: string, storageUuid: string): Promise<void> {
    const app = await scope.application(appUuid, "manage");
    const row = await this.db.volume.findFirst({ where: { uuid: storageUuid, applicationId: app.id }, select: { id: true } });
    if (!row) throw new NotFound("Storage");
    await this.db.volume.delete({ where: { id: row.id } });
  }
}
