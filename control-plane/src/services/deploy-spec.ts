import { BuildPayload, DeployPayload, ProxySettings, parseDomains, parsePortList, type BaseImages, type DeploySource, type HealthCheck, type Mount, type ProxyRoute } from "@capstan/shared";
import type { Db } from "../db/client.js";
import type { Config } from "../config.js";
import type { SecretBox } from "../crypto/secret-box.js";
import { DomainError, Invalid } from "../domain/errors.js";
import { parseCompose, rewriteCompose, type ExtraNetwork } from "../compose/index.js";
import { routeOwnership } from "./domain-ownership.js";
import { NetworkLimitError, proxyNetworks, resourceNetworks, type NetworkPlanContext, type PlannedEnvironmentNetwork, type ResourceNetworkPlan } from "./network-plan.js";

/** What a deploy payload needs from the instance configuration. */
export interface DeploySpecConfig {
  proxy: Config["proxy"];
  baseImages: BaseImages;
  network: Config["network"];
  dialect: Config["database"]["kind"];
}

/**
 * The server's reverse proxy: image and host ports from the configuration, and the networks
 * it joins (services/network-plan.ts: the destination networks, environment networks with
 * public resources, or the dedicated proxy network under proxy isolation), and who owns which
 * host on the server (services/domain-ownership.ts), which the proxy enforces.
 */
export async function proxySettings(
  ctx: NetworkPlanContext,
  serverId: number,
  proxy: Config["proxy"],
  opts: { record?: boolean; planned?: PlannedEnvironmentNetwork; excluding?: number[]; excludingServices?: number[] } = {},
): Promise<ProxySettings> {
  const { networks, ensure_networks } = await proxyNetworks(ctx, serverId, opts);
  const ownership = await routeOwnership(ctx.db, serverId, { excluding: opts.excluding, excludingServices: opts.excludingServices });
  return ProxySettings.parse({ name: proxy.name, image: proxy.image, networks, ensure_networks, http_port: proxy.httpPort, https_port: proxy.httpsPort, ownership });
}

/** A reason the deployment cannot start, shown to the user as the deployment's reason. */
export class DeploySpecError extends Error {}

export interface DeploySpecDeps {
  db: Db;
  box: SecretBox;
  config: DeploySpecConfig;
  /** GitAppService.installationToken: a short-lived token for cloning through a git app. */
  gitAppToken(gitAppId: number): Promise<{ token: string }>;
}

export interface DeploymentRef {
  uuid: string;
  applicationId: number;
  force: boolean;
  /** commit_sha of the request (or the webhook's head commit); null: the branch head */
  commit: string | null;
}

/** `fqdn` -> proxy routes: http:// keeps that name on plain HTTP; https:// or no scheme means HTTPS. */
export function routesOf(fqdn: string | null): ProxyRoute[] {
  if (!fqdn) return [];
  const parsed = parseDomains(fqdn);
  if ("errors" in parsed) throw new DeploySpecError(`The application's domains are invalid: ${parsed.errors.join(" ")}`);
  return parsed.entries.map((e) => ({ host: e.host, https: e.https, path: e.path }));
}

/**
 * The app.deploy payload of one deployment, from the application as it is now: source (with
 * clone credentials), build settings, environment (opened), mounts, routes, health check,
 * limits and proxy settings. Checked with the protocol schema; anything that does not fit is
 * a DeploySpecError whose message names the field (never a value: values may be secrets).
 */
export async function buildDeployPayload(
  deps: DeploySpecDeps,
  deployment: DeploymentRef,
  opts: {
    /** The source to deploy instead of the application's: the image a build server pushed. */
    source?: DeploySource;
    /**
     * false: the networks to ensure are not recorded here; the caller records them
     * (recordPlannedNetworks) in the transaction that writes the job. Default true.
     */
    record?: boolean;
  } = {},
): Promise<DeployPayload> {
  const { db, box } = deps;
  const app = await db.application.findUnique({
    where: { id: deployment.applicationId },
    include: {
      destination: { select: { networkName: true } },
      environment: { select: { id: true, uuid: true } },
      envs: { where: { isPreview: false }, orderBy: { id: "asc" } },
      volumes: { orderBy: { id: "asc" } },
      privateKey: { select: { privateKeyEncrypted: true } },
      gitApp: { select: { id: true } },
    },
  });
  if (!app) throw new DeploySpecError("The application no longer exists.");

  // Runtime variables always reach the container; build-time ones also reach the build (as
  // build arguments). Preview variables belong to preview deployments only.
  const runEnv: Record<string, string> = {};
  const buildEnv: Record<string, string> = {};
  for (const v of app.envs) {
    let value: string;
    try {
      value = box.open(v.value);
    } catch {
      throw new DeploySpecError(`Environment variable ${v.key} cannot be decrypted with this instance's key.`);
    }
    runEnv[v.key] = value;
    if (v.isBuildTime) buildEnv[v.key] = value;
  }

  const ports = parsePortList(app.portsExposes);
  const routes = routesOf(app.fqdn);
  const planCtx: NetworkPlanContext = { db, network: deps.config.network, dialect: deps.config.dialect };
  const record = opts.record ?? true;
  let plan: ResourceNetworkPlan;
  try {
    plan = await resourceNetworks(
      planCtx,
      {
        teamId: app.teamId,
        serverId: app.serverId,
        environment: app.environment,
        destinationNetwork: app.destination.networkName,
        resource: { type: "application", id: app.id },
        isPublic: routes.length > 0,
      },
      { record },
    );
  } catch (err) {
    if (err instanceof NetworkLimitError) throw new DeploySpecError(`The application's environment network cannot be created: ${err.message}`);
    throw err;
  }
  const network = plan.network;
  const mounts: Mount[] = app.volumes.map((v) =>
    v.hostPath ? { host_path: v.hostPath, mount_path: v.mountPath } : { volume: `${app.uuid}-${v.name}`, mount_path: v.mountPath },
  );

  let health: HealthCheck | null = null;
  if (app.healthCheckEnabled) {
    const port = app.healthCheckPort ?? ports[0];
    if (!port) throw new DeploySpecError("The health check needs a port: set health_check_port or ports_exposes.");
    health = {
      path: app.healthCheckPath,
      port,
      interval_s: app.healthCheckInterval,
      timeout_s: app.healthCheckTimeout,
      retries: app.healthCheckRetries,
      start_period_s: app.healthCheckStartPeriod,
    };
  }

  const source = opts.source ?? (await sourceOf(deps, app, deployment, { plan, routes, port: ports[0] ?? null, env: runEnv }));

  const candidate = {
    deployment_uuid: deployment.uuid,
    app: { uuid: app.uuid, name: app.name },
    source,
    build: {
      pack: app.buildPack,
      no_cache: deployment.force,
      base_directory: app.baseDirectory || "/",
      env: buildEnv,
      base_images: deps.config.baseImages,
    },
    run: {
      env: runEnv,
      ports,
      health,
      mounts,
      network,
      networks: plan.networks,
      ensure_networks: plan.ensure_networks,
      proxy_network: plan.proxy_network,
      memory: app.limitsMemory,
      cpus: app.limitsCpus,
      routes,
    },
    proxy: await proxySettings(planCtx, app.serverId, deps.config.proxy, {
      record,
      ...(plan.network !== app.destination.networkName ? { planned: { environmentId: app.environment.id, name: plan.network } } : {}),
    }),
  };
  const parsed = DeployPayload.safeParse(candidate);
  if (!parsed.success) {
    const problems = parsed.error.issues.slice(0, 5).map((i) => `${i.path.join(".") || "payload"}: ${i.message}`);
    throw new DeploySpecError(`The application's configuration cannot be deployed: ${problems.join("; ")}`);
  }
  return parsed.data;
}

interface AppForSource {
  uuid: string;
  name: string;
  source: string;
  gitRepository: string | null;
  gitBranch: string | null;
  dockerfile: string | null;
  dockerImage: string | null;
  composeRaw: string | null;
  privateKey: { privateKeyEncrypted: string } | null;
  gitApp: { id: number } | null;
}

async function sourceOf(
  deps: DeploySpecDeps,
  app: AppForSource,
  deployment: DeploymentRef,
  run: { plan: ResourceNetworkPlan; routes: ProxyRoute[]; port: number | null; env: Record<string, string> },
): Promise<DeploySource> {
  const need = <T>(v: T | null, what: string): T => {
    if (v === null || v === undefined || v === "") throw new DeploySpecError(`The application has no ${what}.`);
    return v;
  };
  switch (app.source) {
    case "public":
      return { kind: "git", url: need(app.gitRepository, "git repository"), branch: need(app.gitBranch, "git branch"), commit: deployment.commit, auth: { kind: "none" } };
    case "private_deploy_key": {
      const key = need(app.privateKey, "deploy key");
      let privateKey: string;
      try {
        privateKey = deps.box.open(key.privateKeyEncrypted);
      } catch {
        throw new DeploySpecError("The deploy key cannot be decrypted with this instance's key.");
      }
      return {
        kind: "git",
        url: need(app.gitRepository, "git repository"),
        branch: need(app.gitBranch, "git branch"),
        commit: deployment.commit,
        auth: { kind: "ssh", private_key: privateKey },
      };
    }
    case "private_git_app": {
      const gitApp = need(app.gitApp, "git app");
      const repo = need(app.gitRepository, "git repository");
      let token: string;
      try {
        token = (await deps.gitAppToken(gitApp.id)).token;
      } catch (err) {
        throw new DeploySpecError(err instanceof DomainError ? err.message : "Could not get an installation token from the git app.");
      }
      return {
        kind: "git",
        // Stored as the clone URL on the git app's host (html_url + owner/name.git) at create.
        url: repo,
        branch: need(app.gitBranch, "git branch"),
        commit: deployment.commit,
        auth: { kind: "token", username: "x-access-token", token },
      };
    }
    case "dockerfile":
      return { kind: "dockerfile", dockerfile: need(app.dockerfile, "Dockerfile") };
    case "dockerimage":
      return { kind: "image", image: need(app.dockerImage, "image") };
    case "dockercompose": {
      const raw = need(app.composeRaw, "compose file");
      let compose: string;
      try {
        compose = rewriteCompose(parseCompose(raw), {
          appUuid: app.uuid,
          appName: app.name,
          deploymentUuid: deployment.uuid,
          network: run.plan.network,
          // The proxy network is for the public service only; attached shared networks are for every service.
          networks: run.plan.networks.map((name): ExtraNetwork => ({ name, publicOnly: name === run.plan.proxy_network })),
          proxyNetwork: run.plan.proxy_network,
          routes: run.routes,
          port: run.port,
          env: run.env,
          rollout: Date.now(),
        });
      } catch (err) {
        if (err instanceof Invalid) {
          const details = Object.values(err.errors).flat().slice(0, 5).join(" ");
          throw new DeploySpecError(`The compose file cannot be deployed: ${details || err.message}`);
        }
        throw err;
      }
      return { kind: "compose", compose };
    }
    default:
      throw new DeploySpecError(`Unknown application source ${app.source}.`);
  }
}

/** Application sources built from a git checkout or a Dockerfile (the others bring an image or a compose file). */
const BUILT_SOURCES = new Set(["public", "private_deploy_key", "private_git_app", "dockerfile"]);

/**
 * Whether the application's deployments build an image, and so may build on a build server:
 * git sources and Dockerfiles, but never containerimage or compose applications.
 */
export function needsBuild(app: { source: string; buildPack: string }): boolean {
  return BUILT_SOURCES.has(app.source) && app.buildPack !== "containerimage" && app.buildPack !== "containercompose";
}

/** The registry reference a build server pushes a deployment's image to. */
export function pushTarget(registry: string, appUuid: string, deploymentUuid: string): string {
  return `${registry}/${appUuid}:${deploymentUuid}`;
}

/**
 * The app.build payload of a deployment built on a build server: the source and build parts of
 * its deploy payload (nothing of the run environment), and where to push the image.
 */
export function buildPayloadOf(payload: DeployPayload, push: BuildPayload["push"]): BuildPayload {
  const { source } = payload;
  if (source.kind !== "git" && source.kind !== "dockerfile") {
    throw new DeploySpecError(`A ${source.kind} application is not built on a build server.`);
  }
  return BuildPayload.parse({
    deployment_uuid: payload.deployment_uuid,
    app: payload.app,
    source,
    build: payload.build,
    ports: payload.run.ports,
    push,
  });
}
