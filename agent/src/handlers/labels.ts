/** Labels the platform owns (reserved prefix `capstan.`). */
export const LABEL_MANAGED = "capstan.managed";
export const LABEL_JOB = "capstan.job";
export const MANAGED = { [LABEL_MANAGED]: "true" } as const;
