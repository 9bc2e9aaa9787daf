import type { PrivateKey } from "@capstan/shared";
import type { Out } from "./types.js";
import { iso } from "../dto.js";

export type KeyRecord = {
  uuid: string;
  name: string;
  description: string;
  publicKey: string;
  fingerprint: string;
  createdAt: Date;
  updatedAt: Date;
};

/** The private part is never mapped: it does not exist in any response. */
export const keyDto = (k: KeyRecord): Out<typeof PrivateKey> => ({
  uuid: k.uuid,
  name: k.name,
  description: k.description,
  public_key: k.publicKey,
  fingerprint: k.fingerprint,
  created_at: iso(k.createdAt),
  updated_at: iso(k.updatedAt),
});
