import { z } from "zod";

/**
 * Registry logins on a server (issue 18, docs/registries.md): the agent checks the login with
 * its engine (the Engine API's /auth, which performs the registry's own handshake) and keeps it
 * in the agent's registry config (a docker config.json, mode 0600, in the agent's state
 * directory). The password travels only in the sealed job payload and the engine's request
 * body: never in argv, a child's environment or a log line.
 */

/** host[:port] as image names start and the engine's auth config names it (docker.io for the hub). */
export const RegistryAddress = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?$|^\[[0-9a-f:.]+\](:\d{1,5})?$/i, "host[:port]");

export const RegistryLoginPayload = z.object({
  /** host[:port] of the registry: the key of its entry, and what image names start with. */
  registry: RegistryAddress,
  username: z.string().min(1).max(255).regex(/^[^\s:]+$/, "no spaces or ':'"),
  password: z.string().min(1).max(4096).regex(/^[^\r\n]+$/, "one line"),
  /** Which stored credentials these are (a hash of their sealed form): reported back, kept beside the entry. */
  fingerprint: z.string().min(1).max(128),
  /** The team's default registry: images naming no registry host are pulled from it (optional: absent is false). */
  is_default: z.boolean().optional(),
});
export type RegistryLoginPayload = z.infer<typeof RegistryLoginPayload>;
export const RegistryLoginResult = z.object({ registry: RegistryAddress, fingerprint: z.string(), status: z.string().max(1024) });

export const RegistryLogoutPayload = z.object({ registry: RegistryAddress });
export const RegistryLogoutResult = z.object({ removed: z.boolean() });
