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

/**
 * The token server of the registry's `auth.token` (the Docker token authentication spec):
 * `GET /token?service=...&scope=...&account=...` with Basic credentials answers
 * `{token, access_token, expires_in, issued_at}`, or 401 `{details}` for a wrong login. The JWT's
 * x5c header carries the certificate (in the registry's rootcertbundle) whose key signed it.
 */
async function startTokenServer(login: { username: string; password: string }) {
  const dir = await mkdtemp(join(tmpdir(), "capstan-registry-token-"));
  const keyFile = join(dir, "key.pem");
  const certFile = join(dir, "cert.pem");
  await run("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", keyFile, "-out", certFile, "-days", "2", "-subj", "/CN=capstan-test-issuer"], { timeout: 60_000 });
  const key = await readFile(keyFile, "utf8");
  const cert = new X509Certificate(await readFile(certFile));
  const counts = { issued: 0, refused: 0 };
  const expected = Buffer.from(`${login.username}:${login.password}`);
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://token");
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
      iss: "capstan-test-issuer",
      sub: login.username,
      aud: url.searchParams.get("service") ?? "",
      exp: now + 300,
      nbf: now - 10,
      iat: now,
      jti: randomBytes(8).toString("hex"),
      access: [],
    };
    const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
    const token = `${input}.${b64url(sign("sha256", Buffer.from(input), key))}`;
    res.end(JSON.stringify({ token, access_token: token, expires_in: 300, issued_at: new Date(now * 1000).toISOString() }));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const realm = `http://127.0.0.1:${(server.address() as AddressInfo).port}/token`;
  return {
    realm,
    certFile,
    counts,
    async stop() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await rm(dir, { recursive: true, force: true });
    },
  };
}
