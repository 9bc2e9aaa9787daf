import { randomBytes, sign, timingSafeEqual, X509Certificate } from "node:crypto";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { freePort } from "./ports.js";

const run = promisify(execFile);
const SCRIPT = fileURLToPath(new URL("../services/registry.sh", import.meta.url));

/**
 * A real Docker Registry (Debian's docker-registry 2.8.2) on 127.0.0.1 for tests, started by
 * test/services/registry.sh: with htpasswd (basic) authentication of one user, or with bearer
 * tokens from a small token server of this file (the realm the registry names in its
 * challenge), which checks the same user's password and signs RS256 JWTs with a throwaway
 * certificate the registry trusts.
 */
export interface RegistryServer {
  /** http://127.0.0.1:PORT */
  url: string;
  /** host:port, as image names start */
  host: string;
  username: string;
  password: string;
  /** token mode: the realm (token server) URL and how many tokens it issued / refused. */
  realm?: string;
  tokens?: { issued: number; refused: number };
  stop(): Promise<void>;
}

export async function startRegistry(mode: "basic" | "token", login: { username: string; password: string }): Promise<RegistryServer> {
  const port = await freePort();
  if (mode === "basic") {
    const child = run("bash", [SCRIPT, "start", String(port), "basic", login.username], { timeout: 120_000 });
    child.child.stdin!.end(login.password);
    const { stdout } = await child;
    const url = stdout.trim();
    return { url, host: new URL(url).host, ...login, stop: () => stopRegistry(port) };
  }
  const tokens = await startTokenServer(login);
  try {
    const { stdout } = await run("bash", [SCRIPT, "start", String(port), "token", tokens.realm, tokens.certFile], { timeout: 120_000 });
    const url = stdout.trim();
    return {
      url,
      host: new URL(url).host,
      ...login,
      realm: tokens.realm,
      tokens: tokens.counts,
      async stop() {
        await stopRegistry(port);
        await tokens.stop();
      },
    };
  } catch (err) {
    await tokens.stop();
    throw err;
  }
}

async function stopRegistry(port: number): Promise<void> {
  await run("bash", [SCRIPT, "stop", String(port)], { timeout: 30_000 });
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString("base64url");

/** The service and issuer a registry of startRegistry("token") (test/services/registry.sh) is configured with. */
export const TOKEN_SERVICE = "capstan-test-registry";
export const TOKEN_ISSUER = "capstan-test-issuer";

/**
 * The access a token grants: every `scope=type:name:actions` of the request (the one login of
 * the server may pull and push everything). The name may hold a colon (a port), the actions are
 * after the last one.
 */
function grantedAccess(url: URL): { type: string; name: string; actions: string[] }[] {
  return url.searchParams.getAll("scope").flatMap((scope) => {
    const first = scope.indexOf(":");
    const last = scope.lastIndexOf(":");
    if (first < 0 || last <= first) return [];
    return [{ type: scope.slice(0, first), name: scope.slice(first + 1, last), actions: scope.slice(last + 1).split(",").filter(Boolean) }];
  });
}

export interface TokenServer {
  /** http://HOST:PORT/token, the registry's `auth.token.realm` */
  realm: string;
  /** the PEM certificate whose key signs the tokens: the registry's `auth.token.rootcertbundle` */
  certFile: string;
  counts: { issued: number; refused: number };
  /** what was asked: method, path, query keys and the authorization scheme (failure messages) */
  requests: string[];
  stop(): Promise<void>;
}

/**
 * The token server of the registry's `auth.token` (the Docker token authentication spec):
 * `GET /token?service=...&scope=...&account=...` with Basic credentials answers
 * `{token, access_token, expires_in, issued_at}` granting the scopes asked for, or 401
 * `{details}` for a wrong or missing login. The JWT's x5c header carries the certificate (in the
 * registry's rootcertbundle) whose key signed it. `host`: the address it listens on (127.0.0.1;
 * e2e tests name their test network's gateway, where the test hosts reach this machine).
 */
export async function startTokenServer(login: { username: string; password: string }, opts: { host?: string } = {}): Promise<TokenServer> {
  const dir = await mkdtemp(join(tmpdir(), "capstan-registry-token-"));
  const keyFile = join(dir, "key.pem");
  const certFile = join(dir, "cert.pem");
  await run("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "2", "-subj", `/CN=${TOKEN_ISSUER}`], { timeout: 60_000 });
  const key = await readFile(keyFile, "utf8");
  const cert = new X509Certificate(await readFile(certFile));
  const counts = { issued: 0, refused: 0 };
  const expected = Buffer.from(`${login.username}:${login.password}`);
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://token");
    requests.push(`${req.method} ${url.pathname}?${[...url.searchParams.keys()].join(",")} auth=${req.headers.authorization?.split(" ")[0] ?? "none"}`);
    const auth = req.headers.authorization ?? "";
    const given = auth.startsWith("Basic ") ? Buffer.from(auth.slice(6), "base64") : Buffer.alloc(0);
    const ok = url.pathname === "/token" && given.length === expected.length && timingSafeEqual(given, expected);
    res.setHeader("content-type", "application/json");
    if (!ok) {
      counts.refused++;
      res.statusCode = 401;
      res.end(JSON.stringify({ details: "incorrect username or password" }));
      return;
    }
    counts.issued++;
    const now = Math.floor(Date.now() / 1000);
    const header = { alg: "RS256", typ: "JWT", x5c: [cert.raw.toString("base64")] };
    const claims = {
      iss: TOKEN_ISSUER,
      sub: login.username,
      aud: url.searchParams.get("service") ?? "",
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: randomBytes(8).toString("hex"),
      access: grantedAccess(url),
    };
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const token = `${input}.${b64url(sign("sha256", Buffer.from(input), key))}`;
    res.end(JSON.stringify({ token, access_token: token, expires_in: 300, issued_at: new Date(now * 1000).toISOString() }));
  });
  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((r) => server.listen(0, host, r));
  const realm = `http://${host}:${(server.address() as AddressInfo).port}/token`;
  return {
    realm,
    certFile,
    counts,
    requests,
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
