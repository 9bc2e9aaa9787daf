import { assertHostAllowed, guardedLookup } from "@capstan/shared/net";
import type { Agent, RequestInit, Response } from "undici";

/** undici loads at the first outbound request: a control plane starts without it. */
let undici: Promise<typeof import("undici")> | null = null;
const loadUndici = () => (undici ??= import("undici"));

/** undici's fetch, loaded at first use. */
export const plainFetch = async (url: string, init?: RequestInit): Promise<Response> => (await loadUndici()).fetch(url, init);

/**
 * Requests the control plane makes to addresses users chose (a git app's API) must not reach
 * what only the control plane can reach: its own loopback, link-local addresses and the cloud
 * metadata services behind them. Private ranges (10/8, 192.168/16, ...) stay allowed: self-hosted
 * git servers live there (shared/src/net/address-guard.ts, which judges every resolved address at
 * connect time). PLATFORM_ALLOW_PRIVATE_ENDPOINTS lifts the check entirely.
 */
const SETTING = "PLATFORM_ALLOW_PRIVATE_ENDPOINTS";

export { ForbiddenEndpointError } from "@capstan/shared/net";

export type OutboundFetch = (url: string, init?: RequestInit) => Promise<Response>;

/**
 * fetch for user-chosen endpoints. A literal IP in the URL is checked before connecting (no
 * lookup happens for it); names are checked on every address they resolve to.
 */
export function outboundFetch(opts: { allowPrivate: boolean }): OutboundFetch {
  if (opts.allowPrivate) return plainFetch;
  let dispatcher: Agent | null = null;
  return async (url, init) => {
    assertHostAllowed(new URL(url).hostname, SETTING);
    const { Agent, fetch } = await loadUndici();
    dispatcher ??= new Agent({ connect: { lookup: guardedLookup(SETTING) as never } });
    return fetch(url, { ...init, dispatcher });
  };
}
