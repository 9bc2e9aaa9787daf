import { createServer, type IncomingMessage, type Server } from "node:http";
import { createPublicKey, randomBytes, verify, type KeyObject } from "node:crypto";

/**
 * A local stand-in for the two GitHub App calls Capstan makes, speaking GitHub's request and
 * response shapes: POST /app/installations/{id}/access_tokens (JWT auth) and
 * GET /app/installations/{id}. It checks what GitHub checks: the headers, the RS256
 * signature against the app's public key, iat/exp (at most 10 minutes apart, not expired)
 * and that the installation belongs to the app.
 */
export interface FakeGitHub {
  url: string;
  /** Registers an app (its public key, from the private PEM) and its installations. */
  addApp(appId: number, privatePem: string, installations: number[]): void;
  /** Every request received, in order. */
  calls: { method: string; path: string; headers: Record<string, string | string[] | undefined>; jwt?: { iat: number; exp: number; iss: unknown } }[];
  /** Tokens issued, newest last. */
  issued: { token: string; installationId: number; expiresAt: string }[];
  /** Lifetime of issued tokens (GitHub: one hour). */
  tokenTtlMs: number;
  close(): Promise<void>;
}

const json = (status: number, body: unknown) => ({ status, body });
const b64json = (part: string) => JSON.parse(Buffer.from(part, "base64url").toString("utf8")) as Record<string, unknown>;

export async function startFakeGitHub(): Promise<FakeGitHub> {
  const apps = new Map<number, { key: KeyObject; installations: Set<number> }>();
  const fake: FakeGitHub = {
    url: "",
    calls: [],
    issued: [],
    tokenTtlMs: 3600_000,
    addApp(appId, privatePem, installations) {
      apps.set(appId, { key: createPublicKey(privatePem), installations: new Set(installations) });
    },
    close: async () => {},
  };

  /** The app a valid JWT names, or an error answer as GitHub gives it. */
  const authenticate = (req: IncomingMessage, call: FakeGitHub["calls"][number]) => {
    const m = /^Bearer ([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/.exec(req.headers.authorization ?? "");
    if (!m) return { error: json(401, { message: "A JSON web token could not be decoded", documentation_url: "https://docs.github.com/rest" }) };
    const [, head, body, sig] = m;
    let header: Record<string, unknown>;
    let claims: Record<string, unknown>;
    try {
      header = b64json(head!);
      claims = b64json(body!);
    } catch {
      return { error: json(401, { message: "A JSON web token could not be decoded" }) };
    }
    call.jwt = { iat: Number(claims.iat), exp: Number(claims.exp), iss: claims.iss };
    const app = apps.get(Number(claims.iss));
    if (header.alg !== "RS256" || !app) return { error: json(401, { message: "Integration not found" }) };
    if (!verify("RSA-SHA256", Buffer.from(`${head}.${body}`), app.key, Buffer.from(sig!, "base64url"))) {
      return { error: json(401, { message: "A JSON web token could not be decoded" }) };
    }
    const now = Math.floor(Date.now() / 1000);
    const iat = Number(claims.iat);
    const exp = Number(claims.exp);
    if (!Number.isInteger(iat) || !Number.isInteger(exp) || exp - iat > 600 || exp <= now || iat > now + 60) {
      return { error: json(401, { message: "'Expiration time' claim ('exp') is too far in the future" }) };
    }
    return { app, appId: Number(claims.iss) };
  };

  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    const call: FakeGitHub["calls"][number] = { method: req.method ?? "", path, headers: { ...req.headers } };
    fake.calls.push(call);
    req.resume();
    req.on("end", () => {
      const answer = (() => {
        if (req.headers.accept !== "application/vnd.github+json") return json(415, { message: "Unsupported 'Accept' header" });
        if (req.headers["x-github-api-version"] !== "2022-11-28") return json(400, { message: "Invalid API version" });
        const tokens = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(path);
        const inst = /^\/app\/installations\/(\d+)$/.exec(path);
        if ((req.method === "POST" && tokens) || (req.method === "GET" && inst)) {
          const auth = authenticate(req, call);
          if ("error" in auth) return auth.error!;
          const installationId = Number((tokens ?? inst)![1]);
          if (!auth.app.installations.has(installationId)) return json(404, { message: "Not Found", documentation_url: "https://docs.github.com/rest" });
          if (inst) return json(200, { id: installationId, app_id: auth.appId, account: { login: "capstan-test" }, repository_selection: "all" });
          const token = `ghs_${randomBytes(18).toString("hex")}`;
          const expiresAt = new Date(Date.now() + fake.tokenTtlMs).toISOString().replace(/\.\d{3}Z$/, "Z");
          fake.issued.push({ token, installationId, expiresAt });
          return json(201, { token, expires_at: expiresAt, permissions: { contents: "read" }, repository_selection: "all" });
        }
        return json(404, { message: "Not Found" });
      })();
      res.writeHead(answer.status, { "Content-Type": "application/json; charset=utf-8" });
      res.end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const addr = server.address();
  fake.url = `http://127.0.0.1:${typeof addr === "object" && addr ? addr.port : 0}`;
  fake.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return fake;
}
