import type { Db } from "../db/client.js";
import type { TeamScope } from "../domain/scope.js";
import { NotFound, Invalid, Conflict } from "../domain/errors.js";
import { newUuid } from "../lib/ids.js";
import { parsePrivateKey } from "../crypto/ssh-key.js";
import type { SecretBox } from "../crypto/secret-box.js";

type Window = { skip?: number; take?: number };

/**
 * SSH private keys of a team (/security/keys). The private part is sealed with the instance
 * key and never leaves the control plane through the API; only servers and deploy-key
 * clones use it.
 */
export class PrivateKeyService {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
  ) {}

  private parse(text: string) {
    const parsed = parsePrivateKey(text);
    if ("error" in parsed) throw new Invalid({ private_key: [parsed.error] });
    return parsed;
  }

  count(scope: TeamScope) {
    return this.db.privateKey.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, window: Window) {
    return this.db.privateKey.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, ...window });
  }

  get(scope: TeamScope, uuid: string) {
    return scope.privateKey(uuid);
  }

  /** The decrypted key, for server connections and git clones inside the control plane. */
  async reveal(teamId: number, uuid: string): Promise<string> {
    const key = await this.db.privateKey.findFirst({ where: { uuid, teamId } });
    if (!key) throw new NotFound("Private key");
    return this.box.open(key.privateKeyEncrypted);
  }

  async create(scope: TeamScope, input: { name: string; description?: string | undefined; private_key: string }) {
    scope.requireTeamAdmin("manage private keys");
    const parsed = this.parse(input.private_key);
    return this.db.privateKey.create({
      data: {
        uuid: newUuid(),
        teamId: scope.teamId,
        name: input.name,
        description: input.description ?? "",
        privateKeyEncrypted: this.box.seal(input.private_key.trim() + "\n"),
        publicKey: parsed.publicKey,
        fingerprint: parsed.fingerprint,
      },
    });
  }

  async update(
    scope: TeamScope,
    uuid: string,
    input: { name?: string | undefined; description?: string | undefined; private_key?: string | undefined },
  ) {
    scope.requireTeamAdmin("manage private keys");
    const key = await this.get(scope, uuid);
    const data: Record<string, string> = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.description !== undefined) data.description = input.description;
    if (input.private_key !== undefined) {
      const parsed = this.parse(input.private_key);
      data.privateKeyEncrypted = this.box.seal(input.private_key.trim() + "\n");
      data.publicKey = parsed.publicKey;
      data.fingerprint = parsed.fingerprint;
    }
    return this.db.privateKey.update({ where: { id: key.id }, data });
  }

  async remove(scope: TeamScope, uuid: string): Promise<void> {
    scope.requireTeamAdmin("manage private keys");
    const key = await this.get(scope, uuid);
    const users = await this.db.server.count({ where: { privateKeyId: key.id } });
    if (users > 0) throw new Conflict(`This key is used by ${users} server(s); assign them another key first.`);
    const apps = await this.db.application.count({ where: { privateKeyId: key.id } });
    if (apps > 0) throw new Conflict(`This key is the deploy key of ${apps} application(s); delete them first.`);
    await this.db.privateKey.delete({ where: { id: key.id } });
  }
}
