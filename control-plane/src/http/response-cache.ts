import type { Response } from "express";
import type { Logger } from "pino";
import type { SqlReader } from "../db/reader.js";


/**
 * The triggers of the team_version migrations (*_team_version: projects, environments, grants,
 * members; *_team_version_resources: the applications and databases GET /projects/{uuid} counts;
 * *_team_version_services: its services);
 * without every one of them nothing is cached.
 */
export const TEAM_VERSION_TRIGGERS = {
  sqlite: [
    "TeamVersion_team_insert",
    "TeamVersion_team_delete",
    ...["project", "membership", "environment", "projectpermission", "environmentpermission", "application", "standalonedatabase", "service"].flatMap((t) =>
      ["insert", "update", "delete"].map((op) => `TeamVersion_${t}_${op}`),
    ),
  ],
  postgresql: [
    "TeamVersion_team",
    "TeamVersion_project",
    "TeamVersion_membership",
    "TeamVersion_environment",
    "TeamVersion_projectpermission",
    "TeamVersion_environmentpermission",
    "TeamVersion_application",
    "TeamVersion_application_move",
    "TeamVersion_standalonedatabase",
    "TeamVersion_standalonedatabase_move",
    // services lifecycle (issue 17): *_team_version_services
    "TeamVersion_service",
    "TeamVersion_service_move",
  ],
} as const;

const TRIGGER_SQL = {
  sqlite: `SELECT "name" FROM "sqlite_master" WHERE "type" = 'trigger' AND "name" LIKE 'TeamVersion%'`,
  postgresql: `SELECT "tgname" AS "name" FROM "pg_trigger" WHERE NOT "tgisinternal" AND "tgname" LIKE 'TeamVersion%'`,
} as const;

interface Entry {
  version: number;
  body: Buffer;
  etag: string | undefined;
  bytes: number;
}

export interface CacheStats {
  state: "checking" | "on" | "off";
  hits: number;
  misses: number;
  entries: number;
  bytes: number;
}

/**
 * Serialised 200 responses of routes marked `teamVersioned` in the route table, each kept with the version of its team's
 * data it was built from, and served only while that is still the team's current version.
 *
 * The version is read with the token (http/auth.ts: one indexed join, so no extra query) BEFORE
 * the handler reads the data, and the body is stored under that version. So a stored body is at
 * least as new as its version; and since every write bumps the version in its own transaction
 * (database triggers: whoever writes, this process, the CLI, another replica), no body is served
 * once a write committed before the request began. Entries are evicted least recently used
 * first beyond maxBytes; one body larger than a quarter of it is never kept.
 */
export class ResponseCache {
  private readonly entries = new Map<string, Entry>();
  private bytes = 0;
  private hits = 0;
  private misses = 0;
  private state: CacheStats["state"] = "checking";
  /** Settles once the triggers have been checked; the cache stays off until they are found. */
  readonly ready: Promise<void>;
  /** Off by hand (the benchmark measures the uncached path this way). */
  enabled = true;

  constructor(
    private readonly reader: SqlReader,
    private readonly log: Logger,
    readonly maxBytes: number,
  ) {
    this.ready = this.checkTriggers();
  }

  private async checkTriggers(): Promise<void> {
    try {
      const rows = await this.reader.all<{ name: string }>(TRIGGER_SQL[this.reader.kind], []);
      const found = new Set(rows.map((r) => r.name));
      const missing = TEAM_VERSION_TRIGGERS[this.reader.kind].filter((t) => !found.has(t));
      this.state = missing.length ? "off" : "on";
      if (missing.length) this.log.warn({ missing }, "response cache off: the TeamVersion triggers are missing");
    } catch (err) {
      this.state = "off";
      this.log.warn({ err }, "response cache off: could not check the TeamVersion triggers");
    }
  }

  /** Whether a request can use the cache at all. */
  get active(): boolean {
    return this.enabled && this.state === "on";
  }

  get(key: string, version: number): Entry | undefined {
    const e = this.entries.get(key);
    if (e === undefined || e.version !== version) {
      if (e !== undefined) this.drop(key, e);
      this.misses++;
      return undefined;
    }
    // Most recently used last: Map keeps insertion order.
    this.entries.delete(key);
    this.entries.set(key, e);
    this.hits++;
    return e;
  }

  set(key: string, version: number, body: Buffer, etag: string | undefined): void {
    const bytes = body.length + 2 * key.length + 64;
    if (bytes > this.maxBytes / 4) return;
    const old = this.entries.get(key);
    if (old !== undefined) this.drop(key, old);
    this.entries.set(key, { version, body, etag, bytes });
    this.bytes += bytes;
    for (const [k, e] of this.entries) {
      if (this.bytes <= this.maxBytes) break;
      this.drop(k, e);
    }
  }

  private drop(key: string, e: Entry): void {
    this.entries.delete(key);
    this.bytes -= e.bytes;
  }

  clear(): void {
    this.entries.clear();
    this.bytes = 0;
  }

  stats(): CacheStats {
    return { state: this.state, hits: this.hits, misses: this.misses, entries: this.entries.size, bytes: this.bytes };
  }
}

/** What res.json would send for the same body: the same bytes, Content-Type and ETag (so 304s too). */
export function sendJsonBytes(res: Response, body: Buffer, etag: string | undefined): void {
  res.statusCode = 200;
  res.setHeader("Content-Type", "application/json; charset=utf-8");
  if (etag !== undefined) res.setHeader("ETag", etag);
  res.send(body);
}
