import { ALL_FEATURES, FEATURES, TOKEN_SCOPES, storedFeatures, type Feature, type TeamRole, type TokenScope } from "@capstan/shared";
import type { Db } from "../db/client.js";
import { isUniqueViolation } from "../db/errors.js";
import { generateApiToken, hashApiToken } from "../crypto/api-token.js";
import { generateAgentToken, hashAgentToken } from "../crypto/agent-token.js";
import { parsePrivateKey } from "../crypto/ssh-key.js";
import type { SecretBox } from "../crypto/secret-box.js";
import { newUuid } from "../lib/ids.js";
import { DEFAULT_NETWORK, PREPARE_TIMEOUT_MS } from "./servers.js";
import { enqueueJob } from "../jobs/queue.js";
import ssh2 from "ssh2";

export class AdminError extends Error {}

/**
 * Instance administration behind the `capstan` command line: teams, users, memberships and
 * API tokens. The REST API deliberately has no endpoint for these (spec 4.1 and 5).
 */
export class AdminService {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    /** Paid features of a new team (PLATFORM_DEFAULT_TEAM_FEATURES). */
    private readonly defaultTeamFeatures: readonly Feature[] = [],
  ) {}

  async createTeam(name: string, description = ""): Promise<number> {
    const team = await this.db.team.create({ data: { name, description, features: this.defaultTeamFeatures.join(",") } });
    return team.id;
  }

  /**
   * A team's settings; `change` sets the given ones first. The REST API lets the team's owners
   * change them too (PATCH /teams/current/settings); this is the instance administrator's way.
   */
  async teamSettings(teamId: number, change: { allowMemberBindMounts?: boolean } = {}): Promise<{ allowMemberBindMounts: boolean }> {
    await this.requireTeam(teamId);
    const team =
      change.allowMemberBindMounts === undefined
        ? await this.db.team.findUniqueOrThrow({ where: { id: teamId } })
        : await this.db.team.update({ where: { id: teamId }, data: { allowMemberBindMounts: change.allowMemberBindMounts } });
    return { allowMemberBindMounts: team.allowMemberBindMounts };
  }

  /** The team's paid features; `all` when it has every one, also those of later releases (the root team). */
  async teamFeatures(teamId: number): Promise<{ features: Feature[]; all: boolean }> {
    const team = await this.requireTeam(teamId);
    return { features: storedFeatures(team.features), all: team.features.trim() === ALL_FEATURES };
  }

  /**
   * Turns paid features of a team on and off (docs/features.md); takes effect on the team's next
   * request (the features are read with the token). Disabling one of "every feature" leaves the
   * explicit list of the others.
   */
  async setTeamFeatures(teamId: number, change: { enable?: readonly Feature[]; disable?: readonly Feature[] }): Promise<{ features: Feature[]; all: boolean }> {
    const enable = change.enable ?? [];
    const disable = change.disable ?? [];
    const both = enable.filter((f) => disable.includes(f));
    if (both.length) throw new AdminError(`cannot both enable and disable ${both.join(", ")}`);
    return this.db.$transaction(async (tx) => {
      const team = await tx.team.findUnique({ where: { id: teamId } });
      if (!team) throw new AdminError(`team ${teamId} does not exist`);
      const all = team.features.trim() === ALL_FEATURES;
      if (all && !disable.length) return { features: [...FEATURES], all: true };
      const current = new Set(storedFeatures(team.features));
      for (const f of enable) current.add(f);
      for (const f of disable) current.delete(f);
      const features = FEATURES.filter((f) => current.has(f));
      await tx.team.update({ where: { id: teamId }, data: { features: features.join(",") } });
      return { features, all: false };
    });
  }

  listTeams() {
    return this.db.team.findMany({ orderBy: { id: "asc" }, include: { _count: { select: { memberships: true } } } });
  }

  async createUser(name: string, email: string): Promise<number> {
    try {
      return (await this.db.user.create({ data: { name, email: email.toLowerCase() } })).id;
    } catch (err) {
      if (isUniqueViolation(err)) throw new AdminError(`a user with email ${email} already exists`);
      throw err;
    }
  }

  listUsers() {
    return this.db.user.findMany({ orderBy: { id: "asc" } });
  }

  private async requireTeam(teamId: number) {
    const team = await this.db.team.findUnique({ where: { id: teamId } });
    if (!team) throw new AdminError(`team ${teamId} does not exist`);
    return team;
  }

  private async requireUser(userId: number) {
    const user = await this.db.user.findUnique({ where: { id: userId } });
    if (!user) throw new AdminError(`user ${userId} does not exist`);
    return user;
  }

  /** Adds the user to the team or changes its role there. */
  async setMember(teamId: number, userId: number, role: TeamRole): Promise<void> {
    await this.requireTeam(teamId);
    await this.requireUser(userId);
    await this.db.membership.upsert({
      where: { teamId_userId: { teamId, userId } },
      create: { teamId, userId, role },
      update: { role },
    });
  }

  /** Removing a member also ends its tokens for that team and its grants there. */
  async removeMember(teamId: number, userId: number): Promise<void> {
    await this.db.$transaction(async (tx) => {
      const m = await tx.membership.findUnique({ where: { teamId_userId: { teamId, userId } } });
      if (!m) throw new AdminError(`user ${userId} is not a member of team ${teamId}`);
      await tx.membership.delete({ where: { id: m.id } });
      await tx.apiToken.updateMany({ where: { teamId, userId, revokedAt: null }, data: { revokedAt: new Date() } });
      await tx.projectPermission.deleteMany({ where: { userId, project: { teamId } } });
      await tx.environmentPermission.deleteMany({ where: { userId, environment: { project: { teamId } } } });
    });
  }

  listMembers(teamId: number) {
    return this.db.membership.findMany({ where: { teamId }, include: { user: true }, orderBy: { id: "asc" } });
  }

  /** Returns the token; only its hash is stored, so this is the one time it is seen. */
  async createToken(input: {
    teamId: number;
    name: string;
    scopes: TokenScope[];
    userId?: number | undefined;
    expiresAt?: Date | undefined;
  }): Promise<string> {
    await this.requireTeam(input.teamId);
    if (input.userId !== undefined) {
      const m = await this.db.membership.findUnique({ where: { teamId_userId: { teamId: input.teamId, userId: input.userId } } });
      if (!m) throw new AdminError(`user ${input.userId} is not a member of team ${input.teamId}`);
    }
    const scopes = TOKEN_SCOPES.filter((s) => input.scopes.includes(s));
    if (!scopes.length) throw new AdminError("a token needs at least one scope");
    const token = generateApiToken();
    await this.db.apiToken.create({
      data: {
        teamId: input.teamId,
        userId: input.userId ?? null,
        name: input.name,
        secretHash: hashApiToken(token),
        scopes: scopes.join(","),
        expiresAt: input.expiresAt ?? null,
      },
    });
    return token;
  }

  listTokens(teamId?: number) {
    return this.db.apiToken.findMany({
      where: teamId === undefined ? {} : { teamId },
      orderBy: { id: "asc" },
      select: { id: true, teamId: true, userId: true, name: true, scopes: true, lastUsedAt: true, expiresAt: true, revokedAt: true, createdAt: true },
    });
  }

  async revokeToken(id: number): Promise<void> {
    const t = await this.db.apiToken.findUnique({ where: { id } });
    if (!t) throw new AdminError(`token ${id} does not exist`);
    if (!t.revokedAt) await this.db.apiToken.update({ where: { id }, data: { revokedAt: new Date() } });
  }

  /**
   * First start: a root team, its owner and one full-scope token, also when `capstan team
   * create` ran before the first start. The marker row makes this happen once even when
   * several replicas start together.
   */
  async bootstrapRoot(rootEmail: string): Promise<string | null> {
    if (await this.db.instanceSetting.findUnique({ where: { key: "root_bootstrapped" } })) return null;
    try {
      return await this.db.$transaction(async (tx) => {
        await tx.instanceSetting.create({ data: { key: "root_bootstrapped", value: new Date().toISOString() } });
        // The root team has every paid feature, also those of later releases (ALL_FEATURES).
        const team = await tx.team.create({ data: { name: "Root Team", description: "Created on first start", features: ALL_FEATURES } });
        const user = await tx.user.upsert({ where: { email: rootEmail }, create: { name: "root", email: rootEmail }, update: {} });
        await tx.membership.create({ data: { teamId: team.id, userId: user.id, role: "owner" } });
        const token = generateApiToken();
        await tx.apiToken.create({
          data: { teamId: team.id, userId: user.id, name: "root", secretHash: hashApiToken(token), scopes: TOKEN_SCOPES.join(",") },
        });
        return token;
      });
    } catch (err) {
      if (isUniqueViolation(err)) return null;
      throw err;
    }
  }

  /**
   * The "localhost" server of the root team, for the agent that `npm start` runs beside the
   * control plane. Each call issues a fresh agent token (the previous one stops working), so
   * the token never needs to be stored anywhere.
   */
  async localAgentToken(): Promise<{ serverUuid: string; token: string }> {
    const team = await this.db.team.findFirst({ orderBy: { id: "asc" } });
    if (!team) throw new AdminError("no team exists yet: start the control plane once first");
    const token = generateAgentToken();
    const existing = await this.db.server.findFirst({ where: { teamId: team.id, isLocal: true } });
    if (existing) {
      await this.db.server.update({ where: { id: existing.id }, data: { agentTokenHash: hashAgentToken(token) } });
      return { serverUuid: existing.uuid, token };
    }
    const pair = ssh2.utils.generateKeyPairSync("ed25519", { comment: "capstan-localhost" });
    const parsed = parsePrivateKey(pair.private);
    if ("error" in parsed) throw new Error(parsed.error);
    const uuid = newUuid();
    await this.db.$transaction(async (tx) => {
      const key = await tx.privateKey.create({
        data: {
          uuid: newUuid(),
          teamId: team.id,
          name: "localhost",
          description: "Generated for the local server",
          privateKeyEncrypted: this.box.seal(pair.private),
          publicKey: parsed.publicKey,
          fingerprint: parsed.fingerprint,
        },
      });
      const server = await tx.server.create({
        data: {
          uuid,
          teamId: team.id,
          name: "localhost",
          description: "The machine the control plane runs on",
          ip: "127.0.0.1",
          privateKeyId: key.id,
          isLocal: true,
          agentTokenHash: hashAgentToken(token),
          destinations: { create: { uuid: newUuid(), name: "default", networkName: DEFAULT_NETWORK } },
        },
      });
      await enqueueJob(tx, this.box, server.id, "server.prepare", { networks: [DEFAULT_NETWORK] }, PREPARE_TIMEOUT_MS);
    });
    return { serverUuid: uuid, token };
  }
}
