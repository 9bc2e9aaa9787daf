// Redocly plugin of `npm run lint:openapi` (redocly.yaml).
//
// capstan/no-ambiguous-paths: Redocly's no-ambiguous-paths, except for the pairs the spec
// itself defines. The spec has GET /deployments/applications/{application_uuid} next to
// POST /deployments/{uuid}/cancel; they are told apart by their fixed segments and methods
// (a deployment uuid is never "applications"). Any other ambiguous pair is an error.
const SPEC_PAIRS = [["/deployments/applications/{application_uuid}", "/deployments/{uuid}/cancel"]];

const allowed = (a, b) => SPEC_PAIRS.some(([x, y]) => (a === x && b === y) || (a === y && b === x));
const isVariable = (segment) => /^{.+?}$/.test(segment);

/**
 * As the built-in rule decides: paths with as many segments and as many variables are
 * ambiguous when every segment of one can match the same segment of the other.
 */
function ambiguous(a, b) {
  const sa = a.split("/");
  const sb = b.split("/");
  const variables = (segments) => segments.filter(isVariable).length;
  if (sa.length !== sb.length || variables(sa) !== variables(sb)) return false;
  return sa.every((s, i) => s === sb[i] || isVariable(s) || isVariable(sb[i]));
}

function NoAmbiguousPaths() {
  return {
    Paths(paths, { report, location }) {
      const seen = [];
      for (const path of Object.keys(paths)) {
        const clash = seen.find((other) => ambiguous(other, path) && !allowed(other, path));
        if (clash) {
          report({ message: `Paths should resolve unambiguously. Found two ambiguous paths: \`${clash}\` and \`${path}\`.`, location: location.child([path]).key() });
        }
        seen.push(path);
      }
    },
  };
}

/**
 * capstan/feature-gate: an operation that needs a paid feature (`x-capstan-feature`, from
 * RouteSpec.feature) documents the feature gate's 402, and only such operations document a
 * 402 (spec section 7: 402 means a paid feature is missing).
 */
function FeatureGate() {
  return {
    Operation(operation, { report, location }) {
      const feature = operation["x-capstan-feature"];
      const has402 = Object.prototype.hasOwnProperty.call(operation.responses ?? {}, "402");
      if (feature !== undefined && !has402) {
        report({ message: `Operation needs the paid feature ${feature} but documents no 402 response.`, location: location.child(["responses"]).key() });
      }
      if (feature === undefined && has402) {
        report({ message: "Operation documents a 402 response but names no paid feature (x-capstan-feature).", location: location.child(["responses", "402"]).key() });
      }
    },
  };
}

export default function capstanPlugin() {
  return { id: "capstan", rules: { oas3: { "no-ambiguous-paths": NoAmbiguousPaths, "feature-gate": FeatureGate } } };
}
