import { z } from "zod";
import { Uuid, requestBody, resourceId } from "./common.js";
import { multiline } from "../validation/text.js";

/**
 * Label overrides of service containers (spec 4.15, issue 17; docs/proxy-labels.md): a YAML map
 * of label key to value per service application or service database, merged over the labels
 * the platform generates (the user's value wins), keys with the reserved `capstan.` prefix
 * dropped. Behind the paid feature PROXY_LABEL_OVERRIDES. Area: w5/svcextras.
 */

export const ServiceApplicationParams = z.object({ uuid: resourceId("service_application", Uuid) });
export const ServiceDatabaseParams = z.object({ uuid: resourceId("service_database", Uuid) });

/** Bytes of YAML accepted (control-plane/src/compose/label-overrides.ts checks the same limit with its reason). */
export const MAX_LABEL_OVERRIDES_BYTES = 64 * 1024;

export const PutLabelOverridesBody = requestBody({
  yaml: multiline(z.string())
    .max(MAX_LABEL_OVERRIDES_BYTES * 4)
    .meta({ description: "YAML map of label key to value (string, number or boolean); empty: no overrides. Keys starting with capstan. or com.docker.compose. are dropped." }),
});
export type PutLabelOverridesBody = z.infer<typeof PutLabelOverridesBody>;

export const LabelOverrides = z
  .object({
    uuid: z.string().meta({ description: "The service application's or service database's uuid" }),
    service_uuid: z.string(),
    name: z.string().meta({ description: "Its compose service name" }),
    yaml: z.string().meta({ description: "The overrides as last PUT (\"\" when none)" }),
    labels: z.record(z.string(), z.string()).meta({ description: "The labels applied: the YAML's, reserved keys removed, values as text" }),
    dropped: z.array(z.string()).meta({ description: "Keys of the YAML dropped for their reserved prefix" }),
  })
  .meta({ id: "LabelOverrides" });
export type LabelOverrides = z.infer<typeof LabelOverrides>;

export const LabelOverridesMutation = z.object({ message: z.string(), data: LabelOverrides });
