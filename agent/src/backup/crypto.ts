// The OpenPGP AEAD stream encryption moved to @capstan/shared/openpgp (the control plane's
// platform backups use it too); the agent's backups import it from here as before.
export { encryptStream, decryptStream, DecryptError, looksLikeGzip, looksLikeOpenPgp } from "@capstan/shared/openpgp";
