/**
 * The source does not fit the chosen builder (nothing detected, a bad descriptor, an unsafe
 * name...). The message is shown to the user as the deployment's failure reason, so it speaks
 * of the repository's files, never of paths on the agent's host.
 */
export class BuildPlanError extends Error {
  override name = "BuildPlanError";
}
