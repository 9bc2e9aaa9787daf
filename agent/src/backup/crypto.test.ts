import { randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import * as openpgp from "openpgp";
import { describe, expect, it } from "vitest";
import { decryptStream, encryptStream } from "./crypto.js";

const PASSPHRASE = "correct horse battery";

async function collect(source: AsyncIterable<Uint8Array | Buffer>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of source) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

/** The message's bytes, then a stream that never ends: what a stalled or endless download looks like. */
function neverEnding(bytes: Buffer): Readable {
  let sent = false;
  return new Readable({
    read() {
      if (!sent) {
        sent = true;
        this.push(bytes);
      }
    },
  });
}

describe("backup encryption (OpenPGP)", () => {
  it("writes a passphrase session key (SKESK v6) and SEIPD v2 (AEAD) data, and decrypts it back", async () => {
    const plain = randomBytes(700 * 1024);
    const encrypted = await collect(encryptStream(Readable.from([plain]), PASSPHRASE));
    const message = await openpgp.readMessage({ binaryMessage: new Uint8Array(encrypted) });
    const tags = message.packets.map((p) => (p.constructor as unknown as { tag: number }).tag);
    expect(tags).toEqual([openpgp.enums.packet.symEncryptedSessionKey, openpgp.enums.packet.symEncryptedIntegrityProtectedData]);
    expect((message.packets[0] as unknown as { version: number }).version).toBe(6);
    expect((message.packets[1] as unknown as { version: number }).version).toBe(2);
    expect((await collect(await decryptStream(Readable.from([encrypted]), PASSPHRASE))).equals(plain)).toBe(true);
  });

  it("refuses a SEIPD v1 message with that reason, before reading it whole (it would be held in memory)", async () => {
    const message = await openpgp.createMessage({ binary: new Uint8Array(randomBytes(64 * 1024)) });
    const v1 = Buffer.from(
      (await openpgp.encrypt({ message, passwords: [PASSPHRASE], format: "binary", config: { aeadProtect: false } })) as Uint8Array,
    );
    const data = (await openpgp.readMessage({ binaryMessage: new Uint8Array(v1) })).packets[1] as unknown as { version: number };
    expect(data.version).toBe(1);
    // Without the check, OpenPGP.js waits for the end of the message (its MDC) before it gives
    // out anything: with a stream that never ends, that is forever.
    const refused = decryptStream(neverEnding(v1.subarray(0, v1.length - 100)), PASSPHRASE);
    const outcome = await Promise.race([refused.then(() => "decrypted", (err: Error) => err.message), new Promise((r) => setTimeout(() => r("still waiting after 5 s"), 5000))]);
    expect(outcome).toMatch(/OpenPGP-encrypted without AEAD \(SEIPD version 1 .*\); only AEAD-encrypted backups/);
  });

  it("still says a wrong passphrase is one", async () => {
    const encrypted = await collect(encryptStream(Readable.from([Buffer.from("data")]), PASSPHRASE));
    await expect(decryptStream(Readable.from([encrypted]), "not it")).rejects.toThrow(/wrong passphrase/);
  });
});
