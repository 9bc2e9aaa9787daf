import { isIP } from "node:net";
import {
  RegistryType,
  registryCredentialIssues,
  registryCredentials,
  type CreateRegistryBody,
  type RegistryCredentials,
  type UpdateRegistryBody,
} from "@capstan/shared";
import { isRefusedAddress } from "@capstan/shared/net";
import type { Db, Prisma } from "../../db/client.js";
import type { TeamScope } from "../../domain/scope.js";
import { Invalid } from "../../domain/errors.js";
import type { SecretBox } from "../../crypto/secret-box.js";
import type { OutboundFetch } from "../../lib/outbound.js";
import { shortReason } from "../s3-storages.js";
import { registryHandshake, type HandshakeResult } from "./handshake.js";

type Window = { skip?: number; take?: number };
export type RegistryRecord = Prisma.RegistryGetPayload<object>;

/** How long a connection test may take (every request of the handshake together). */
export const REGISTRY_TEST_TIMEOUT_MS = 20_000;

/** The value of `defaultSlot` on the team's default registry (null elsewhere; unique per team). */
const DEFAULT_SLOT = 1;

/** A cloud_a access key id as responses show it: the last 4 characters. */
export function maskKeyId(id: string): string {
  return id.length >= 12 ? `****${id.slice(-4)}` : "****";
}

/**
 * Registries of a team (/registries, spec 4.9, issue 18): container registry logins. The
 * credentials object is sealed whole with the instance key (one column), never returned; the
 * `username` column holds what responses show (a login name is not a secret: `docker login`
 * prints it; a cloud_a access key id is stored there masked only). Team-level like S3 storages:
 * every member reads, owners and admins change and test. The route table gates every route on
 * REGISTRY_MANAGEMENT.
 *
 * The connection test is an outbound request to an address of the caller's choice: literal
 * loopback/link-local/metadata addresses are refused when the registry is saved, and every
 * address a name (also the token realm the registry names) resolves to is checked when
 * connecting, unless the instance allows private endpoints (PLATFORM_ALLOW_PRIVATE_ENDPOINTS).
 */
export class RegistryService {
  constructor(
    private readonly db: Db,
    private readonly box: SecretBox,
    private readonly opts: { allowPrivate: boolean; fetch: OutboundFetch; testTimeoutMs?: number },
  ) {}

  count(scope: TeamScope) {
    return this.db.registry.count({ where: scope.inTeam });
  }

  list(scope: TeamScope, window: Window): Promise<RegistryRecord[]> {
    return this.db.registry.findMany({ where: scope.inTeam, orderBy: { id: "asc" }, ...window });
  }

  get(scope: TeamScope, id: number): Promise<RegistryRecord> {
    return scope.registry(id);
  }

  /** The stored credentials, opened (the test, and later the agents' logins). */
  credentials(r: RegistryRecord): RegistryCredentials {
    return JSON.parse(this.box.open(r.credentials)) as RegistryCredentials;
  }

  /** cloud_a: the region (not a secret; shown in responses). */
  region(r: RegistryRecord): string | null {
    if (r.type !== "cloud_a") return null;
    const c = this.credentials(r);
    return "cloud_region" in c ? c.cloud_region : null;
  }

  /** The same rule as S3 endpoints and template sources: a literal local address can never work, so it is not saved. */
  private checkUrl(url: string): void {
    if (this.opts.allowPrivate) return;
    const host = new URL(url).hostname.replace(/^\[|\]$/g, "").replace(/\.+$/, "").toLowerCase();
    if ((isIP(host) !== 0 && isRefusedAddress(host)) || host === "localhost" || host.endsWith(".localhost")) {
      throw new Invalid({
        url: [`${host} is a loopback, link-local or metadata address; refused (the instance setting PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it).`],
      });
    }
  }

  private sealed(c: RegistryCredentials): { credentials: string; username: string } {
    const username = "username" in c ? c.username : maskKeyId(c.cloud_access_key_id);
    return { credentials: this.box.seal(JSON.stringify(c)), username };
  }

  async create(scope: TeamScope, input: CreateRegistryBody): Promise<RegistryRecord> {
    scope.requireTeamAdmin("manage registries");
    this.checkUrl(input.url);
    const secret = this.sealed(registryCredentials(input.type, input.credentials));
    return this.db.$transaction(async (tx) => {
      // The default moves: the team's previous default stops being one (the unique index
      // on (teamId, defaultSlot) turns a concurrent second default into a 409).
      if (input.is_default) await tx.registry.updateMany({ where: { teamId: scope.teamId, defaultSlot: DEFAULT_SLOT }, data: { defaultSlot: null } });
      return tx.registry.create({
        data: {
          teamId: scope.teamId,
          name: input.name,
          type: input.type,
          url: input.url,
          ...secret,
          defaultSlot: input.is_default ? DEFAULT_SLOT : null,
        },
      });
    });
  }

  async update(scope: TeamScope, id: number, input: UpdateRegistryBody): Promise<RegistryRecord> {
    scope.requireTeamAdmin("manage registries");
    const r = await this.get(scope, id);
    const type = RegistryType.parse(r.type);
    if (input.credentials !== undefined) {
      const issues = registryCredentialIssues(type, input.credentials);
      if (Object.keys(issues).length) throw new Invalid(issues);
    }
    if (input.url !== undefined) this.checkUrl(input.url);
    const data: Prisma.RegistryUpdateInput = {};
    if (input.name !== undefined) data.name = input.name;
    if (input.url !== undefined) data.url = input.url;
    if (input.credentials !== undefined) Object.assign(data, this.sealed(registryCredentials(type, input.credentials)));
    if (input.is_default !== undefined) data.defaultSlot = input.is_default ? DEFAULT_SLOT : null;
    return this.db.$transaction(async (tx) => {
      if (input.is_default) await tx.registry.updateMany({ where: { teamId: scope.teamId, defaultSlot: DEFAULT_SLOT, id: { not: r.id } }, data: { defaultSlot: null } });
      return tx.registry.update({ where: { id: r.id }, data });
    });
  }

  async remove(scope: TeamScope, id: number): Promise<void> {
    scope.requireTeamAdmin("manage registries");
    const r = await this.get(scope, id);
    await this.db.registry.delete({ where: { id: r.id } });
  }

  /**
   * The connection test (spec 4.9): the registry's V2 login handshake from the control plane
   * (handshake.ts). Never an HTTP error for a failed login: the registry's reason comes back.
   * Owners and admins only: it sends the team's credentials to an outside address.
   */
  async test(scope: TeamScope, id: number): Promise<{ authenticated: boolean; error?: string; note?: string }> {
    scope.requireTeamAdmin("test registries");
    const r = await this.get(scope, id);
    const c = this.credentials(r);
    if (!("username" in c)) {
      return {
        authenticated: false,
        error: "Testing a cloud_a registry needs the vendor's token exchange (access key -> registry token), which this release does not do yet.",
      };
    }
    const timeoutMs = this.opts.testTimeoutMs ?? REGISTRY_TEST_TIMEOUT_MS;
    const signal = AbortSignal.timeout(timeoutMs);
    let result: HandshakeResult;
    try {
      result = await registryHandshake(this.opts.fetch, r.url, c, signal);
    } catch (err) {
      result = { ok: false, error: signal.aborted ? `${r.url} did not answer within ${Math.round(timeoutMs / 1000)} s` : connectReason(err) };
    }
    return result.ok ? { authenticated: true, ...(result.note ? { note: result.note } : {}) } : { authenticated: false, error: shortReason(mask(result.error, c.password)) };
  }
}

/** fetch's "fetch failed" hides the reason in `cause` (refused, unknown host, the outbound guard's refusal). */
function connectReason(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } };
  const cause = e?.cause;
  if (cause?.message) return cause.code && !cause.message.includes(cause.code) ? `${cause.code}: ${cause.message}` : cause.message;
  return e?.message ?? String(err);
}

/** A registry's reason never echoes the password back (some put the request into their error text). */
function mask(text: string, secret: string): string {
  return secret ? text.split(secret).join("****") : text;
}
