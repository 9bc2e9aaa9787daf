import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import {
  basicCredentials,
  branchRefspec,
  configFile,
  fetchArgs,
  gitEnv,
  hardeningArgs,
  masker,
  sshCommand,
  urlKind,
  type SessionPaths,
} from "./git-args.js";
import { classify, describe as describeFailure, keyLine, refusedWant } from "./git-errors.js";
import { fetchGit, GitError, type GitSource } from "./git.js";
import { run } from "./process.js";

const paths: SessionPaths = { dir: "/tmp/capstan-git-abc", config: "/tmp/capstan-git-abc/config", key: "/tmp/capstan-git-abc/key", knownHosts: "/tmp/capstan-git-abc/known_hosts" };
const pairs = (args: string[]) => args.flatMap((a, i) => (a === "-c" ? [args[i + 1]] : []));

describe("git argv", () => {
  it("allows only https, http, ssh and git transports", () => {
    const c = pairs(hardeningArgs());
    expect(c[0]).toBe("protocol.allow=never");
    expect(c).toEqual(expect.arrayContaining(["protocol.https.allow=always", "protocol.http.allow=always", "protocol.ssh.allow=always", "protocol.git.allow=always"]));
    expect(c.filter((x) => x!.startsWith("protocol.") && x!.endsWith("allow=always"))).toHaveLength(4);
    expect(c).toEqual(expect.arrayContaining(["core.hooksPath=/dev/null", "credential.helper="]));
  });

  it("puts every positional after --", () => {
    const args = fetchArgs("--upload-pack=touch /tmp/x", [branchRefspec("main")], 1);
    const dd = args.indexOf("--");
    expect(dd).toBeGreaterThan(args.indexOf("fetch"));
    expect(args.slice(dd + 1)).toEqual(["--upload-pack=touch /tmp/x", "+refs/heads/main:refs/remotes/origin/main"]);
    expect(args).toContain("--depth=1");
    expect(fetchArgs("git://h/r", ["abc"], null).some((a) => a.startsWith("--depth"))).toBe(false);
  });

  it("never carries a token in argv", () => {
    const token = "ghs_secretsecretsecret";
    const args = fetchArgs("https://github.com/o/r.git", [branchRefspec("main")], 1);
    const env = gitEnv(paths, { kind: "token", username: "x-access-token", token });
    expect(JSON.stringify(args)).not.toContain(token);
    expect(JSON.stringify(env)).not.toContain(token);
  });

  it("tells the transports apart", () => {
    expect(urlKind("https://github.com/o/r.git")).toBe("http");
    expect(urlKind("http://h/r")).toBe("http");
    expect(urlKind("git://h/r")).toBe("git");
    expect(urlKind("ssh://git@h/r")).toBe("ssh");
    expect(urlKind("git@github.com:o/r.git")).toBe("ssh");
  });
});

describe("git environment", () => {
  it("inherits nothing but PATH and points config and HOME at the session", () => {
    process.env.CAPSTAN_TEST_LEAK = "leak";
    const env = gitEnv(paths, { kind: "none" }, "/usr/bin:/bin");
    delete process.env.CAPSTAN_TEST_LEAK;
    expect(env).toMatchObject({
      PATH: "/usr/bin:/bin",
      HOME: paths.dir,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: paths.config,
      GIT_TERMINAL_PROMPT: "0",
      GIT_ALLOW_PROTOCOL: "https:http:ssh:git",
      LC_ALL: "C",
    });
    expect(Object.values(env)).not.toContain("leak");
    expect(env.SSH_AUTH_SOCK).toBeUndefined();
    expect(env.GIT_SSH_COMMAND).toBeUndefined();
  });

  it("uses only the deploy key and a private known_hosts over ssh", () => {
    const env = gitEnv(paths, { kind: "ssh", private_key: "k" });
    const cmd = env.GIT_SSH_COMMAND!;
    expect(cmd).toContain("-F /dev/null");
    expect(cmd).toContain(`-i '${paths.key}'`);
    expect(cmd).toContain("IdentitiesOnly=yes");
    expect(cmd).toContain("IdentityAgent=none");
    expect(cmd).toContain(`UserKnownHostsFile='${paths.knownHosts}'`);
    expect(cmd).toContain("GlobalKnownHostsFile=/dev/null");
    expect(cmd).toContain("StrictHostKeyChecking=accept-new");
    expect(cmd).toContain("BatchMode=yes");
    expect(cmd).not.toMatch(/~|\.ssh/);
  });

  it("refuses temp paths that a shell would interpret", () => {
    for (const bad of ["/tmp/a b/key", "/tmp/$(x)/key", "/tmp/'/key", "relative/key"]) {
      expect(() => sshCommand({ key: bad, knownHosts: "/tmp/k" }), bad).toThrow(/unsafe temp path/);
    }
  });

  it("scopes the token header to the repository's origin", () => {
    const text = configFile("https://github.com/o/r.git", { kind: "token", username: "x-access-token", token: "tok_123" });
    expect(text).toBe(`[http "https://github.com/"]\n\textraHeader = Authorization: Basic ${basicCredentials("x-access-token", "tok_123")}\n`);
    expect(Buffer.from(basicCredentials("x-access-token", "tok_123"), "base64").toString()).toBe("x-access-token:tok_123");
    expect(configFile("https://h:8443/r.git", { kind: "token", username: "u", token: "t" })).toContain('[http "https://h:8443/"]');
    expect(configFile("https://github.com/o/r.git", { kind: "none" })).toBe("");
  });
});

describe("masking", () => {
  it("hides secrets, their basic form, auth headers, URL credentials and keys", () => {
    const mask = masker(["tok_secret_1", basicCredentials("u", "tok_secret_1")]);
    expect(mask("error: tok_secret_1 rejected")).toBe("error: *** rejected");
    expect(mask(`header ${basicCredentials("u", "tok_secret_1")}`)).toBe("header ***");
    expect(mask("> Authorization: Basic abcdef")).toBe("> Authorization: ***");
    expect(mask("fatal: unable to access 'https://user:pw@host/r.git/'")).toBe("fatal: unable to access 'https://***@host/r.git/'");
    expect(mask("-----BEGIN OPENSSH PRIVATE KEY-----abc-----END OPENSSH PRIVATE KEY-----")).toBe("***");
    expect(mask("Receiving objects: 100% (3/3), done.")).toBe("Receiving objects: 100% (3/3), done.");
  });
});

describe("failure reasons", () => {
  const cases: [string, string][] = [
    ["fatal: could not read Username for 'https://github.com': terminal prompts disabled", "auth"],
    ["remote: Invalid username or password.\nfatal: Authentication failed for 'https://github.com/o/r.git/'", "auth"],
    ["git@github.com: Permission denied (publickey).\nfatal: Could not read from remote repository.", "auth"],
    ['Load key "/tmp/capstan-git-x/key": invalid format', "auth"],
    ["remote: Repository not found.\nfatal: repository 'https://github.com/o/nope.git/' not found", "not_found"],
    ["fatal: remote error: no such repository: /nope.git", "not_found"],
    ["fatal: '/srv/nope.git' does not appear to be a git repository", "not_found"],
    ["fatal: couldn't find remote ref refs/heads/nope", "branch_not_found"],
    ["fatal: unable to access 'https://h/': Could not resolve host: h", "unreachable"],
    ["ssh: connect to host h port 22: Connection refused\nfatal: Could not read from remote repository.", "unreachable"],
    ["fatal: transport 'file' not allowed", "refused"],
    ["fatal: strange hostname '-oProxyCommand=x' blocked", "refused"],
    ["fatal: something else entirely", "failed"],
  ];
  it.each(cases)("%s -> %s", (stderr, reason) => {
    expect(classify(stderr.split("\n"))).toBe(reason);
  });

  it("recognises a server that will not serve commits by id", () => {
    expect(refusedWant(["error: Server does not allow request for unadvertised object abc"])).toBe(true);
    expect(refusedWant(["fatal: remote error: upload-pack: not our ref abc"])).toBe(true);
    expect(refusedWant(["fatal: Authentication failed"])).toBe(false);
  });

  it("picks the error line over progress and words it for the log", () => {
    expect(keyLine(["Receiving objects: 10%", "fatal: repository 'x' not found", "Receiving objects: 11%"])).toBe("repository 'x' not found");
    const ssh = ["root@h: Permission denied (publickey).", "fatal: Could not read from remote repository.", "Please make sure you have the correct access rights", "and the repository exists."];
    expect(keyLine(ssh, "auth")).toBe("root@h: Permission denied (publickey).");
    expect(keyLine(["fatal: '/r.git' does not appear to be a git repository", ...ssh.slice(1)], "not_found")).toBe("'/r.git' does not appear to be a git repository");
    expect(describeFailure("auth", { url: "git@h:o/r.git", branch: "main", auth: "ssh" }, "Permission denied (publickey).")).toBe(
      "authentication failed for git@h:o/r.git (check that the deploy key is added to this repository with read access): Permission denied (publickey).",
    );
    expect(describeFailure("auth", { url: "u", branch: "b", auth: "ssh" }, 'Load key "/tmp/capstan-git-x/key": invalid format')).toMatch(/^the deploy key cannot be used: .*\(Load key key: invalid format\)$/);
    expect(describeFailure("branch_not_found", { url: "git://h/r", branch: "dev" }, "")).toBe("branch dev not found in git://h/r");
    expect(describeFailure("commit_not_found", { url: "git://h/r", branch: "dev", commit: "abc1234" }, "")).toBe("commit abc1234 not found in git://h/r");
  });
});

describe("fetchGit input checks (no git runs)", () => {
  const base: GitSource = { kind: "git", url: "https://github.com/o/r.git", branch: "main", commit: null, auth: { kind: "none" } };
  const refused = async (src: GitSource, pattern: RegExp) => {
    const err = await fetchGit(src, "/nonexistent/never-created", { signal: AbortSignal.timeout(5_000), progress: () => {} }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitError);
    expect((err as GitError).message).toMatch(pattern);
  };

  it("re-validates the payload", async () => {
    await refused({ ...base, url: "--upload-pack=touch /tmp/x" }, /^refused: url: /);
    await refused({ ...base, url: "ext::sh -c touch% /tmp/x" }, /^refused: url: /);
    await refused({ ...base, url: "file:///etc" }, /^refused: url: /);
    await refused({ ...base, branch: "--help" }, /^refused: branch: /);
    await refused({ ...base, commit: "not-a-sha" }, /^refused: commit: /);
    await refused({ ...base, auth: { kind: "token", username: "u", token: "has space" } }, /^refused: auth/);
  });

  it("refuses auth that does not fit the transport", async () => {
    await refused({ ...base, url: "git@github.com:o/r.git", auth: { kind: "token", username: "u", token: "t0ken" } }, /token authentication needs an https/);
    await refused({ ...base, auth: { kind: "ssh", private_key: "key" } }, /deploy key needs an ssh repository URL/);
  });
});

describe("run", () => {
  it("kills the whole process group on abort", async () => {
    const ac = new AbortController();
    let grandchild = 0;
    const p = run("sh", ["-c", "sleep 30 & echo $! >&2; wait"], {
      env: { PATH: process.env.PATH },
      signal: ac.signal,
      timeoutMs: 20_000,
      onLine: (l) => {
        grandchild = Number(l);
        ac.abort();
      },
    });
    const r = await p;
    expect(r.killed).toBe("aborted");
    expect(grandchild).toBeGreaterThan(0);
    // Gone, or a zombie nobody reaps on this machine; never still sleeping.
    const state = await readFile(`/proc/${grandchild}/stat`, "utf8").then(
      (s) => s.slice(s.lastIndexOf(")") + 2, s.lastIndexOf(")") + 3),
      () => "gone",
    );
    expect(["gone", "Z"]).toContain(state);
  });

  it("stops a command at its own time limit", async () => {
    const r = await run("sleep", ["30"], { env: { PATH: process.env.PATH }, signal: new AbortController().signal, timeoutMs: 200 });
    expect(r.killed).toBe("timeout");
  });
});
