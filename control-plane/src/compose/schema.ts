import { CpuLimit, EnvKey, LABEL_PROXY_NETWORK, MemoryLimit, MountPath, checkHostPath, isImageRef } from "@capstan/shared";
import { z } from "zod";
import { REFUSED_SERVICE_KEYS, REFUSED_VOLUME_KEYS } from "./refused.js";
import { TemplateError, checkTemplate } from "./interpolate.js";

/**
 * zod schemas of the compose subset Capstan runs. They parse what the user wrote (before
 * interpolation) into a normalised form; strings that may hold `${VAR}` stay templates and are
 * resolved and re-checked by rewriteCompose.
 */

export const LIMITS = {
  /** Bytes of YAML accepted. */
  rawBytes: 256 * 1024,
  services: 32,
  volumes: 64,
  /** YAML aliases (`*anchor`); bounds "billion laughs" expansion. */
  aliases: 100,
  /** Characters of the document once aliases are expanded. */
  expandedChars: 2 * 1024 * 1024,
  perServiceList: 256,
  templateChars: 65_536,
} as const;

// eslint-disable-next-line no-control-regex
const NUL_OR_LONE_SURROGATE = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Service names: they become container names `<app uuid>-<name>`, which must stay a DNS label (63). */
export const SERVICE_NAME = /^[a-z][a-z0-9_-]{0,25}$/;
/** Named volume keys: the Docker volume is `<app uuid>-<key>`. */
export const VOLUME_KEY = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;
/** Docker label keys: reverse-DNS style, nothing that could smuggle whitespace or quotes. */
export const LABEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$/;
const DNS_LABEL = /^[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$/;
const DURATION = /^([0-9]+(\.[0-9]+)?(ns|us|ms|s|m|h))+$/;
const SIZE = /^[0-9]+(\.[0-9]+)?[bkmg]?$/i;
const USER = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$/;

/**
 * Label keys the platform owns: dropped from user input (spec 4.15), never refused. Except the
 * routing-network label: a user's value takes precedence over the automatic one (spec section 1,
 * rule 9); the rewrite checks it names a Docker network.
 */
export function isReservedLabel(key: string): boolean {
  if (key === LABEL_PROXY_NETWORK) return false;
  const k = key.toLowerCase();
  return k.startsWith("capstan.") || k.startsWith("com.docker.compose.");
}

type Shape = "string" | "number" | "boolean" | "array" | "object" | "null";
const shapeOf = (v: unknown): string => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

/**
 * Picks the schema by the value's JSON shape. zod's union answers only "invalid input" when
 * every branch fails; here the one branch that fits the shape reports its own, precise issues.
 */
function byShape<C extends Partial<Record<Shape, z.ZodType>>>(message: string, cases: C): z.ZodType<z.output<NonNullable<C[keyof C]>>, unknown> {
  return z.unknown().transform((v, ctx) => {
    const schema = (cases as Partial<Record<string, z.ZodType>>)[shapeOf(v)];
    if (!schema) {
      ctx.addIssue({ code: "custom", message });
      return z.NEVER;
    }
    const r = schema.safeParse(v);
    if (r.success) return r.data as z.output<NonNullable<C[keyof C]>>;
    for (const issue of r.error.issues) ctx.addIssue({ ...issue } as Parameters<typeof ctx.addIssue>[0]);
    return z.NEVER;
  });
}

const Scalar = byShape("use a string, number or boolean", { string: z.string(), number: z.number().transform(String), boolean: z.boolean().transform(String) });
const ScalarOrNull = byShape("use a string, number, boolean or nothing", { string: z.string(), number: z.number().transform(String), boolean: z.boolean().transform(String), null: z.null() });

/** A string compose will interpolate: checked for syntax now, resolved at deploy. */
export const Template = z
  .string({ error: (iss) => (iss.input === undefined ? "this field is required" : "use a string") })
  .max(LIMITS.templateChars)
  .superRefine((v, ctx) => {
    if (NUL_OR_LONE_SURROGATE.test(v)) ctx.addIssue({ code: "custom", message: "must not contain NUL or unpaired surrogate characters" });
    try {
      checkTemplate(v);
    } catch (err) {
      if (!(err instanceof TemplateError)) throw err;
      ctx.addIssue({ code: "custom", message: err.message });
    }
  });
const ScalarTemplate = Scalar.pipe(Template);

/** A value that must be written literally (no variables). */
const literal = <T extends z.ZodType<string, string>>(schema: T, hint: string) =>
  z.string().superRefine((v, ctx) => {
    if (v.includes("$")) ctx.addIssue({ code: "custom", message: "variables are not supported here; write the value literally" });
    else if (!schema.safeParse(v).success) ctx.addIssue({ code: "custom", message: hint });
  });

const regexp = (re: RegExp) => z.string().regex(re);
const Duration = literal(regexp(DURATION), "use a duration such as 10s, 1m30s or 500ms");
const bool = (what: string) => z.boolean({ error: `${what} must be true or false` });

const StringOrList = byShape("use a string or a list of strings", { string: Template, array: z.array(ScalarTemplate).max(LIMITS.perServiceList) });

/** `environment`: a map (null = take the value from the application's variables) or a KEY[=VALUE] list. */
const Environment = byShape("use a map of NAME: value or a list of NAME=value", {
  object: z.record(z.string(), ScalarOrNull),
  array: z.array(z.string()).max(LIMITS.perServiceList),
}).transform((v, ctx) => {
    const entries: { key: string; value: string | null }[] = Array.isArray(v)
      ? v.map((e) => {
          const eq = e.indexOf("=");
          return eq < 0 ? { key: e, value: null } : { key: e.slice(0, eq), value: e.slice(eq + 1) };
        })
      : Object.entries(v).map(([key, value]) => ({ key, value }));
    if (entries.length > LIMITS.perServiceList) ctx.addIssue({ code: "custom", message: `at most ${LIMITS.perServiceList} variables per service` });
    for (const e of entries) {
      if (!EnvKey.safeParse(e.key).success) ctx.addIssue({ code: "custom", message: `${JSON.stringify(e.key.slice(0, 80))} is not a variable name (letters, digits and _, not starting with a digit)` });
      if (e.value !== null) {
        const t = Template.safeParse(e.value);
        if (!t.success) ctx.addIssue({ code: "custom", message: `${e.key}: ${t.error.issues[0]!.message}` });
      }
    }
    return entries;
  });

/** `labels`: map or KEY=VALUE list; keys with the platform's prefixes are dropped. */
export const Labels = byShape("use a map of key: value or a list of key=value", {
  object: z.record(z.string(), ScalarOrNull),
  array: z.array(z.string()).max(LIMITS.perServiceList),
}).transform((v, ctx) => {
    const entries = Array.isArray(v)
      ? v.map((e) => {
          const eq = e.indexOf("=");
          return eq < 0 ? ([e, ""] as const) : ([e.slice(0, eq), e.slice(eq + 1)] as const);
        })
      : Object.entries(v).map(([k, val]) => [k, val ?? ""] as const);
    const out: Record<string, string> = {};
    for (const [key, value] of entries) {
      if (!LABEL_KEY.test(key)) {
        ctx.addIssue({ code: "custom", message: `${JSON.stringify(key.slice(0, 80))} is not a valid label key (letters, digits, . _ / -)` });
        continue;
      }
      if (isReservedLabel(key)) continue;
      const t = Template.safeParse(value);
      if (!t.success) ctx.addIssue({ code: "custom", message: `${key}: ${t.error.issues[0]!.message}` });
      out[key] = value;
    }
    if (Object.keys(out).length > LIMITS.perServiceList) ctx.addIssue({ code: "custom", message: `at most ${LIMITS.perServiceList} labels` });
    return out;
  });

const HOST_PORTS =
  "publishing ports on the server is not supported: the platform's proxy sends the application's domains to the public service, and host ports would bypass it and collide with other applications; list the container port only, e.g. \"80\"";

const PORT_SPEC = /^([0-9]{1,5})(\/(tcp|udp))?$/;

function containerPort(v: string | number, ctx: z.RefinementCtx): string | undefined {
  const s = String(v).trim();
  const m = PORT_SPEC.exec(s);
  if (m) {
    const n = Number(m[1]);
    if (n >= 1 && n <= 65_535) return m[3] === "udp" ? `${n}/udp` : String(n);
    ctx.addIssue({ code: "custom", message: `port ${n} is out of range (1-65535)` });
    return undefined;
  }
  if (s.includes(":")) ctx.addIssue({ code: "custom", message: HOST_PORTS });
  else if (/^[0-9]+-[0-9]+/.test(s)) ctx.addIssue({ code: "custom", message: "port ranges are not supported; list each port" });
  else ctx.addIssue({ code: "custom", message: `${JSON.stringify(s.slice(0, 40))} is not a port (use 80 or 53/udp)` });
  return undefined;
}

const PortString = byShape("use a port like 80 or 53/udp", { string: z.string(), number: z.number() }).transform((v, ctx) => containerPort(v, ctx) ?? z.NEVER);
const PortEntry = byShape("use a port like 80 or 53/udp", {
  string: PortString,
  number: PortString,
  object: z
    .object({ target: z.number().int(), protocol: z.enum(["tcp", "udp"]).optional() })
    .catchall(z.unknown())
    .transform((v, ctx) => {
      const extra = Object.keys(v).filter((k) => k !== "target" && k !== "protocol");
      if (extra.some((k) => k === "published" || k === "host_ip" || k === "mode")) ctx.addIssue({ code: "custom", message: HOST_PORTS });
      else if (extra.length) ctx.addIssue({ code: "custom", message: `port option ${extra[0]} is not supported` });
      return containerPort(v.protocol === "udp" ? `${v.target}/udp` : v.target, ctx) ?? z.NEVER;
    }),
});

export type ServiceMount =
  | { type: "volume"; source: string | null; target: string; readOnly: boolean; nocopy: boolean }
  | { type: "bind"; source: string; target: string; readOnly: boolean }
  | { type: "tmpfs"; target: string; size: number | null };

const RELATIVE_BIND =
  "relative and home-directory bind mounts are not supported: the compose file lives in the agent's private state directory; use a named volume or an absolute server path";

function mountTarget(target: string, ctx: z.RefinementCtx): string | undefined {
  const t = MountPath.safeParse(target);
  if (t.success) return t.data;
  ctx.addIssue({ code: "custom", message: `mount path ${JSON.stringify(target.slice(0, 80))}: ${t.error.issues[0]!.message}` });
  return undefined;
}

/**
 * Bind sources: the shared host-path rule (normalised, then neither a system directory, nor
 * inside one, nor containing one). The normalised form is what the rewrite writes.
 */
function bindSource(source: string, ctx: z.RefinementCtx): string | undefined {
  if (source.startsWith(".") || source.startsWith("~")) {
    ctx.addIssue({ code: "custom", message: RELATIVE_BIND });
    return undefined;
  }
  const h = checkHostPath(source);
  if (h.ok) return h.path;
  ctx.addIssue({ code: "custom", message: `server path ${JSON.stringify(source.slice(0, 80))}: ${h.reason}` });
  return undefined;
}

function volumeSource(source: string, ctx: z.RefinementCtx): string | undefined {
  if (VOLUME_KEY.test(source)) return source;
  ctx.addIssue({ code: "custom", message: `${JSON.stringify(source.slice(0, 80))} is not a volume name (letters, digits, _ . -, at most 64)` });
  return undefined;
}

function shortMount(spec: string, ctx: z.RefinementCtx): ServiceMount | undefined {
  if (spec.includes("$")) {
    ctx.addIssue({ code: "custom", message: "variables are not supported in volumes; write the value literally" });
    return undefined;
  }
  const parts = spec.split(":");
  if (parts.length > 3) {
    ctx.addIssue({ code: "custom", message: `${JSON.stringify(spec.slice(0, 80))}: use SOURCE:TARGET[:ro]` });
    return undefined;
  }
  if (parts.length === 1) {
    if (!spec.startsWith("/")) {
      ctx.addIssue({ code: "custom", message: `${JSON.stringify(spec.slice(0, 80))}: use SOURCE:TARGET or an absolute container path` });
      return undefined;
    }
    const target = mountTarget(spec, ctx);
    return target ? { type: "volume", source: null, target, readOnly: false, nocopy: false } : undefined;
  }
  const [source, rawTarget, mode = "rw"] = parts as [string, string, string?];
  const modes = mode.split(",");
  if (!modes.every((m) => m === "ro" || m === "rw" || m === "nocopy")) {
    ctx.addIssue({ code: "custom", message: `mount mode ${JSON.stringify(mode.slice(0, 40))} is not supported (use ro or rw)` });
    return undefined;
  }
  const readOnly = modes.includes("ro");
  const target = mountTarget(rawTarget, ctx);
  if (source.startsWith("/") || source.startsWith(".") || source.startsWith("~")) {
    const src = bindSource(source, ctx);
    if (modes.includes("nocopy")) ctx.addIssue({ code: "custom", message: "nocopy applies to named volumes only" });
    return src && target ? { type: "bind", source: src, target, readOnly } : undefined;
  }
  const src = volumeSource(source, ctx);
  return src && target ? { type: "volume", source: src, target, readOnly, nocopy: modes.includes("nocopy") } : undefined;
}

const LongMount = z
  .strictObject({
    type: z.enum(["volume", "bind", "tmpfs"], { error: "mount type must be volume, bind or tmpfs" }),
    source: z.string().optional(),
    target: z.string(),
    read_only: bool("read_only").optional(),
    volume: z.strictObject({ nocopy: bool("nocopy").optional() }).optional(),
    tmpfs: z.strictObject({ size: byShape("use a size like 64m", { number: z.number().int().min(0), string: regexp(SIZE) }).optional() }).optional(),
  })
  .transform((v, ctx): ServiceMount => {
    for (const key of ["source", "target"] as const) {
      if (v[key]?.includes("$")) ctx.addIssue({ code: "custom", message: "variables are not supported in volumes; write the value literally" });
    }
    const target = mountTarget(v.target, ctx) ?? "";
    if (v.type === "tmpfs") {
      if (v.source !== undefined) ctx.addIssue({ code: "custom", message: "a tmpfs mount has no source" });
      const size = v.tmpfs?.size;
      return { type: "tmpfs", target, size: size === undefined ? null : typeof size === "number" ? size : parseSize(size) };
    }
    if (v.tmpfs) ctx.addIssue({ code: "custom", message: "tmpfs options apply to tmpfs mounts only" });
    if (v.type === "bind") {
      if (v.volume) ctx.addIssue({ code: "custom", message: "volume options apply to named volumes only" });
      return { type: "bind", source: (v.source !== undefined ? bindSource(v.source, ctx) : (ctx.addIssue({ code: "custom", message: "a bind mount needs a source" }), undefined)) ?? "", target, readOnly: v.read_only ?? false };
    }
    const source = v.source === undefined || v.source === "" ? null : (volumeSource(v.source, ctx) ?? null);
    return { type: "volume", source, target, readOnly: v.read_only ?? false, nocopy: v.volume?.nocopy ?? false };
  });

function parseSize(v: string): number {
  const m = /^([0-9]+(?:\.[0-9]+)?)([bkmg]?)$/i.exec(v)!;
  const mult = { "": 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as "" | "b" | "k" | "m" | "g"];
  return Math.floor(Number(m[1]) * mult);
}

const Mount = byShape("use SOURCE:TARGET[:ro] or the long form {type, source, target}", {
  string: z.string().transform((v, ctx) => shortMount(v, ctx) ?? z.NEVER),
  object: LongMount,
});

const HEALTH_TEST_KINDS = ["NONE", "CMD", "CMD-SHELL"];

const Healthcheck = z
  .strictObject({
    test: byShape("use a command string or a list starting with CMD, CMD-SHELL or NONE", { string: Template, array: z.array(Template).min(1).max(LIMITS.perServiceList) }).optional(),
    interval: Duration.optional(),
    timeout: Duration.optional(),
    start_period: Duration.optional(),
    retries: z.number().int().min(0).max(100).optional(),
    disable: bool("disable").optional(),
  })
  .superRefine((v, ctx) => {
    if (Array.isArray(v.test) && !HEALTH_TEST_KINDS.includes(v.test[0]!)) {
      ctx.addIssue({ code: "custom", path: ["test"], message: "a test list starts with CMD, CMD-SHELL or NONE" });
    }
    if (v.test === undefined && !v.disable) ctx.addIssue({ code: "custom", path: ["test"], message: "a healthcheck needs a test (or disable: true)" });
  });

export type DependsCondition = "service_started" | "service_healthy" | "service_completed_successfully";

const DependsOn = byShape("use a list of service names or a map of service: {condition}", {
  array: z.array(z.string()).max(LIMITS.services).transform((v) => v.map((service) => ({ service, condition: "service_started" as DependsCondition }))),
  object: z
    .record(
      z.string(),
      z
        .strictObject({ condition: z.enum(["service_started", "service_healthy", "service_completed_successfully"], { error: "condition must be service_started, service_healthy or service_completed_successfully" }) })
        .nullable(),
    )
    .transform((v) => Object.entries(v).map(([service, d]) => ({ service, condition: (d?.condition ?? "service_started") as DependsCondition }))),
});

const Links = z.array(literal(regexp(/^[a-z][a-z0-9_-]{0,25}(:[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)?$/), "use SERVICE or SERVICE:ALIAS")).max(LIMITS.services).transform((v) =>
  v.map((l) => {
    const [service, alias] = l.split(":") as [string, string?];
    return { service, alias: alias ?? service };
  }),
);

const RESTART = /^(no|always|unless-stopped|on-failure(:[0-9]{1,3})?)$/;

const Memory = byShape("use a size like 512m or 2g", { number: z.number().int().transform(String), string: z.string() }).pipe(literal(MemoryLimit, "use a size like 512m or 2g (at least 6m)"));
const Cpus = byShape("use a number of cores like 0.5 or 2", { number: z.number().transform(String), string: z.string() }).pipe(literal(CpuLimit, "use a number of cores like 0.5 or 2"));

const Deploy = z.strictObject(
  {
    resources: z.strictObject(
      {
        limits: z.strictObject(
          {
            cpus: Cpus.optional(),
            memory: Memory.optional(),
            pids: z.number().int().min(1).max(1_000_000).optional(),
          },
          { error: "deploy.resources.limits takes cpus, memory and pids" },
        ).optional(),
      },
      { error: "only deploy.resources.limits is supported" },
    ).optional(),
  },
  { error: "only deploy.resources.limits is supported" },
);

const NO_NEW_PRIVILEGES = new Set(["no-new-privileges", "no-new-privileges:true", "no-new-privileges=true"]);

export const Service = z
  .strictObject({
    image: z.unknown().superRefine((v, ctx) => {
      if (v === undefined) ctx.addIssue({ code: "custom", message: "image is required: compose applications run images", fatal: true });
    }).pipe(Template),
    command: StringOrList.optional(),
    entrypoint: StringOrList.optional(),
    environment: Environment.optional(),
    labels: Labels.optional(),
    ports: z.array(PortEntry).max(LIMITS.perServiceList).optional(),
    expose: z.array(PortString).max(LIMITS.perServiceList).optional(),
    volumes: z.array(Mount).max(LIMITS.perServiceList).optional(),
    tmpfs: byShape("use a container path or a list of them", { string: z.string(), array: z.array(z.string()).max(LIMITS.perServiceList) }).transform((v, ctx) => (Array.isArray(v) ? v : [v]).map((t) => mountTarget(t, ctx) ?? "")).optional(),
    healthcheck: Healthcheck.optional(),
    depends_on: DependsOn.optional(),
    links: Links.optional(),
    restart: byShape("use no, always, unless-stopped or on-failure[:N]", { boolean: z.literal(false).transform(() => "no"), string: z.string() })
      .pipe(literal(regexp(RESTART), "use no, always, unless-stopped or on-failure[:N]"))
      .optional(),
    working_dir: Template.optional(),
    user: byShape("use NAME, UID or UID:GID", { number: z.number().int().min(0).transform(String), string: Template }).optional(),
    hostname: literal(regexp(DNS_LABEL), "use a host name of letters, digits and -").optional(),
    /** Accepted for compatibility; the platform names containers `<app uuid>-<service>`. */
    container_name: z.string().optional(),
    deploy: Deploy.optional(),
    mem_limit: Memory.optional(),
    cpus: Cpus.optional(),
    pids_limit: z.number().int().min(1).max(1_000_000).optional(),
    shm_size: byShape("use a size like 64m", { number: z.number().int().min(0).transform(String), string: literal(regexp(SIZE), "use a size like 64m") }).optional(),
    stop_grace_period: Duration.optional(),
    stop_signal: literal(regexp(/^SIG[A-Z0-9+-]{1,12}$/), "use a signal name like SIGTERM").optional(),
    init: bool("init").optional(),
    tty: bool("tty").optional(),
    stdin_open: bool("stdin_open").optional(),
    read_only: bool("read_only").optional(),
    cap_drop: z.array(literal(regexp(/^(ALL|(CAP_)?[A-Z_]{2,32})$/), "use capability names like NET_RAW or ALL")).max(64).optional(),
    security_opt: z
      .array(z.string())
      .max(8)
      .superRefine((v, ctx) => {
        if (v.some((o) => !NO_NEW_PRIVILEGES.has(o))) {
          ctx.addIssue({ code: "custom", message: "only no-new-privileges:true is allowed: other security options (seccomp, apparmor, label) switch off the container's confinement" });
        }
      })
      .optional(),
  })
  .superRefine((v, ctx) => {
    if (typeof v.image === "string" && !v.image.includes("$") && !isImageRef(v.image)) {
      ctx.addIssue({ code: "custom", path: ["image"], message: "use an image reference such as nginx:1.27 or registry.example.com/team/app:tag" });
    }
    if (v.deploy?.resources?.limits?.memory !== undefined && v.mem_limit !== undefined) ctx.addIssue({ code: "custom", path: ["mem_limit"], message: "set the memory limit once (mem_limit or deploy.resources.limits.memory)" });
    if (v.deploy?.resources?.limits?.cpus !== undefined && v.cpus !== undefined) ctx.addIssue({ code: "custom", path: ["cpus"], message: "set the CPU limit once (cpus or deploy.resources.limits.cpus)" });
  });
export type ServiceInput = z.output<typeof Service>;

export const TopVolume = byShape("use an empty declaration or {labels}", {
  null: z.null(),
  object: z
    .strictObject({
      driver: z.literal("local", { error: "only the local volume driver is supported" }).optional(),
      labels: Labels.optional(),
    })
    .transform((v) => ({ labels: v.labels ?? {} })),
});

/** Why a key is refused, for the unrecognized-key issues of the service and volume schemas. */
export function reasonForKey(where: "service" | "volume" | "nested", key: string): string {
  const reason = where === "service" ? REFUSED_SERVICE_KEYS[key] : where === "volume" ? REFUSED_VOLUME_KEYS[key] : undefined;
  return reason ? `${key} is refused: ${reason}` : `${key} is not supported (docs/compose.md lists the supported keys)`;
}

/** For templates resolved at deploy: what the interpolated value must satisfy. */
export const RESOLVED = {
  image: (v: string) => (isImageRef(v) ? null : `image ${JSON.stringify(v.slice(0, 80))} is not an image reference`),
  working_dir: (v: string) => (v.startsWith("/") && v.length <= 1024 && !CONTROL.test(v) ? null : `working_dir ${JSON.stringify(v.slice(0, 80))} must be an absolute path`),
  user: (v: string) => (USER.test(v) ? null : `user ${JSON.stringify(v.slice(0, 40))} must be NAME, UID or UID:GID`),
} as const;
