/**
 * Deterministic names of what a deployment creates, so a redelivered job finds what an
 * earlier attempt made.
 */
export const containerNameFor = (appUuid: string, deploymentUuid: string): string => `${appUuid}-${deploymentUuid.slice(0, 12)}`;

/** Images built for an application: one tag per deployment. */
export const imageTagFor = (appUuid: string, deploymentUuid: string): string => `capstan/${appUuid}:${deploymentUuid}`;

/** Docker volume of an application volume: `<app uuid>-<volume name>` (the payload may carry either form). */
export const volumeNameFor = (appUuid: string, name: string): string => (name.startsWith(`${appUuid}-`) ? name : `${appUuid}-${name}`);
