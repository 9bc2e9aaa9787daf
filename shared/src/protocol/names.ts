import { z } from "zod";

/** Docker object names the platform creates: deterministic, so redelivery finds them. */
export const DockerName = z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/, "invalid Docker object name");
