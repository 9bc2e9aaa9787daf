/** Small helpers for mapping records to the spec's snake_case shapes. */
export const iso = (d: Date): string => d.toISOString();

export const ERR = {
  401: { description: "Missing or invalid token" },
  403: { description: "Token scope or member permission missing" },
  404: { description: "Not found in the caller's team" },
  409: { description: "Already exists" },
  422: { description: "Validation error" },
} as const;
