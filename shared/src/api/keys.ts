import { z } from "zod";
import { multiline } from "../validation/text.js";
import { Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

export const PrivateKey = z
  .object({
    uuid: z.string(),
    name: z.string(),
    description: z.string(),
    public_key: z.string(),
    fingerprint: z.string().meta({ description: "SHA256 fingerprint of the public key, as ssh-keygen -l prints it" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "PrivateKey" });
export type PrivateKey = z.infer<typeof PrivateKey>;

/** 16 KiB holds any RSA-8192 key in PEM with room to spare. */
const PrivateKeyText = multiline(z.string().min(1).max(16_384));
const KeyDescription = multiline(z.string().max(2000));
const KeyName = z.string().trim().min(1).max(255);

export const CreatePrivateKeyBody = requestBody({
  name: KeyName,
  description: z.string().max(2000).optional(),
  private_key: PrivateKeyText,
});
export const UpdatePrivateKeyBody = requestBody({
  name: KeyName.optional(),
  description: KeyDescription.optional(),
  private_key: PrivateKeyText.optional(),
})
  .refine((b) => Object.values(b).some((v) => v !== undefined), {
    message: "Provide at least one of name, description, private_key.",
    path: ["name"],
  });
export const PrivateKeyParams = z.object({ uuid: resourceId("private_key", Uuid) });
export const PrivateKeyList = listOf(PrivateKey);
export const CreatedPrivateKey = z
  .object({ uuid: z.string(), name: z.string(), public_key: z.string(), fingerprint: z.string() })
  .meta({ id: "CreatedPrivateKey" });
