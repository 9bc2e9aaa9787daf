import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

export interface GeneratedKey {
  /** The private key file's text, exactly as ssh-keygen wrote it. */
  privateKey: string;
  /** "<type> <base64>" — the .pub file without its comment. */
  publicKey: string;
  /** "SHA256:..." as `ssh-keygen -lf` prints it. */
  fingerprint: string;
  /** Lines of the key body that are not public data (OpenSSH files embed the public key). */
  secretLines: string[];
  /** The last of them: it carries private key material. */
  secretLine: string;
}

/** Base64 lines of a private key file that do not also occur in its public key. */
export function secretLinesOf(privateKey: string, publicKey: string): string[] {
  return privateKey
    .split(/\r?\n/)
    .filter((l) => l.length >= 40 && !l.startsWith("-----") && !l.includes(":") && !publicKey.includes(l));
}

export type KeyType = "ed25519" | "rsa" | "ecdsa";

/** Real keys from the real ssh-keygen, in a temp dir (argv arrays only, no shell). */
export class KeyFactory {
  private readonly dir = mkdtempSync(join(tmpdir(), "capstan-keys-"));
  private seq = 0;

  async generate(type: KeyType, opts: { passphrase?: string; pem?: boolean } = {}): Promise<GeneratedKey> {
    const file = join(this.dir, `k${++this.seq}`);
    const args = ["-q", "-t", type, "-N", opts.passphrase ?? "", "-C", `test-${this.seq}@capstan`, "-f", file];
    if (type === "rsa") args.push("-b", "2048");
    if (opts.pem) args.push("-m", "PEM");
    await run("ssh-keygen", args);
    const privateKey = readFileSync(file, "utf8");
    const publicKey = readFileSync(`${file}.pub`, "utf8").trim().split(/\s+/).slice(0, 2).join(" ");
    const { stdout } = await run("ssh-keygen", ["-l", "-E", "sha256", "-f", `${file}.pub`]);
    const fingerprint = stdout.trim().split(/\s+/)[1]!;
    const secretLines = secretLinesOf(privateKey, publicKey);
    return { privateKey, publicKey, fingerprint, secretLine: secretLines[secretLines.length - 1]!, secretLines };
  }

  /** The public half of a fresh key, as an OpenSSH .pub line. */
  async publicLine(): Promise<string> {
    const file = join(this.dir, `k${++this.seq}`);
    await run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", file]);
    return readFileSync(`${file}.pub`, "utf8");
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
