import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import type * as OpenPgp from "openpgp";

/** Loaded at first use: OpenPGP.js is a large module, and most processes never encrypt. */
const loadOpenPgp = (): Promise<typeof OpenPgp> => import("openpgp");

/**
 * OpenPGP symmetric encryption of backups (RFC 9580): a passphrase-protected session key
 * (SKESK v6) and SEIPD v2 AEAD data, so each chunk (256 KiB by default) is authenticated when it
 * is read. That is what allows streaming both ways with flat memory: without AEAD, OpenPGP.js
 * would hold a whole message back until its trailing MDC was checked. Any OpenPGP implementation
 * of RFC 9580 (e.g. `gpg` 2.5+, `sq`) decrypts the files with the passphrase.
 */
const CONFIG = { aeadProtect: true } as const;

/** Encrypts a byte stream; the result is a binary (not armored) OpenPGP message, streamed. */
export async function* encryptStream(source: AsyncIterable<Buffer | Uint8Array>, passphrase: string): AsyncGenerator<Uint8Array> {
  const openpgp = await loadOpenPgp();
  const input = Readable.toWeb(Readable.from(source)) as unknown as WebReadableStream<Uint8Array>;
  const message = await openpgp.createMessage({ binary: input as never, format: "binary" });
  const encrypted = (await openpgp.encrypt({ message, passwords: [passphrase], format: "binary", config: CONFIG })) as unknown as AsyncIterable<Uint8Array>;
  for await (const chunk of encrypted) yield chunk;
}

/** A backup that cannot be decrypted: wrong passphrase, not OpenPGP, or altered. */
export class DecryptError extends Error {
  override name = "DecryptError";
}

/**
 * Refuses a message whose data is not AEAD-encrypted. OpenPGP.js has no setting for that, and
 * it would take such a message: SEIPD v1 only has the MDC at its very end, so OpenPGP.js holds
 * the whole plaintext in memory until it has checked it (memory grows with the backup), and
 * Symmetrically Encrypted Data has no integrity check at all. AEAD data is SEIPD v2 (RFC 9580,
 * what Capstan writes) or the older AEAD Encrypted Data packet; both are authenticated chunk by
 * chunk. `readMessage` on a stream stops at the data packet, having read its version.
 */
function assertAead(openpgp: typeof OpenPgp, message: OpenPgp.Message<unknown>): void {
  const { packet } = openpgp.enums;
  const data = message.packets.filterByTag(packet.symmetricallyEncryptedData, packet.symEncryptedIntegrityProtectedData, packet.aeadEncryptedData)[0];
  if (!data) throw new DecryptError("the backup is an OpenPGP message without encrypted data");
  const tag = (data.constructor as unknown as { tag: number }).tag;
  if (tag === packet.aeadEncryptedData) return;
  if (tag === packet.symEncryptedIntegrityProtectedData && (data as unknown as { version: number }).version === 2) return;
  const kind = tag === packet.symmetricallyEncryptedData ? "Symmetrically Encrypted Data, which has no integrity check" : "SEIPD version 1 (integrity checked only at its end)";
  throw new DecryptError(
    `the backup is OpenPGP-encrypted without AEAD (${kind}); only AEAD-encrypted backups (SEIPD v2, as Capstan writes them) are restored, since anything else can only be checked once read whole`,
  );
}

/**
 * Decrypts a binary OpenPGP message with the passphrase. The session key is checked before this
 * resolves (a wrong passphrase rejects here, before any plaintext exists); each data chunk is
 * authenticated as it is read, and a tampered or truncated file fails the stream. Only AEAD
 * data is accepted (assertAead).
 */
export async function decryptStream(source: Readable, passphrase: string): Promise<Readable> {
  const openpgp = await loadOpenPgp();
  const input = Readable.toWeb(source) as unknown as WebReadableStream<Uint8Array>;
  let message;
  try {
    message = await openpgp.readMessage({ binaryMessage: input as never });
  } catch (err) {
    throw new DecryptError(`the backup is not a readable OpenPGP message: ${(err as Error).message}`);
  }
  assertAead(openpgp, message as OpenPgp.Message<unknown>);
  let result;
  try {
    result = await openpgp.decrypt({ message, passwords: [passphrase], format: "binary", config: CONFIG });
  } catch (err) {
    const msg = (err as Error).message;
    throw new DecryptError(
      /session key|decrypt|password|passphrase/i.test(msg) ? `wrong passphrase: the backup could not be decrypted (${msg})` : `the backup could not be decrypted: ${msg}`,
    );
  }
  return Readable.fromWeb(result.data as unknown as WebReadableStream<Uint8Array>);
}

/** OpenPGP binary packets start with a byte whose top bit is set; gzip with 1f 8b. */
export function looksLikeGzip(head: Buffer): boolean {
  return head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
}
export function looksLikeOpenPgp(head: Buffer): boolean {
  return head.length >= 1 && (head[0]! & 0x80) !== 0 && !looksLikeGzip(head);
}
