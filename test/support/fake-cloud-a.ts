import { createHash, createHmac } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { SignatureV4 } from "@smithy/signature-v4";

/**
 * A local stand-in for cloud_a's token API (the vendor's GetAuthorizationToken, AWS JSON 1.1):
 * `POST /` with `X-Amz-Target: AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken`,
 * `Content-Type: application/x-amz-json-1.1` and a Signature Version 4 `Authorization` header,
 * checked here with the vendor SDK's own signer (@smithy/signature-v4) against the one key
 * pair it knows. Answers `{authorizationData: [{authorizationToken: base64("AWS:<token>"),
 * expiresAt: <unix seconds, 12 h after the fake clock>, proxyEndpoint}]}`; a wrong key is 400
 * `{__type: "UnrecognizedClientException", message}`, a bad signature 403
 * `{__type: "InvalidSignatureException", message}`, as the vendor answers.
 */
export interface FakeCloudA {
  url: string;
  /** Tokens issued, in order (each `tok-<n>-<random>`). */
  issued: string[];
  refused: number;
  stop(): Promise<void>;
}

class Sha256 {
  private readonly h;
  constructor(secret?: string | ArrayBuffer | ArrayBufferView) {
    this.h = secret === undefined ? createHash("sha256") : createHmac("sha256", typeof secret === "string" ? Buffer.from(secret) : Buffer.from(secret as Uint8Array));
  }
  update(data: string | ArrayBuffer | ArrayBufferView): void {
    this.h.update(typeof data === "string" ? Buffer.from(data) : Buffer.from(data as Uint8Array));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.h.digest());
  }
  reset(): void {}
}

export async function startFakeCloudA(keys: { accessKeyId: string; secretAccessKey: string; region: string }, clock: () => Date, proxyEndpoint = "https://123456789012.dkr.ecr.example"): Promise<FakeCloudA> {
  const issued: string[] = [];
  const state = { refused: 0 };
  const refuse = (res: http.ServerResponse, status: number, type: string, message: string) => {
    state.refused++;
    res.writeHead(status, { "content-type": "application/x-amz-json-1.1" }).end(JSON.stringify({ __type: type, message }));
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const body = Buffer.concat(chunks).toString("utf8");
        if (req.method !== "POST" || req.url !== "/") return refuse(res, 404, "UnknownOperationException", "not found");
        if (req.headers["x-amz-target"] !== "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken") return refuse(res, 400, "UnknownOperationException", "unknown target");
        if (req.headers["content-type"] !== "application/x-amz-json-1.1") return refuse(res, 400, "SerializationException", "content type");
        const auth = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/ecr\/aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$/.exec(String(req.headers.authorization ?? ""));
        if (!auth) return refuse(res, 403, "IncompleteSignatureException", "Authorization header requires a valid AWS4-HMAC-SHA256 signature.");
        if (auth[1] !== keys.accessKeyId) return refuse(res, 400, "UnrecognizedClientException", "The security token included in the request is invalid.");
        const amzDate = String(req.headers["x-amz-date"] ?? "");
        const at = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(amzDate);
        if (!at) return refuse(res, 403, "IncompleteSignatureException", "X-Amz-Date missing.");
        const signingDate = new Date(Date.UTC(+at[1]!, +at[2]! - 1, +at[3]!, +at[4]!, +at[5]!, +at[6]!));
        const signed = auth[4]!.split(";");
        const headers: Record<string, string> = {};
        for (const name of signed) if (name !== "x-amz-date") headers[name] = String(req.headers[name] ?? "");
        const signer = new SignatureV4({ service: "ecr", region: auth[3]!, credentials: { accessKeyId: keys.accessKeyId, secretAccessKey: keys.secretAccessKey }, sha256: Sha256, applyChecksum: false });
        const expected = await signer.sign(
          { method: "POST", protocol: "http:", hostname: String(req.headers.host).split(":")[0]!, path: "/", headers, body, query: {} } as never,
          { signingDate },
        );
        const got = /Signature=([0-9a-f]{64})/.exec(String((expected as unknown as { headers: Record<string, string> }).headers.authorization))?.[1];
        if (got !== auth[5]) return refuse(res, 403, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.");
        const token = `tok-${issued.length + 1}-${Math.random().toString(36).slice(2, 10)}`;
        issued.push(token);
        res.writeHead(200, { "content-type": "application/x-amz-json-1.1" }).end(
          JSON.stringify({
            authorizationData: [{ authorizationToken: Buffer.from(`AWS:${token}`).toString("base64"), expiresAt: (clock().getTime() + 12 * 3600_000) / 1000, proxyEndpoint }],
          }),
        );
      })().catch((err) => refuse(res, 500, "ServerException", String(err)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    issued,
    get refused() {
      return state.refused;
    },
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
