import { describe, expect, it } from "vitest";
import { NO_DIRECTIVES, PROXY_LABEL_LIMITS, hasDirectives, parseProxyLabels } from "./proxy-labels.js";

const HASH = "$2a$14$" + "a".repeat(22) + "B".repeat(31);

describe("parseProxyLabels", () => {
  it("reads every directive and ignores labels outside the namespace", () => {
    const { directives, problems } = parseProxyLabels({
      "proxy.basic_auth.alice": HASH,
      "proxy.basic_auth.bob": HASH.replace("$2a$", "$2y$"),
      "proxy.headers.response.x-frame-options": "DENY",
      "proxy.headers.response.Server": "",
      "proxy.headers.request.X-Tenant": "blue",
      "proxy.redirect": "to-apex",
      "proxy.encode": "zstd, gzip",
      "proxy.network": "my-net",
      "capstan.proxy.routes": "[]",
      "org.opencontainers.image.title": "x",
    });
    expect(problems).toEqual([]);
    expect(directives).toEqual({
      basic_auth: [
        { user: "alice", hash: HASH },
        { user: "bob", hash: HASH.replace("$2a$", "$2y$") },
      ],
      request_headers: { "X-Tenant": "blue" },
      response_headers: { "X-Frame-Options": "DENY", Server: "" },
      redirect: "to-apex",
      encode: ["zstd", "gzip"],
      network: "my-net",
    });
    expect(hasDirectives(directives)).toBe(true);
  });

  it("gives no directives and no problems for a container without proxy.* labels", () => {
    expect(parseProxyLabels({ "capstan.managed": "true", proxyish: "1" })).toEqual({ directives: NO_DIRECTIVES, problems: [] });
    expect(hasDirectives(NO_DIRECTIVES)).toBe(false);
  });

  it("refuses a plain password and keeps the value out of the reason", () => {
    const { directives, problems } = parseProxyLabels({ "proxy.basic_auth.alice": "hunter2-plain" });
    expect(directives.basic_auth).toEqual([]);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^label proxy\.basic_auth\.alice: not a bcrypt hash.*ignored$/);
    expect(problems[0]).not.toContain("hunter2");
  });

  it("refuses Caddy placeholders in values, so {env.*} or {file.*} never expand into a response", () => {
    const { directives, problems } = parseProxyLabels({
      "proxy.headers.response.X-Leak": "{env.CADDY_ADMIN}",
      "proxy.headers.request.X-Leak": "a{file./data/caddy/x}b",
      "proxy.headers.response.X-Brace": "}",
      "proxy.basic_auth.{env.USER}": HASH,
    });
    expect(directives.response_headers).toEqual({});
    expect(directives.request_headers).toEqual({});
    expect(directives.basic_auth).toEqual([]);
    expect(problems).toHaveLength(4);
    expect(problems.join("\n")).not.toContain("CADDY_ADMIN");
  });

  it("refuses newlines and control characters (header splitting) and values over the limit", () => {
    const { directives, problems } = parseProxyLabels({
      "proxy.headers.response.X-A": "ok\r\nSet-Cookie: s=1",
      "proxy.headers.response.X-B": "tab\there",
      "proxy.headers.response.X-C": "x".repeat(PROXY_LABEL_LIMITS.headerValue + 1),
      "proxy.headers.response.X-D": "x".repeat(PROXY_LABEL_LIMITS.headerValue),
    });
    expect(Object.keys(directives.response_headers)).toEqual(["X-D"]);
    expect(problems.map((p) => p.split(":")[0])).toEqual(["label proxy.headers.response.X-A", "label proxy.headers.response.X-B", "label proxy.headers.response.X-C"]);
  });

  it("refuses headers the proxy manages, bad names, unknown directives and bad values", () => {
    const { directives, problems } = parseProxyLabels({
      "proxy.headers.request.Host": "other.example.com",
      "proxy.headers.response.Transfer-Encoding": "chunked",
      "proxy.headers.response.": "x",
      "proxy.rewrite": "/x",
      "proxy.redirect": "to-evil.example.com",
      "proxy.encode": "br",
      "proxy.network": "bad net",
    });
    expect(directives).toEqual(NO_DIRECTIVES);
    expect(problems).toHaveLength(7);
    expect(problems.find((p) => p.startsWith("label proxy.rewrite:"))).toMatch(/not a proxy directive/);
  });

  it("bounds the number of users and headers", () => {
    const labels: Record<string, string> = {};
    for (let i = 0; i < PROXY_LABEL_LIMITS.users + 3; i++) labels[`proxy.basic_auth.u${String(i).padStart(3, "0")}`] = HASH;
    for (let i = 0; i < PROXY_LABEL_LIMITS.headers + 3; i++) labels[`proxy.headers.response.X-H${String(i).padStart(3, "0")}`] = "v";
    const { directives, problems } = parseProxyLabels(labels);
    expect(directives.basic_auth).toHaveLength(PROXY_LABEL_LIMITS.users);
    expect(Object.keys(directives.response_headers)).toHaveLength(PROXY_LABEL_LIMITS.headers);
    expect(problems).toHaveLength(6);
  });

  it("gives one header one spelling whatever the label's case, the same in any label order", () => {
    const a = parseProxyLabels({ "proxy.headers.response.x-a": "1", "proxy.headers.response.X-A": "2" });
    const b = parseProxyLabels({ "proxy.headers.response.X-A": "2", "proxy.headers.response.x-a": "1" });
    expect(a.directives.response_headers).toEqual(b.directives.response_headers);
    expect(Object.keys(a.directives.response_headers)).toEqual(["X-A"]);
  });
});
