import {
  type ComposeMeta,
  EnvValue,
  LABEL_DEPLOYMENT,
  LABEL_DOMAINS,
  LABEL_MANAGED,
  LABEL_PROXY_NETWORK,
  LABEL_PROXY_PORT,
  LABEL_PROXY_ROUTES,
  LABEL_RESOURCE_NAME,
  LABEL_RESOURCE_TYPE,
  LABEL_SERVICE_COMPONENT,
  LABEL_RESOURCE_UUID,
  LABEL_ROLLOUT,
  DockerName,
  type ProxyRoute,
  VolumeName,
} from "@capstan/shared";
import { Invalid } from "../domain/errors.js";
import { TemplateError, interpolate } from "./interpolate.js";
import { type ComposeDoc, type ComposeService, FIELD } from "./parse.js";
import { renderCompose } from "./render.js";
import { RESOLVED } from "./schema.js";

/** The label names of the platform's contract (shared/src/protocol/labels.ts), by role. */
export const LABELS = {
  managed: LABEL_MANAGED,
  uuid: LABEL_RESOURCE_UUID,
  name: LABEL_RESOURCE_NAME,
  type: LABEL_RESOURCE_TYPE,
  deployment: LABEL_DEPLOYMENT,
  rollout: LABEL_ROLLOUT,
  domains: LABEL_DOMAINS,
  routes: LABEL_PROXY_ROUTES,
  port: LABEL_PROXY_PORT,
  network: LABEL_PROXY_NETWORK,
} as const;

/** Top-level extension key of the rendered file: what the agent needs to run and check it. */
export const RENDERED_META_KEY = "x-capstan";
/** Largest rendered file a deploy payload carries (DeploySource compose). */
const MAX_RENDERED = 1_048_576;
/** Keys of the two networks in the rendered file. */
const APP_NETWORK = "app";
const DESTINATION_NETWORK = "destination";
/** Keys of further networks: "proxy" for the proxy network, "shared-<n>" for the others. */
const extraKey = (n: ExtraNetwork, index: number) => (n.publicOnly ? "proxy" : `shared-${index + 1}`);

/** A further network the application's services join (external to the project). */
export interface ExtraNetwork {
  name: string;
  /** Only the public service joins it (the proxy network: internal services must not reach the proxy). */
  publicOnly: boolean;
}

export interface RewriteContext {
  appUuid: string;
  appName: string;
  deploymentUuid: string;
  /** The primary Docker network (the environment's or the destination's; external to the project). */
  network: string;
  /** Further networks (services/network-plan.ts): the proxy network, shared networks attached by users. */
  networks?: ExtraNetwork[];
  /** Value of capstan.proxy.network on the public service; null: `network`. A user's own value wins. */
  proxyNetwork?: string | null;
  routes: ProxyRoute[];
  /** Container port of the public service the proxy sends traffic to; null: its first exposed port. */
  port: number | null;
  /** The application's run-time variables: the only source of `${VAR}` values. */
  env: Record<string, string>;
  /** ms epoch of this rollout (capstan.rollout). */
  rollout: number;
  /** More labels for every container, volume and network (tests: capstan.test=1). */
  extraLabels?: Record<string, string>;
  /** The resource owning the project: an application (default) or a service (issue 17). */
  resourceType?: "application" | "service";
  /** A service's component uuid per compose service name (label capstan.service.component: per-component status). */
  components?: Record<string, string>;
  /**
   * w7/svcroute: a service's routed compose services (its service applications with an fqdn),
   * each with its own routes and port (null: its first exposed port). When given, these are
   * the proxy's targets instead of the public service with `routes` and `port`.
   */
  routed?: Record<string, { routes: ProxyRoute[]; port: number | null }>;
}

/** What rewriteCompose writes under x-capstan, read back by the agent (shared's ComposeMeta). */
export type RenderedMeta = ComposeMeta;

export const projectName = (appUuid: string) => `capstan-${appUuid}`;
export const containerName = (appUuid: string, service: string) => `${appUuid}-${service}`;
export const volumeName = (appUuid: string, volume: string) => `${appUuid}-${volume}`;
/** The application's own network: service names resolve there and nowhere else. */
export const appNetworkName = (appUuid: string) => `capstan-${appUuid}`;

const APP_UUID = /^[a-z0-9-]{1,64}$/;

/**
 * The compose file the agent runs for one deployment: project capstan-<app uuid>, containers
 * `<app uuid>-<service>`, named volumes `<app uuid>-<volume>`, every service on the
 * application's own network and on its primary network (ctx.network: the environment's or the
 * destination's) and the further ones (ctx.networks; a public-only one, the proxy network,
 * on the public service alone), platform labels everywhere,
 * proxy labels on the public service, variables resolved from `ctx.env` and every `$`
 * escaped. Throws Invalid {docker_compose_raw} when a resolved value is invalid or a
 * `${VAR:?}` variable is missing.
 */
export function rewriteCompose(doc: ComposeDoc, ctx: RewriteContext): string {
  if (!APP_UUID.test(ctx.appUuid) || !APP_UUID.test(ctx.deploymentUuid)) throw new Error("rewriteCompose: invalid application or deployment uuid");
  if (!VolumeName.safeParse(ctx.network).success) throw new Error(`rewriteCompose: invalid network name ${ctx.network}`);
  const extras = (ctx.networks ?? []).map((n, i) => ({ ...n, key: extraKey(n, i) }));
  for (const n of extras) if (!DockerName.safeParse(n.name).success) throw new Error(`rewriteCompose: invalid network name ${n.name}`);
  if (extras.filter((n) => n.publicOnly).length > 1) throw new Error("rewriteCompose: more than one public-only network");
  const reasons: string[] = [];
  const public_ = doc.services.find((s) => s.name === doc.publicService);
  if (!public_) throw new Error(`rewriteCompose: public service ${doc.publicService} is not in the document`);

  const extra = ctx.extraLabels ?? {};
  const owned = { ...extra, [LABELS.managed]: "true", [LABELS.uuid]: ctx.appUuid };
  // The proxy's targets: the public service with the application's routes, or a service's routed components.
  const targets = new Map<string, { routes: ProxyRoute[]; port: number | null }>();
  if (ctx.routed) {
    for (const s of doc.services) {
      const r = ctx.routed[s.name];
      if (!r || r.routes.length === 0) continue;
      const port = r.port ?? firstTcpPort(s);
      if (port === null) reasons.push(`services.${s.name}: it has a domain but exposes no port for the proxy; add expose: ["<port>"] or a SERVICE_URL_${s.name.toUpperCase()}_<port> variable`);
      targets.set(s.name, { routes: r.routes, port });
    }
  } else {
    const port = ctx.port ?? firstTcpPort(public_);
    if (ctx.routes.length > 0 && port === null) {
      reasons.push(`services.${public_.name}: the public service exposes no port for the proxy; add expose: ["<port>"] or set ports_exposes`);
    }
    targets.set(public_.name, { routes: ctx.routes, port });
  }

  const resolveAt = (where: string, template: string): string => {
    try {
      return checkedValue(interpolate(template, ctx.env));
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      reasons.push(`${where}: ${err.message}`);
      return "";
    }
  };

  const services: Record<string, unknown> = {};
  const aliases = linkAliases(doc);
  for (const s of doc.services) {
    const resolve = (what: string, template: string) => resolveAt(`services.${s.name}.${what}`, template);
    const checked = (what: keyof typeof RESOLVED, template: string): string => {
      const v = resolve(what, template);
      const problem = RESOLVED[what](v);
      if (problem && !reasons.some((r) => r.startsWith(`services.${s.name}.${what}:`))) reasons.push(`services.${s.name}: ${problem}`);
      return v;
    };
    const target = targets.get(s.name);
    // A service's components without a domain are no proxy target (and stay off the proxy network).
    const isPublic = target !== undefined;
    const out: Record<string, unknown> = {
      image: checked("image", s.image),
      container_name: containerName(ctx.appUuid, s.name),
    };
    if (s.command !== null) out.command = typeof s.command === "string" ? resolve("command", s.command) : s.command.map((c) => resolve("command", c));
    if (s.entrypoint !== null) out.entrypoint = typeof s.entrypoint === "string" ? resolve("entrypoint", s.entrypoint) : s.entrypoint.map((c) => resolve("entrypoint", c));

    const environment: Record<string, string> = {};
    for (const e of s.environment) {
      if (e.value !== null) environment[e.key] = resolve(`environment.${e.key}`, e.value);
      else if (Object.hasOwn(ctx.env, e.key)) environment[e.key] = resolve(`environment.${e.key}`, escapeTemplate(ctx.env[e.key]!));
    }
    if (Object.keys(environment).length) out.environment = environment;

    const userLabels = Object.fromEntries(Object.entries(s.labels).map(([k, v]) => [k, resolve(`labels.${k}`, v)]));
    // The one platform label a user may set (spec section 1, rule 9): the network the proxy
    // reaches this service on. It must name a Docker network; the user attaches that network.
    const userProxyNetwork = userLabels[LABELS.network];
    if (userProxyNetwork !== undefined && !DockerName.safeParse(userProxyNetwork).success) {
      reasons.push(`services.${s.name}.labels.${LABELS.network}: must name a Docker network (letters, digits, _ . -)`);
    }
    out.labels = {
      ...userLabels,
      ...owned,
      [LABELS.name]: ctx.appName,
      [LABELS.type]: ctx.resourceType ?? "application",
      ...(ctx.components?.[s.name] ? { [LABEL_SERVICE_COMPONENT]: ctx.components[s.name] } : {}),
      [LABELS.deployment]: ctx.deploymentUuid,
      // One rollout for all services: they are created together and act as one (start, stop).
      [LABELS.rollout]: String(ctx.rollout),
      // Set on every service, empty on the others (not a proxy target): images can carry
      // labels, and the engine copies image labels onto containers unless the container sets
      // the key itself.
      [LABELS.domains]: target ? [...new Set(target.routes.map((r) => r.host))].join(",") : "",
      [LABELS.routes]: target ? JSON.stringify(target.routes) : "",
      [LABELS.port]: target && target.port !== null ? String(target.port) : "",
      [LABELS.network]: userProxyNetwork ?? (isPublic ? (ctx.proxyNetwork ?? ctx.network) : ""),
    };

    if (s.expose.length) out.expose = s.expose;
    const volumes = s.mounts.map((m) => {
      if (m.type === "bind") return `${m.source}:${m.target}${m.readOnly ? ":ro" : ""}`;
      if (m.type === "tmpfs") return { type: "tmpfs", target: m.target, ...(m.size !== null ? { tmpfs: { size: m.size } } : {}) };
      return {
        type: "volume",
        ...(m.source !== null ? { source: m.source } : {}),
        target: m.target,
        ...(m.readOnly ? { read_only: true } : {}),
        ...(m.nocopy ? { volume: { nocopy: true } } : {}),
      };
    });
    if (volumes.length) out.volumes = volumes;

    const hc = s.healthcheck;
    if (hc?.disable) out.healthcheck = { disable: true };
    else if (hc) {
      out.healthcheck = {
        test: hc.test!.map((t, i) => (i === 0 ? t : resolve("healthcheck.test", t))),
        ...(hc.interval !== null ? { interval: hc.interval } : {}),
        ...(hc.timeout !== null ? { timeout: hc.timeout } : {}),
        ...(hc.startPeriod !== null ? { start_period: hc.startPeriod } : {}),
        ...(hc.retries !== null ? { retries: hc.retries } : {}),
      };
    }
    if (s.dependsOn.length) {
      out.depends_on = Object.fromEntries(s.dependsOn.map((d) => [containerName(ctx.appUuid, d.service), { condition: d.condition }]));
    }
    out.restart = s.restart;
    if (s.workingDir !== null) out.working_dir = checked("working_dir", s.workingDir);
    if (s.user !== null) out.user = checked("user", s.user);
    if (s.hostname !== null) out.hostname = s.hostname;
    if (s.memLimit !== null) out.mem_limit = s.memLimit;
    if (s.cpus !== null) out.cpus = Number(s.cpus);
    if (s.pidsLimit !== null) out.pids_limit = s.pidsLimit;
    if (s.shmSize !== null) out.shm_size = s.shmSize;
    if (s.stopGracePeriod !== null) out.stop_grace_period = s.stopGracePeriod;
    if (s.stopSignal !== null) out.stop_signal = s.stopSignal;
    if (s.init !== null) out.init = s.init;
    if (s.tty !== null) out.tty = s.tty;
    if (s.stdinOpen !== null) out.stdin_open = s.stdinOpen;
    if (s.readOnly !== null) out.read_only = s.readOnly;
    if (s.capDrop.length) out.cap_drop = s.capDrop;
    if (s.noNewPrivileges) out.security_opt = ["no-new-privileges:true"];
    // Service names resolve on the application's own network only: on the shared destination
    // network two applications' "db" would answer for each other. There the container name
    // (the rendered service key) is the only name.
    out.networks = {
      [APP_NETWORK]: { aliases: [s.name, ...(aliases.get(s.name) ?? [])] },
      [DESTINATION_NETWORK]: {},
      ...Object.fromEntries(extras.filter((n) => isPublic || !n.publicOnly).map((n) => [n.key, {}])),
    };
    services[containerName(ctx.appUuid, s.name)] = out;
  }

  const volumeLabels = Object.fromEntries(
    doc.volumes.map((v) => [v.name, Object.fromEntries(Object.entries(v.labels).map(([k, val]) => [k, resolveAt(`volumes.${v.name}.labels.${k}`, val)]))]),
  );

  if (reasons.length) throw new Invalid({ [FIELD]: reasons.slice(0, 20) }, "The compose file cannot be deployed with the application's current settings.");

  const meta: RenderedMeta = {
    project: projectName(ctx.appUuid),
    app_uuid: ctx.appUuid,
    deployment_uuid: ctx.deploymentUuid,
    network: ctx.network,
    public_container: containerName(ctx.appUuid, public_.name),
    containers: doc.services.map((s) => containerName(ctx.appUuid, s.name)),
  };
  const rendered = renderCompose({
    [RENDERED_META_KEY]: meta,
    services,
    networks: {
      [APP_NETWORK]: { name: appNetworkName(ctx.appUuid), labels: owned },
      [DESTINATION_NETWORK]: { external: true, name: ctx.network },
      ...Object.fromEntries(extras.map((n) => [n.key, { external: true, name: n.name }])),
    },
    ...(doc.volumes.length
      ? {
          volumes: Object.fromEntries(
            doc.volumes.map((v) => [v.name, { name: volumeName(ctx.appUuid, v.name), labels: { ...volumeLabels[v.name], ...owned } }]),
          ),
        }
      : {}),
  });
  if (Buffer.byteLength(rendered) > MAX_RENDERED) {
    throw new Invalid({ [FIELD]: [`the rendered compose file is larger than ${MAX_RENDERED} bytes; reduce the variables it references`] });
  }
  return rendered;
}

// eslint-disable-next-line no-control-regex
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** A resolved value compose can carry: what EnvValue allows, and text UTF-8 can encode. */
function checkedValue(v: string): string {
  if (!EnvValue.safeParse(v).success) throw new TemplateError("the resolved value is longer than 65536 characters or contains NUL characters");
  if (UNPAIRED_SURROGATE.test(v)) throw new TemplateError("the resolved value contains unpaired surrogate characters");
  return v;
}

/** A literal value as a template of itself (pass-through variables are not interpolated again). */
const escapeTemplate = (v: string) => v.split("$").join("$$");

function firstTcpPort(s: ComposeService): number | null {
  const p = s.expose.find((e) => !e.endsWith("/udp"));
  return p === undefined ? null : Number(p);
}

/** `links: [db:database]` on any service: "database" becomes another name of db on the application's network. */
function linkAliases(doc: ComposeDoc): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const s of doc.services) {
    for (const l of s.links) {
      if (l.alias === l.service) continue;
      const list = out.get(l.service) ?? [];
      if (!list.includes(l.alias)) list.push(l.alias);
      out.set(l.service, list);
    }
  }
  return out;
}
