import type { Feature } from "@capstan/shared";
import type { Caller } from "./caller.js";
import { PaymentRequired } from "./errors.js";

/**
 * The feature gate (docs/features.md): paid features are switched per team by instance
 * administrators, and the caller carries its team's features (read with its token, no query of
 * its own). A team without the feature gets PaymentRequired naming it and how it is enabled.
 */
export function requireFeature(caller: Caller, feature: Feature): void {
  if (caller.features.has(feature)) return;
  throw new PaymentRequired(
    feature,
    `This needs the paid feature ${feature}, which is not enabled for this team. An instance administrator enables it with: capstan team features --team <id> --enable ${feature}`,
  );
}
