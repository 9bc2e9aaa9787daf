import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import ssh2 from "ssh2";
import { repoPath } from "../lib/paths.js";
import type { InstallResult, SshTarget } from "../services/servers.js";

const OUTPUT_CAP = 16 * 1024;
const quote = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;

/**
 * Installs (or replaces) the agent on a host over SSH with the server's private key. The
 * script travels on stdin (`sh -s`); the only words of the remote command are the validated
 * control-plane URL, image and the hex agent token, each quoted. The host key is pinned on
 * first use: a later mismatch aborts before anything runs.
 */
export function installAgentOverSsh(
  target: SshTarget,
  params: { url: string; token: string; image: string },
  timeoutMs = 300_000,
): Promise<InstallResult> {
  const script = readFileSync(repoPath("deploy/agent/install.sh"), "utf8");
  const command = `CAPSTAN_AGENT_IMAGE=${quote(params.image)} sh -s -- --url ${quote(params.url)} --token ${quote(params.token)}`;
  return new Promise((resolve, reject) => {
    const conn = new ssh2.Client();
    let seenKey = "";
    let output = "";
    const timer = setTimeout(() => {
      conn.end();
      reject(new Error(`agent installation timed out after ${timeoutMs / 1000} s`));
    }, timeoutMs);
    const fail = (err: Error) => {
      clearTimeout(timer);
      conn.end();
      reject(err);
    };
    conn.on("error", (err) => fail(new Error(`SSH connection to ${target.host}:${target.port} failed: ${err.message}`)));
    conn.on("ready", () => {
      conn.exec(command, (err, stream) => {
        if (err) return fail(err);
        const keep = (chunk: Buffer) => {
          output = (output + chunk.toString("utf8")).slice(-OUTPUT_CAP);
        };
        stream.on("data", keep);
        stream.stderr.on("data", keep);
        stream.on("close", (code: number | null) => {
          clearTimeout(timer);
          conn.end();
          resolve({ exitCode: code ?? -1, output, hostKey: seenKey });
        });
        stream.end(script);
      });
    });
    conn.connect({
      host: target.host,
      port: target.port,
      username: target.username,
      privateKey: target.privateKey,
      readyTimeout: 20_000,
      hostVerifier: (key: Buffer) => {
        seenKey = "SHA256:" + createHash("sha256").update(key).digest("base64").replace(/=+$/, "");
        return target.knownHostKey === null || target.knownHostKey === seenKey;
      },
    });
  });
}
