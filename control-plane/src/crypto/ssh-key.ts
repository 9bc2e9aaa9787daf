import { createHash } from "node:crypto";
import ssh2 from "ssh2";

export interface ParsedPrivateKey {
  /** OpenSSH public key line: "<type> <base64>" */
  publicKey: string;
  /** "SHA256:<unpadded base64>", as ssh-keygen -l prints it */
  fingerprint: string;
}

/**
 * Parses an SSH private key (OpenSSH, PEM RSA/ECDSA/Ed25519, PuTTY). Returns a reason
 * instead of throwing so callers can answer 422 with it. Keys with a passphrase are
 * refused: the platform uses them unattended.
 */
export function parsePrivateKey(text: string): ParsedPrivateKey | { error: string } {
  let parsed: ReturnType<typeof ssh2.utils.parseKey>;
  try {
    parsed = ssh2.utils.parseKey(text.trim() + "\n");
  } catch (err) {
    return { error: `Cannot parse the private key: ${(err as Error).message}` };
  }
  if (parsed instanceof Error) {
    const encrypted = /encrypted|passphrase/i.test(parsed.message);
    return {
      error: encrypted
        ? "Private keys protected by a passphrase are not supported; remove the passphrase first."
        : `Cannot parse the private key: ${parsed.message}`,
    };
  }
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key || !key.isPrivateKey()) return { error: "This is a public key; send the private key." };
  const blob = key.getPublicSSH();
  return {
    publicKey: `${key.type} ${blob.toString("base64")}`,
    fingerprint: "SHA256:" + createHash("sha256").update(blob).digest("base64").replace(/=+$/, ""),
  };
}
