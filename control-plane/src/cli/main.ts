import { parseArgs } from "node:util";
import { z } from "zod";
import { FEATURES, TEAM_ROLES, TOKEN_SCOPES, TeamRole, TokenScope, parseFeatureList, type Feature } from "@capstan/shared";
import { ConfigError, loadConfig } from "../config.js";
import { Invalid, NotFound } from "../domain/errors.js";
// The instance and the server are imported when a command needs them: `serve` listens before
// it loads the rest of the control plane (server.ts).

const USAGE = `usage: capstan <command> [options]

  serve                                         run the control plane (PLATFORM_* settings)
  migrate                                       apply pending database migrations
  team create --name NAME [--description D]     prints the new team id
  team list
  team settings --team ID [--allow-member-bind-mounts true|false]
                                                prints the team's settings (after the change)
  team features --team ID [--enable F1,F2] [--disable F3]
                                                turns paid features of a team on or off and
                                                prints the team's features, one per line
  user create --name NAME --email EMAIL         prints the new user id
  user list
  user password --user ID                       sets the user's dashboard password, read from
                                                standard input (first line; never an argument)
  user sign-in-link --user ID                   prints a one-time dashboard sign-in link
                                                (valid 15 minutes)
  member add --team ID --user ID --role owner|admin|member|viewer
  member remove --team ID --user ID
  member list --team ID
  token create --team ID --name NAME --scopes read,write,deploy [--user ID] [--expires-in-days N]
                                                prints the token (shown once)
  token list [--team ID]
  token revoke --id ID
  local-agent-token                             ensures the root team's "localhost" server and
                                                prints a fresh agent token for it
  restore --from FILE|s3://BUCKET/KEY --data-dir DIR [--passphrase-stdin]
                                                a fresh instance from a platform_instance backup
                                                into an empty DIR (and an empty DATABASE_URL);
                                                passphrase: CAPSTAN_RESTORE_PASSPHRASE or stdin;
                                                S3: CAPSTAN_RESTORE_S3_* (docs/resource-backups.md)

Configuration comes from the environment: PLATFORM_DATA_DIR, DATABASE_URL, ... (see README).`;

class UsageError extends Error {}
/** A refusal of a command's input: exit 1 with the message. */
class CliError extends Error {}

function need(values: Record<string, unknown>, name: string): string {
  const v = values[name];
  if (typeof v !== "string" || v.trim() === "") throw new UsageError(`--${name} is required`);
  return v.trim();
}

function intOf(values: Record<string, unknown>, name: string): number {
  const raw = need(values, name);
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} must be a positive integer`);
  return n;
}

/** --enable / --disable: a comma list of known feature names; absent means none. */
function featuresOf(values: Record<string, unknown>, name: string): Feature[] {
  const raw = values[name];
  if (raw === undefined) return [];
  const parsed = typeof raw === "string" ? parseFeatureList(raw) : { unknown: [] };
  if ("unknown" in parsed || !parsed.features.length) {
    throw new UsageError(`--${name} takes a comma list of ${FEATURES.join(", ")}`);
  }
  return parsed.features;
}

function scopesOf(raw: string): TokenScope[] {
  const list = raw.split(",").map((s) => s.trim()).filter(Boolean);
  const parsed = z.array(TokenScope).min(1).safeParse(list);
  if (!parsed.success) throw new UsageError(`--scopes takes a comma list of ${TOKEN_SCOPES.join(", ")}`);
  return parsed.data;
}

const out = (line: string) => process.stdout.write(line + "\n");

/**
 * The first line of standard input: a password never goes on the command line (other users
 * of the machine see argv in ps, shells keep it in their history).
 */
async function readPasswordLine(): Promise<string> {
  return readSecretLine("password", "user password reads the password from standard input (one line)");
}

async function readSecretLine(what: string, missing: string): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write(`${what} (input is shown): `);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) {
    chunks.push(chunk as Buffer);
    if (Buffer.concat(chunks).includes(10)) break;
  }
  const line = Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? "";
  if (!line) throw new UsageError(missing);
  return line;
}

/** The session service's refusals as the CLI's own (exit 1 with the message). */
function dashboardError(err: unknown): unknown {
  if (err instanceof Invalid) return new CliError(Object.values(err.errors).flat().join(" "));
  if (err instanceof NotFound) return new CliError(`user does not exist`);
  return err;
}
const date = (d: Date | null) => (d ? d.toISOString() : "-");

async function run(argv: string[]): Promise<number> {
  const [group, action, ...rest] = argv;
  if (!group) {
    // A usage error like any other: exit 2 with the usage on stderr, stdout stays clean.
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  if (group === "help" || group === "--help" || group === "-h") {
    out(USAGE);
    return 0;
  }
  // platform restore (issue 19): before anything opens the (not yet existing) instance.
  if (group === "restore") {
    const { values: r } = parseArgs({
      args: action ? [action, ...rest] : [],
      options: { from: { type: "string" }, "data-dir": { type: "string" }, "passphrase-stdin": { type: "boolean" } },
      strict: true,
      allowPositionals: false,
    });
    const { restoreCommand, RestoreUsageError } = await import("./restore.js");
    const { ArchiveError } = await import("../services/backups/platform/archive.js");
    try {
      await restoreCommand({
        from: need(r, "from"),
        dataDir: need(r, "data-dir"),
        passphraseStdin: r["passphrase-stdin"] === true,
        env: process.env,
        readLine: () => readSecretLine("passphrase", "restore --passphrase-stdin reads the passphrase from standard input (one line)"),
        out: (line) => process.stderr.write(line + "\n"),
      });
    } catch (err) {
      if (err instanceof RestoreUsageError) throw new UsageError(err.message);
      if (err instanceof ArchiveError) throw new CliError(`restore refused: ${err.message}`);
      throw err;
    }
    return 0;
  }
  const { values } = parseArgs({
    args: group === "serve" || group === "migrate" ? (action ? [action, ...rest] : []) : rest,
    options: {
      name: { type: "string" },
      description: { type: "string" },
      email: { type: "string" },
      team: { type: "string" },
      user: { type: "string" },
      role: { type: "string" },
      scopes: { type: "string" },
      id: { type: "string" },
      "expires-in-days": { type: "string" },
      "allow-member-bind-mounts": { type: "string" },
      enable: { type: "string" },
      disable: { type: "string" },
    },
    strict: true,
    allowPositionals: false,
  });

  const config = loadConfig();
  if (group === "serve") {
    const { serve } = await import("../server.js");
    await serve(config);
    return -1; // keeps running
  }
  const { openInstanceData } = await import("../instance-data.js");
  const data = await openInstanceData(config);
  const { admin } = data;
  try {
    switch (`${group} ${action ?? ""}`.trim()) {
      case "migrate":
        for (const m of data.migrationsApplied) out(m);
        return 0;
      case "team create":
        out(String(await admin.createTeam(need(values, "name"), typeof values.description === "string" ? values.description : "")));
        return 0;
      case "team list":
        for (const t of await admin.listTeams()) out(`${t.id}\t${t.name}\t${t._count.memberships} members`);
        return 0;
      case "team settings": {
        const raw = values["allow-member-bind-mounts"];
        if (raw !== undefined && raw !== "true" && raw !== "false") throw new UsageError("--allow-member-bind-mounts takes true or false");
        const settings = await admin.teamSettings(intOf(values, "team"), raw === undefined ? {} : { allowMemberBindMounts: raw === "true" });
        out(`allow_member_bind_mounts\t${settings.allowMemberBindMounts}`);
        return 0;
      }
      case "team features": {
        const teamId = intOf(values, "team");
        const enable = featuresOf(values, "enable");
        const disable = featuresOf(values, "disable");
        const result = enable.length || disable.length ? await admin.setTeamFeatures(teamId, { enable, disable }) : await admin.teamFeatures(teamId);
        for (const f of result.features) out(f);
        return 0;
      }
      case "user create":
        out(String(await admin.createUser(need(values, "name"), need(values, "email"))));
        return 0;
      case "user list":
        for (const u of await admin.listUsers()) out(`${u.id}\t${u.name}\t${u.email}`);
        return 0;
      // dashboard sign-in (issue 22, docs/dashboard.md)
      case "user password": {
        const userId = intOf(values, "user");
        const password = await readPasswordLine();
        try {
          await new (await import("../services/sessions.js")).Sessions(data.database.prisma).setPassword(userId, password);
        } catch (err) {
          throw dashboardError(err);
        }
        process.stderr.write("password set\n");
        return 0;
      }
      case "user sign-in-link": {
        const userId = intOf(values, "user");
        try {
          out(`${config.publicUrl}/#link=${await new (await import("../services/sessions.js")).Sessions(data.database.prisma).createSignInLink(userId)}`);
        } catch (err) {
          throw dashboardError(err);
        }
        return 0;
      }
      case "member add": {
        const role = TeamRole.safeParse(need(values, "role"));
        if (!role.success) throw new UsageError(`--role must be one of ${TEAM_ROLES.join(", ")}`);
        await admin.setMember(intOf(values, "team"), intOf(values, "user"), role.data);
        return 0;
      }
      case "member remove":
        await admin.removeMember(intOf(values, "team"), intOf(values, "user"));
        return 0;
      case "member list":
        for (const m of await admin.listMembers(intOf(values, "team"))) out(`${m.user.id}\t${m.user.name}\t${m.user.email}\t${m.role}`);
        return 0;
      case "token create": {
        const days = values["expires-in-days"];
        let expiresAt: Date | undefined;
        if (days !== undefined) {
          const n = Number(days);
          if (!Number.isInteger(n) || n < 1) throw new UsageError("--expires-in-days must be a positive integer");
          expiresAt = new Date(Date.now() + n * 86_400_000);
        }
        const token = await admin.createToken({
          teamId: intOf(values, "team"),
          name: need(values, "name"),
          scopes: scopesOf(need(values, "scopes")),
          userId: values.user === undefined ? undefined : intOf(values, "user"),
          expiresAt,
        });
        out(token);
        return 0;
      }
      case "token list": {
        const tokens = await admin.listTokens(values.team === undefined ? undefined : intOf(values, "team"));
        for (const t of tokens) {
          const status = t.revokedAt ? "revoked" : t.expiresAt && t.expiresAt <= new Date() ? "expired" : "active";
          out(`${t.id}\tteam ${t.teamId}\t${t.name}\t${t.scopes}\tuser ${t.userId ?? "-"}\tlast used ${date(t.lastUsedAt)}\t${status}`);
        }
        return 0;
      }
      case "local-agent-token":
        out((await admin.localAgentToken()).token);
        return 0;
      case "token revoke":
        await admin.revokeToken(intOf(values, "id"));
        return 0;
      default:
        throw new UsageError(`unknown command: ${group} ${action ?? ""}`.trim());
    }
  } finally {
    await data.database.close();
  }
}

export async function main(argv = process.argv.slice(2)): Promise<void> {
  try {
    const code = await run(argv);
    if (code >= 0) process.exit(code);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith?.("ERR_PARSE_ARGS")) {
      process.stderr.write(`capstan: ${(err as Error).message}\n\n${USAGE}\n`);
      process.exit(2);
    }
    const { AdminError } = await import("../services/admin.js");
    if (err instanceof ConfigError || err instanceof AdminError || err instanceof CliError) {
      process.stderr.write(`capstan: ${err.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`capstan: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  }
}
