/**
 * The application settings stored one column per API field, under the API's name: the one list
 * the API's detail (http/mappers/applications.ts) and the configuration document of resource
 * backups (services/backups/configuration.ts, both directions) map through, so a setting added
 * here shows in both and is restored with the rest.
 */
export const APPLICATION_SETTING_COLUMNS = {
  description: "description",
  base_directory: "baseDirectory",
  dockerfile: "dockerfile",
  docker_registry_image_name: "dockerImage",
  docker_compose_raw: "composeRaw",
  ports_exposes: "portsExposes",
  health_check_enabled: "healthCheckEnabled",
  health_check_path: "healthCheckPath",
  health_check_port: "healthCheckPort",
  health_check_interval: "healthCheckInterval",
  health_check_timeout: "healthCheckTimeout",
  health_check_retries: "healthCheckRetries",
  health_check_start_period: "healthCheckStartPeriod",
  limits_memory: "limitsMemory",
  limits_cpus: "limitsCpus",
} as const;

type Columns = typeof APPLICATION_SETTING_COLUMNS;
type ApiName = keyof Columns;
type Column = Columns[ApiName];

/** A row's settings under their API names. */
export function applicationSettings<R extends { [C in Column]: unknown }>(row: R): { [K in ApiName]: R[Columns[K]] } {
  const out: Record<string, unknown> = {};
  for (const [api, column] of Object.entries(APPLICATION_SETTING_COLUMNS)) out[api] = row[column];
  return out as { [K in ApiName]: R[Columns[K]] };
}

/** Settings under their API names as row columns (a restore writes them back). */
export function applicationSettingColumns<S extends { [K in ApiName]: unknown }>(settings: S): { [K in ApiName as Columns[K]]: S[K] } {
  const out: Record<string, unknown> = {};
  for (const [api, column] of Object.entries(APPLICATION_SETTING_COLUMNS)) out[column] = settings[api as ApiName];
  return out as { [K in ApiName as Columns[K]]: S[K] };
}
