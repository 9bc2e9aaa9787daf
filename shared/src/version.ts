/** Version of the REST API served under /api/v1. */
export const API_VERSION = "1.0.0";
