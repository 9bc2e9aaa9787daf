export type GitFailure =
  | "invalid"
  | "auth"
  | "not_found"
  | "branch_not_found"
  | "commit_not_found"
  | "unreachable"
  | "refused"
  | "aborted"
  | "timeout"
  | "failed";

/** A clone failure with a reason fit for the deployment log; never carries a secret. */
export class GitError extends Error {
  override name = "GitError";
  constructor(
    message: string,
    readonly reason: GitFailure,
  ) {
    super(message);
  }
}

/** Order matters: an ssh auth failure also says "Could not read from remote repository". */
const PATTERNS: [GitFailure, RegExp][] = [
  ["refused", /transport '[^']*' not allowed|unsupported protocol|protocol '[^']*' is not supported|strange hostname|strange pathname/i],
  [
    "auth",
    /could not read (Username|Password)|Authentication failed|HTTP (Basic: )?Access denied|requested URL returned error: 40[13]|HTTP 40[13]|Permission denied \(|Permission denied, please try again|Load key .*:|invalid format|incorrect passphrase|Too many authentication failures|Invalid username or password|terminal prompts disabled/i,
  ],
  ["branch_not_found", /couldn't find remote ref|Remote branch .* not found/i],
  [
    "not_found",
    /Repository not found|repository '[^']*' not found|does not appear to be a git repository|not found: did you run git update-server-info|requested URL returned error: 404|HTTP 404|no such repository|access denied or repository not exported|No such file or directory/i,
  ],
  ["unreachable", /Could not resolve host|Connection refused|Connection timed out|No route to host|Network is unreachable|Failed to connect|unable to connect|Operation timed out|Connection reset|connection closed by remote host|Could not read from remote repository/i],
];

export function classify(stderrTail: string[]): GitFailure {
  const text = stderrTail.join("\n");
  for (const [reason, re] of PATTERNS) if (re.test(text)) return reason;
  return "failed";
}

/** Wants by commit id the server will not serve: fall back to fetching whole branches. */
export function refusedWant(stderrTail: string[]): boolean {
  return /not our ref|unadvertised object|Server does not allow request for unadvertised|couldn't find remote ref|no such remote ref|bad object|did not send all necessary objects/i.test(stderrTail.join("\n"));
}

/** The most telling line of git's output for this reason (else the last error line), already masked by the caller. */
export function keyLine(stderrTail: string[], reason: GitFailure = "failed"): string {
  const pattern = PATTERNS.find(([r]) => r === reason)?.[1];
  const generic = /^Could not read from remote repository|^Please make sure|^and the repository exists/i;
  const errors = stderrTail.filter((l) => /^(fatal|error|remote: error|ERROR|ssh:)/i.test(l) || /denied|not found|refused/i.test(l));
  const line =
    (pattern && stderrTail.find((l) => pattern.test(l) && !generic.test(l.replace(/^fatal:\s*/i, "")))) ??
    errors.filter((l) => !generic.test(l.replace(/^fatal:\s*/i, ""))).at(-1) ??
    errors.at(-1) ??
    stderrTail.at(-1) ??
    "no output";
  return line.replace(/^fatal:\s*/i, "").slice(0, 500);
}

export interface FailureContext {
  url: string;
  branch: string;
  commit?: string | null;
  auth?: "none" | "ssh" | "token";
}

const AUTH_HINT = {
  none: "the repository may be private: use a deploy key or a git app",
  ssh: "check that the deploy key is added to this repository with read access",
  token: "check that the git app is installed on this repository",
} as const;

export function describe(reason: GitFailure, ctx: FailureContext, detail: string): string {
  switch (reason) {
    case "auth":
      if (/^Load key /i.test(detail)) return `the deploy key cannot be used: it is not a valid private key, or it has a passphrase (${detail.replace(/"[^"]*"/, "key")})`;
      // git asks for a user name when the server answers 401; prompts are off, so that is all it says.
      if (/could not read (Username|Password)/i.test(detail)) detail = ctx.auth === "token" ? "the server rejected the token" : "the server asks for credentials";
      return `authentication failed for ${ctx.url} (${AUTH_HINT[ctx.auth ?? "none"]}): ${detail}`;
    case "not_found":
      return `repository not found: ${ctx.url} (${detail})`;
    case "branch_not_found":
      return `branch ${ctx.branch} not found in ${ctx.url}`;
    case "commit_not_found":
      return `commit ${ctx.commit} not found in ${ctx.url}`;
    case "unreachable":
      return `cannot reach ${ctx.url}: ${detail}`;
    case "refused":
      return `refused: ${detail}`;
    case "aborted":
      return "git fetch aborted";
    case "timeout":
      return "git fetch took too long and was stopped";
    default:
      return `git failed: ${detail}`;
  }
}
