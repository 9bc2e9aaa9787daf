/**
 * Compose keys that would take a service out of the platform's control, each with the reason
 * the 422 gives. Any other key outside the supported subset is refused as "not supported";
 * these get a reason because users (and attackers) reach for them on purpose.
 */
export const REFUSED_SERVICE_KEYS: Readonly<Record<string, string>> = {
  privileged: "privileged containers have full access to the server's devices and kernel",
  cap_add: "extra kernel capabilities let a container escape its isolation",
  devices: "host devices cannot be passed to applications",
  device_cgroup_rules: "host devices cannot be passed to applications",
  gpus: "host devices cannot be passed to applications",
  pid: "sharing the server's or another container's process namespace is not allowed",
  ipc: "sharing the server's or another container's IPC namespace is not allowed",
  uts: "sharing the server's UTS namespace is not allowed",
  userns_mode: "turning off user-namespace remapping is not allowed",
  network_mode: "the platform manages networks; the host's or another container's network would bypass it",
  networks:
    "the platform manages networks: every service joins the application's own network (where services reach each other by service name) and the application's primary network " +
    "(its environment's network with environment isolation, else the server's destination network); only the public service joins the proxy network under proxy isolation; " +
    "to reach other applications, attach a shared network to the application",
  cgroup: "sharing the server's cgroup namespace is not allowed",
  cgroup_parent: "containers stay in the engine's cgroups",
  sysctls: "kernel parameters are not set by applications",
  runtime: "the container runtime is chosen by the platform",
  isolation: "the isolation technology is chosen by the platform",
  build: "compose applications run images: nothing is built from a compose file (use a git or Dockerfile application to build an image)",
  env_file: "compose cannot read files on the server; set environment variables on the application and reference them as ${NAME}",
  extends: "compose cannot read other files on the server",
  secrets: "compose secrets read files or variables of the server; use the application's environment variables",
  configs: "compose configs read files or variables of the server; use the application's environment variables",
  volumes_from: "mounting the volumes of other containers is not allowed",
  external_links: "links to containers outside this application are not allowed",
  logging: "logs are collected by the platform (GET /applications/{uuid}/logs)",
  storage_opt: "storage driver options are managed by the platform",
  oom_kill_disable: "the kernel's OOM killer must stay on",
  oom_score_adj: "OOM priorities are managed by the platform",
  credential_spec: "credential specs are not supported",
  profiles: "profiles would leave services undeployed; remove the services you do not want",
  scale: "one container per service: container names are fixed",
};

export const REFUSED_TOP_LEVEL_KEYS: Readonly<Record<string, string>> = {
  include: "compose cannot read other files on the server",
  secrets: "compose secrets read files or variables of the server; use the application's environment variables",
  configs: "compose configs read files or variables of the server; use the application's environment variables",
  networks:
    "the platform manages networks: every service joins the application's own network and the application's primary network " +
    "(its environment's network with environment isolation, else the server's destination network); to reach other applications, attach a shared network to the application",
};

export const REFUSED_VOLUME_KEYS: Readonly<Record<string, string>> = {
  external: "external volumes may belong to other applications",
  driver_opts: "volume driver options can bind arbitrary server paths or devices",
  name: "volume names are set by the platform (<application uuid>-<volume>)",
};
