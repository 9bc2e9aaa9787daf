import { spawn } from "node:child_process";
import { lookup } from "node:dns/promises";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { isRefusedAddress } from "@capstan/shared/net";
import { bareName, DnsProviderError, isManagedType, quoteTxt, unquoteTxt, type DnsProvider, type DnsRecord, type RecordData } from "./types.js";

export const TSIG_ALGORITHMS = ["hmac-md5", "hmac-sha1", "hmac-sha224", "hmac-sha256", "hmac-sha384", "hmac-sha512"] as const;
export type TsigAlgorithm = (typeof TSIG_ALGORITHMS)[number];

export interface Rfc2136Credentials {
  /** Host name or IP address of the primary server accepting updates. */
  server: string;
  port: number;
  /** The zone updates go to (the one zone this provider manages). */
  zone: string;
  key_name: string;
  algorithm: TsigAlgorithm;
  /** Base64 TSIG secret. */
  secret: string;
}

/** Seconds knsupdate and kdig wait for one answer; the whole process is killed after PROCESS_TIMEOUT_MS. */
const WAIT_S = 5;
const PROCESS_TIMEOUT_MS = 20_000;

/**
 * RFC 2136 dynamic updates signed with TSIG, through Knot's command-line clients (docs/decisions.md,
 * "DNS: RFC 2136 through knsupdate and kdig"): `knsupdate` sends updates, `kdig` reads the zone by
 * zone transfer (AXFR, also TSIG-signed). Both run with argv arrays; the TSIG secret never goes on
 * a command line: knsupdate reads its `key` command from stdin, kdig reads a key file written 0600
 * into a private temporary directory removed right after. Every value in the update script is
 * checked to be a single token (names, addresses) or quoted by us (TXT), so a value cannot add a
 * command of its own.
 *
 * RFC 2136 has no record ids: a record is name|type|content. The server is resolved here and the
 * address judged by the private-address guard (PLATFORM_ALLOW_PRIVATE_ENDPOINTS lifts it); the
 * tools get the address, never the name, so they cannot resolve it to something else.
 */
export class Rfc2136Provider implements DnsProvider {
  constructor(
    private readonly creds: Rfc2136Credentials,
    private readonly opts: { allowPrivate: boolean },
  ) {}

  private async address(): Promise<string> {
    const host = this.creds.server.replace(/^\[|\]$/g, "");
    const addresses = isIP(host) ? [host] : (await lookup(host, { all: true }).catch(() => [])).map((a) => a.address);
    if (!addresses.length) throw new DnsProviderError(`${host} does not resolve.`);
    if (!this.opts.allowPrivate) {
      const bad = addresses.find((a) => isRefusedAddress(a));
      if (bad) throw new DnsProviderError(`${host} is (or resolves to) ${bad}, a loopback, link-local or metadata address; refused (PLATFORM_ALLOW_PRIVATE_ENDPOINTS allows it).`);
    }
    return addresses[0]!;
  }

  private checkZone(zone: string): string {
    const z = bareName(zone);
    if (z !== bareName(this.creds.zone)) throw new DnsProviderError(`This RFC 2136 provider manages ${bareName(this.creds.zone)} only, not ${z}.`);
    return z;
  }

  /** Runs one knsupdate session: the given update lines between the header (with the key) and `send`. */
  private async update(lines: string[]): Promise<void> {
    const ip = await this.address();
    const script = [
      `server ${ip} ${this.creds.port}`,
      `zone ${token(bareName(this.creds.zone))}.`,
      `key ${this.creds.algorithm}:${token(this.creds.key_name)} ${token(this.creds.secret)}`,
      ...lines,
      "send",
      "",
    ].join("\n");
    const r = await run("knsupdate", ["-t", String(WAIT_S), "-r", "0"], script);
    if (r.code !== 0) throw new DnsProviderError(`The DNS update was refused: ${reason(r.stderr || r.stdout)}`);
  }

  async listRecords(zone: string): Promise<DnsRecord[]> {
    const z = this.checkZone(zone);
    const ip = await this.address();
    const dir = await mkdtemp(join(tmpdir(), "capstan-tsig-"));
    try {
      const keyFile = join(dir, "key");
      await writeFile(keyFile, `${this.creds.algorithm}:${this.creds.key_name}:${this.creds.secret}`, { mode: 0o600 });
      const r = await run("kdig", ["-p", String(this.creds.port), `@${ip}`, "-k", keyFile, "AXFR", `${z}.`, "+nocomments", "+noheader", `+time=${WAIT_S}`, "+retry=0"], "");
      if (r.code !== 0) throw new DnsProviderError(`The zone transfer of ${z} was refused: ${reason(r.stderr || r.stdout)}`);
      return parseZone(r.stdout);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  async createRecord(zone: string, record: RecordData): Promise<void> {
    this.checkZone(zone);
    await this.update([`update add ${line(record)}`]);
  }

  /** One update message: the old record goes and the new one comes atomically. */
  async updateRecord(zone: string, existing: DnsRecord, record: RecordData): Promise<void> {
    this.checkZone(zone);
    await this.update([`update delete ${token(bareName(existing.name))}. ${existing.type} ${rdata(existing)}`, `update add ${line(record)}`]);
  }

  async deleteRecord(zone: string, existing: DnsRecord): Promise<void> {
    this.checkZone(zone);
    await this.update([`update delete ${token(bareName(existing.name))}. ${existing.type} ${rdata(existing)}`]);
  }

  /**
   * An update whose only content is the prerequisite "the zone apex exists" (it changes nothing)
   * proves the key may update the zone; a zone transfer proves it may read it.
   */
  async testCredentials() {
    try {
      await this.update([`prereq yxdomain ${token(bareName(this.creds.zone))}.`]);
      await this.listRecords(this.creds.zone);
      return { ok: true as const };
    } catch (err) {
      return { ok: false as const, error: (err as Error).message };
    }
  }
}

/** A value that must be one token of the update script: no whitespace, quotes, semicolons or control characters. */
function token(v: string): string {
  if (!/^[A-Za-z0-9._*+/=:@-]+$/.test(v)) throw new DnsProviderError(`Refused to send ${JSON.stringify(v.slice(0, 80))}: not a plain DNS token.`);
  return v;
}

function rdata(r: RecordData): string {
  if (r.type === "TXT") {
    if (!/^[\x20-\x7e]*$/.test(r.content)) throw new DnsProviderError("TXT content must be printable ASCII.");
    return quoteTxt(r.content);
  }
  if (r.type === "CNAME") return `${token(bareName(r.content))}.`;
  return token(r.content);
}

function line(r: RecordData): string {
  return `${token(bareName(r.name))}. ${Math.max(0, Math.trunc(r.ttl))} ${r.type} ${rdata(r)}`;
}

/** kdig's presentation output: "name ttl class type rdata" per line. */
export function parseZone(text: string): DnsRecord[] {
  const out: DnsRecord[] = [];
  for (const raw of text.split("\n")) {
    if (!raw.trim() || raw.startsWith(";")) continue;
    const m = /^(\S+)\s+(\d+)\s+IN\s+(\S+)\s+(.*)$/.exec(raw.trim());
    if (!m) continue;
    const type = m[3]!;
    if (!isManagedType(type)) continue;
    const name = bareName(m[1]!);
    const rd = m[4]!.trim();
    const content = type === "TXT" ? unquoteTxt(rd) : type === "CNAME" ? bareName(rd) : rd;
    const rec = { id: `${name}|${type}|${content}`, name, type, content, ttl: Number(m[2]) };
    // An AXFR repeats nothing but the SOA; a record seen twice is still one record.
    if (!out.some((o) => o.id === rec.id)) out.push(rec);
  }
  return out;
}

/** The first error line a tool printed, without its ";; " prefix. */
function reason(text: string): string {
  const l = text.split("\n").map((s) => s.replace(/^;;\s*/, "").trim()).filter(Boolean);
  return (l.find((s) => s.startsWith("ERROR")) ?? l[0] ?? "no answer").slice(0, 200);
}

function run(cmd: string, args: string[], stdin: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ["pipe", "pipe", "pipe"], timeout: PROCESS_TIMEOUT_MS, env: { PATH: process.env.PATH ?? "/usr/bin:/bin" } });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    child.on("error", (err) => reject(new DnsProviderError(`${cmd} could not run (${(err as NodeJS.ErrnoException).code ?? err.message}); install knot-dnsutils.`)));
    child.on("close", (code) => resolve({ code: code ?? 1, stdout, stderr }));
    child.stdin.on("error", () => undefined);
    child.stdin.end(stdin);
  });
}
