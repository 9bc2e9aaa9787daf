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

export default function capstanPlugin() {
  return { id: "capstan", rules: { oas3: { "no-ambiguous-paths": NoAmbiguousPaths } } };
}
