import { isAlias, isNode, parseDocument, visit } from "yaml";
import { z } from "zod";
import { Invalid } from "../domain/errors.js";
import { REFUSED_TOP_LEVEL_KEYS } from "./refused.js";
import {
  type DependsCondition,
  LIMITS,
  SERVICE_NAME,
  Service,
  type ServiceInput,
  type ServiceMount,
  TopVolume,
  VOLUME_KEY,
  reasonForKey,
} from "./schema.js";

/** The field every compose error is reported under (POST /applications/dockercompose). */
export const FIELD = "docker_compose_raw";
/** Top-level key naming the service the proxy routes to (default: the first service). */
export const PUBLIC_SERVICE_KEY = "x-capstan-public-service";
const MAX_REPORTED = 20;

/** A service as parsed: templates (`${VAR}`) are kept and resolved by rewriteCompose. */
export interface ComposeService {
  name: string;
  image: string;
  command: string | string[] | null;
  entrypoint: string | string[] | null;
  /** value null: take it from the application's variables (compose's pass-through form). */
  environment: { key: string; value: string | null }[];
  labels: Record<string, string>;
  /** Container ports ("80", "53/udp"); never published on the server. */
  expose: string[];
  mounts: ServiceMount[];
  healthcheck: { test: string[] | null; interval: string | null; timeout: string | null; startPeriod: string | null; retries: number | null; disable: boolean } | null;
  dependsOn: { service: string; condition: DependsCondition }[];
  /** In-application aliases from `links` (service -> extra name on the application's network). */
  links: { service: string; alias: string }[];
  restart: string;
  workingDir: string | null;
  user: string | null;
  hostname: string | null;
  memLimit: string | null;
  cpus: string | null;
  pidsLimit: number | null;
  shmSize: string | null;
  stopGracePeriod: string | null;
  stopSignal: string | null;
  init: boolean | null;
  tty: boolean | null;
  stdinOpen: boolean | null;
  readOnly: boolean | null;
  capDrop: string[];
  noNewPrivileges: boolean;
}

export interface ComposeDoc {
  /** In the order of the file. */
  services: ComposeService[];
  /** Named volumes declared at the top level, with the user's (non-reserved) labels. */
  volumes: { name: string; labels: Record<string, string> }[];
  /** The service the proxy routes to. */
  publicService: string;
}

const fail = (reasons: string[]): never => {
  const shown = reasons.slice(0, MAX_REPORTED);
  if (reasons.length > MAX_REPORTED) shown.push(`... and ${reasons.length - MAX_REPORTED} more problems`);
  throw new Invalid({ [FIELD]: shown });
};

/**
 * YAML text -> plain data, with the document-level limits (size, aliases, tags, one document).
 * Templates (control-plane/src/templates/) load their compose part with it too: one YAML policy.
 * Throws Invalid {docker_compose_raw}.
 */
export function loadYaml(raw: string): unknown {
  if (typeof raw !== "string" || raw.trim() === "") fail(["the compose file is empty"]);
  const bytes = Buffer.byteLength(raw, "utf8");
  if (bytes > LIMITS.rawBytes) fail([`the compose file is ${bytes} bytes; the limit is ${LIMITS.rawBytes}`]);
  if (raw.includes("\u0000")) fail(["the compose file contains NUL characters"]);
  let data: unknown;
  try {
    // YAML 1.2 core schema: "yes"/"no"/"on" stay strings; known 1.1 tags (!!binary, !!set...) stay off.
    const doc = parseDocument(raw, { uniqueKeys: true, merge: true, prettyErrors: true, resolveKnownTags: false, strict: true });
    const problems = [...doc.errors, ...doc.warnings].map((e) => `YAML: ${yamlMessage(e)}`);
    if (problems.length) fail(problems);
    let aliases = 0;
    let tagged: string | null = null;
    visit(doc, {
      Node(_key, node) {
        if (isAlias(node)) aliases++;
        else if (isNode(node) && node.tag && !/^tag:yaml\.org,2002:(str|int|float|bool|null|map|seq)$/.test(node.tag)) tagged ??= node.tag;
      },
    });
    if (tagged) fail([`YAML tag ${tagged} is not supported`]);
    if (aliases > LIMITS.aliases) fail([`the compose file uses ${aliases} YAML aliases; the limit is ${LIMITS.aliases}`]);
    data = doc.toJS({ maxAliasCount: LIMITS.aliases });
    // Aliases of big anchors multiply the data even under the count limit.
    const expanded = JSON.stringify(data ?? null).length;
    if (expanded > LIMITS.expandedChars) fail([`the compose file expands to ${expanded} characters through YAML aliases; the limit is ${LIMITS.expandedChars}`]);
  } catch (err) {
    if (err instanceof Invalid) throw err;
    fail([`YAML: ${yamlMessage(err as Error)}`]);
  }
  return data;
}

/** The library's message without its source excerpt, in the user's terms. */
function yamlMessage(err: Error): string {
  const first = (err.message.split("\n")[0] ?? "").replace(/:$/, "");
  if (/multiple documents/.test(first)) return "the compose file must be a single YAML document";
  if (/Excessive alias count/.test(first)) return "YAML aliases expand too much (resource exhaustion); use fewer aliases";
  return first;
}

/** Dotted path of a zod issue, prefixed with where it happened. */
function describe(prefix: string, issue: z.core.$ZodIssue, where: "service" | "volume"): string[] {
  const path = [prefix, ...issue.path.map(String)].join(".");
  if (issue.code === "unrecognized_keys") return issue.keys.map((k) => `${path}.${reasonForKey(issue.path.length === 0 ? where : "nested", k)}`);
  return [`${path}: ${issue.message}`];
}

const plainObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Parses and checks a compose file against the subset Capstan runs (docs/compose.md).
 * Throws Invalid `{docker_compose_raw: [reasons]}` for YAML errors and anything unsafe or
 * unsupported; reserved labels (`capstan.`, `com.docker.compose.`) are dropped silently.
 */
export function parseCompose(raw: string): ComposeDoc {
  const data = loadYaml(raw);
  if (!plainObject(data)) return fail(["the compose file must be a mapping with a services key"]);
  const reasons: string[] = [];

  let publicService: string | null = null;
  for (const [key, value] of Object.entries(data)) {
    if (key === "services" || key === "volumes" || key === "version" || key === "name") continue;
    if (key === PUBLIC_SERVICE_KEY) {
      if (typeof value === "string" && SERVICE_NAME.test(value)) publicService = value;
      else reasons.push(`${PUBLIC_SERVICE_KEY}: name one of the services`);
      continue;
    }
    // x- extension fields hold anchors for reuse; they never reach the engine.
    if (key.startsWith("x-")) continue;
    const reason = REFUSED_TOP_LEVEL_KEYS[key];
    reasons.push(reason ? `${key} is refused: ${reason}` : `${key} is not supported (docs/compose.md lists the supported keys)`);
  }
  if (data.version !== undefined && typeof data.version !== "string" && typeof data.version !== "number") reasons.push("version: use a string such as \"3.8\"");
  if (data.name !== undefined && typeof data.name !== "string") reasons.push("name: use a string (the platform names the project capstan-<application uuid>)");

  const services: ComposeService[] = [];
  if (!plainObject(data.services) || Object.keys(data.services).length === 0) {
    reasons.push("services: define at least one service");
  } else {
    const entries = Object.entries(data.services);
    if (entries.length > LIMITS.services) reasons.push(`services: at most ${LIMITS.services} services`);
    for (const [name, spec] of entries.slice(0, LIMITS.services)) {
      if (!SERVICE_NAME.test(name)) {
        reasons.push(`services.${name.slice(0, 40)}: service names are 1-26 lowercase letters, digits, _ or -, starting with a letter`);
        continue;
      }
      if (!plainObject(spec)) {
        reasons.push(`services.${name}: a service is a mapping with at least an image`);
        continue;
      }
      const parsed = Service.safeParse(spec);
      if (!parsed.success) {
        for (const issue of parsed.error.issues) reasons.push(...describe(`services.${name}`, issue, "service"));
        continue;
      }
      services.push(normalise(name, parsed.data));
    }
  }

  const volumes: ComposeDoc["volumes"] = [];
  if (data.volumes !== undefined && data.volumes !== null) {
    if (!plainObject(data.volumes)) reasons.push("volumes: use a mapping of volume names");
    else {
      const entries = Object.entries(data.volumes);
      if (entries.length > LIMITS.volumes) reasons.push(`volumes: at most ${LIMITS.volumes} volumes`);
      for (const [name, spec] of entries.slice(0, LIMITS.volumes)) {
        if (!VOLUME_KEY.test(name)) {
          reasons.push(`volumes.${name.slice(0, 40)}: volume names are 1-64 letters, digits, _ . or -, starting with a letter or digit`);
          continue;
        }
        const parsed = TopVolume.safeParse(spec);
        if (!parsed.success) {
          for (const issue of parsed.error.issues) reasons.push(...describe(`volumes.${name}`, issue, "volume"));
          continue;
        }
        volumes.push({ name, labels: parsed.data?.labels ?? {} });
      }
    }
  }

  if (reasons.length === 0) reasons.push(...crossCheck(services, volumes, publicService));
  if (reasons.length) fail(reasons);
  return { services, volumes, publicService: publicService ?? services[0]!.name };
}

function normalise(name: string, s: ServiceInput): ComposeService {
  const limits = s.deploy?.resources?.limits;
  const hc = s.healthcheck;
  const test = hc?.test === undefined ? null : Array.isArray(hc.test) ? hc.test : ["CMD-SHELL", hc.test];
  const expose = [...(s.ports ?? []), ...(s.expose ?? [])];
  return {
    name,
    image: s.image,
    command: s.command ?? null,
    entrypoint: s.entrypoint ?? null,
    environment: s.environment ?? [],
    labels: s.labels ?? {},
    expose: [...new Set(expose)],
    mounts: [...(s.volumes ?? []), ...(s.tmpfs ?? []).map((target): ServiceMount => ({ type: "tmpfs", target, size: null }))],
    healthcheck: hc
      ? {
          test,
          interval: hc.interval ?? null,
          timeout: hc.timeout ?? null,
          startPeriod: hc.start_period ?? null,
          retries: hc.retries ?? null,
          disable: hc.disable === true || test?.[0] === "NONE",
        }
      : null,
    dependsOn: s.depends_on ?? [],
    links: s.links ?? [],
    restart: s.restart ?? "unless-stopped",
    workingDir: s.working_dir ?? null,
    user: s.user ?? null,
    hostname: s.hostname ?? null,
    memLimit: s.mem_limit ?? limits?.memory ?? null,
    cpus: s.cpus ?? limits?.cpus ?? null,
    pidsLimit: s.pids_limit ?? limits?.pids ?? null,
    shmSize: s.shm_size ?? null,
    stopGracePeriod: s.stop_grace_period ?? null,
    stopSignal: s.stop_signal ?? null,
    init: s.init ?? null,
    tty: s.tty ?? null,
    stdinOpen: s.stdin_open ?? null,
    readOnly: s.read_only ?? null,
    capDrop: s.cap_drop ?? [],
    noNewPrivileges: (s.security_opt ?? []).length > 0,
  };
}

/** References between services and volumes, and depends_on cycles. */
function crossCheck(services: ComposeService[], volumes: ComposeDoc["volumes"], publicService: string | null): string[] {
  const out: string[] = [];
  const names = new Set(services.map((s) => s.name));
  const declared = new Set(volumes.map((v) => v.name));
  if (publicService !== null && !names.has(publicService)) out.push(`${PUBLIC_SERVICE_KEY}: there is no service ${publicService}`);
  for (const s of services) {
    for (const d of s.dependsOn) {
      if (!names.has(d.service)) out.push(`services.${s.name}.depends_on: there is no service ${d.service.slice(0, 40)}`);
      else if (d.service === s.name) out.push(`services.${s.name}.depends_on: a service cannot depend on itself`);
    }
    for (const l of s.links) {
      if (!names.has(l.service)) out.push(`services.${s.name}.links: there is no service ${l.service} (links to containers outside this application are not allowed)`);
    }
    const targets = new Set<string>();
    for (const m of s.mounts) {
      if (targets.has(m.target)) out.push(`services.${s.name}.volumes: ${m.target} is mounted twice`);
      targets.add(m.target);
      if (m.type === "volume" && m.source !== null && !declared.has(m.source)) {
        out.push(`services.${s.name}.volumes: volume ${m.source} is not declared under the top-level volumes key`);
      }
    }
  }
  const cycle = findCycle(services);
  if (cycle) out.push(`depends_on: services depend on each other in a cycle (${cycle.join(" -> ")})`);
  return out;
}

function findCycle(services: ComposeService[]): string[] | null {
  const deps = new Map(services.map((s) => [s.name, s.dependsOn.map((d) => d.service)]));
  const state = new Map<string, "visiting" | "done">();
  const stack: string[] = [];
  const visitNode = (n: string): string[] | null => {
    if (state.get(n) === "done") return null;
    if (state.get(n) === "visiting") return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, "visiting");
    stack.push(n);
    for (const d of deps.get(n) ?? []) {
      const c = visitNode(d);
      if (c) return c;
    }
    stack.pop();
    state.set(n, "done");
    return null;
  };
  for (const s of services) {
    const c = visitNode(s.name);
    if (c) return c;
  }
  return null;
}

/** The server paths a parsed file bind-mounts (normalised, each once): what the team's bind-mount rule looks at. */
export function bindSources(doc: ComposeDoc): string[] {
  return [...new Set(doc.services.flatMap((s) => s.mounts.flatMap((m) => (m.type === "bind" ? [m.source] : []))))];
}
