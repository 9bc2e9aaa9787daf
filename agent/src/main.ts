import { type AgentConfig, ConfigError, loadConfig } from "./config.js";
import { AgentConnection } from "./connection/connection.js";
import type { Engine } from "./docker/engine.js";
import { DockerodeEngine } from "./docker/dockerode-engine.js";
import { EngineWatch, quietWhileDown } from "./docker/engine-watch.js";
import { ownContainerId } from "./docker/self.js";
import { gatherFacts } from "./facts/facts.js";
import { createHandlers } from "./handlers/index.js";
import { createLogger, errorMessage, type Logger } from "./log.js";
import { onProxyNameChanged, onProxyWarningsChanged, rememberProxyName } from "./proxy/index.js";
import { loginStates, onRegistryLoginsChanged } from "./registries/config.js";
import { StateStore } from "./state/store.js";
import { watchContainerEvents } from "./status/events.js";
import { StatusReporter } from "./status/reporter.js";
import { AGENT_VERSION } from "./version.js";
import { recoverStoppedContainers } from "./backup/stop-journal.js";

function fatal(message: string, code = 1): never {
  process.stderr.write(message.endsWith("\n") ? message : message + "\n");
  process.exit(code);
}

/**
 * A stood-down agent must stay down. Run as a container with `--restart unless-stopped`
 * (install.sh), exiting is not enough: the engine would start it again, forever. So it turns
 * off its own container's restart policy first (best effort; on the host, or under systemd's
 * Restart=on-failure, exit 0 already means "stay down").
 */
async function stayDown(engine: Engine, log: Logger): Promise<void> {
  try {
    const id = await ownContainerId();
    if (!id) return;
    const policy = await engine.restartPolicy(id);
    if (policy === null || policy === "no") return;
    await engine.disableRestart(id);
    log.info("turned off this agent container's restart policy", { container: id.slice(0, 12), was: policy });
  } catch (err) {
    log.warn("could not turn off this agent container's restart policy; the engine may restart it", { err: errorMessage(err) });
  }
}

/** `capstan-agent`: reads its config from the environment and runs until stopped. */
export async function main(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  let config: AgentConfig;
  try {
    config = loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) fatal(err.message);
    throw err;
  }
  const log: Logger = createLogger(config.logLevel, undefined, { service: "capstan-agent" });

  // A failing job or a library bug must not take the agent (and every running job) down.
  process.on("unhandledRejection", (reason) => log.error("unhandled promise rejection", { err: errorMessage(reason) }));
  process.on("uncaughtException", (err) => log.error("uncaught exception", { err: errorMessage(err), stack: err.stack }));

  let store: StateStore;
  try {
    store = await StateStore.open(config.stateDir, { log });
  } catch (err) {
    fatal(`capstan-agent: cannot use state directory ${config.stateDir}: ${errorMessage(err)}`);
  }

  const engine = new DockerodeEngine(config.dockerSocket);
  const marker = store.standDownMarker();
  if (marker) {
    if (store.isStoodDown(config.token)) {
      log.warn("this agent was told to stand down by the control plane and will not run with the same token; install it again with a new token", {
        reason: marker.reason,
        at: marker.at,
        state_dir: config.stateDir,
      });
      await stayDown(engine, log);
      process.exit(0);
    }
    log.info("new agent token: clearing the previous stand-down", { was: marker.at });
    await store.clearStandDown();
  }

  // A backup with stop_during_backup that the agent did not finish (it crashed or was killed)
  // left its stopped containers in the journal: start them before any job runs.
  try {
    await recoverStoppedContainers(engine, config.stateDir, log);
  } catch (err) {
    log.warn("could not read the backup stop journal", { err: errorMessage(err) });
  }

  // Whether there is an engine at all: said once, retried with backoff, shown in the server's
  // facts (docker/engine-watch.ts). While it is down, failures that follow from it are quiet.
  let connection: AgentConnection | null = null;
  let statuses: StatusReporter | null = null;
  const watch = new EngineWatch(engine, log, (state) => {
    connection?.refreshFacts();
    if (state.up) void statuses?.full();
  });
  const quiet = quietWhileDown(log, watch);
  // Why the proxy left a route or a proxy.* label out shows in GET /servers/{uuid} right after the sync.
  onProxyWarningsChanged(() => connection?.refreshFacts());
  // Which proxy is this server's survives a restart: an engine may hold other platform proxies.
  const knownProxy = store.proxyName();
  if (knownProxy) rememberProxyName(engine, knownProxy);
  onProxyNameChanged((name) => {
    connection?.refreshFacts();
    store.writeProxyName(name).catch((err) => log.warn("could not record the proxy name in the state directory", { err: errorMessage(err) }));
  });
  onRegistryLoginsChanged(() => connection?.refreshFacts());

  // Resource statuses follow the engine: events between full reports (see status/reporter.ts).
  statuses = new StatusReporter(engine, (report) => connection?.reportStatus(report), quiet);
  connection = new AgentConnection({
    config,
    agentVersion: AGENT_VERSION,
    log,
    store,
    handlers: createHandlers(engine, {
      extraLabels: config.extraLabels,
      stateDir: config.stateDir,
      // resource restores (w7/restore): the helper container that empties volumes runs the agent's own image.
      helperImage: async () => config.helperImage ?? (await engine.ownImage()),
    }),
    // With the registry logins' fingerprints: the control plane tells drift from them.
    gatherFacts: async () => {
      const [facts, registries] = await Promise.all([gatherFacts(engine, log), loginStates(config.stateDir).catch(() => null)]);
      return registries ? { ...facts, registries } : facts;
    },
    onConnect: () => void statuses.full(),
    onStandDown: () => {
      void Promise.allSettled([store.flush(), stayDown(engine, log)]).finally(() => process.exit(0));
    },
  });

  log.info("capstan-agent starting", {
    version: AGENT_VERSION,
    state_dir: config.stateDir,
    docker_socket: config.dockerSocket,
    pending_outcomes: store.pending().length,
  });
  connection.start();
  watch.start();
  statuses.start();
  const events = watchContainerEvents(
    config.dockerSocket,
    {
      onEvent: (e) => statuses.onEvent(e),
      onResync: () => void statuses.full(),
      onError: (err) => quiet.warn("the engine's event stream broke; reconnecting", { err: errorMessage(err) }),
    },
    { maxDelayMs: 60_000 },
  );

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal });
    events.stop();
    watch.stop();
    statuses.stop();
    connection!.stop().then(
      () => process.exit(0),
      (err) => {
        log.error("error while stopping", { err: errorMessage(err) });
        process.exit(1);
      },
    );
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
}
