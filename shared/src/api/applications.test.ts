import { describe, expect, it } from "vitest";
import { AppGitBranch, BaseDirectory, DockerfileContent, ComposeContent, DomainList, decodeMaybeBase64, imageReference, looksLikeDockerfile, parseDomains } from "./applications.js";

const b64 = (s: string) => Buffer.from(s, "utf8").toString("base64");

describe("decodeMaybeBase64", () => {
  it("decodes base64 of text, also wrapped in lines", () => {
    const text = "FROM busybox\nCMD [\"sh\"]\n";
    expect(decodeMaybeBase64(b64(text))).toBe(text);
    expect(decodeMaybeBase64(b64(text).replace(/(.{8})/g, "$1\r\n"))).toBe(text);
    expect(decodeMaybeBase64("  " + b64(text) + "\n")).toBe(text);
  });

  it("keeps raw contents as they are", () => {
    for (const raw of ["FROM busybox", "services:\n  web:\n    image: nginx\n", "{services: {}}", "abc", "QUJD"]) expect(decodeMaybeBase64(raw)).toBe(raw);
  });

  it("keeps values that are not canonical base64 of UTF-8 text", () => {
    // binary: not valid UTF-8
    const binary = Buffer.from([0xff, 0xfe, 0xfd, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05]).toString("base64");
    expect(decodeMaybeBase64(binary)).toBe(binary);
    // control characters in the decoded text
    const control = b64("FROM x\u0001\u0002\u0003");
    expect(decodeMaybeBase64(control)).toBe(control);
    // a word made of base64 letters whose length is not a multiple of 4
    expect(decodeMaybeBase64("Dockerfile")).toBe("Dockerfile");
  });
});

describe("Dockerfile and compose contents", () => {
  it("needs a FROM instruction", () => {
    expect(looksLikeDockerfile("# comment\nARG V=1\n  from busybox:${V}\n")).toBe(true);
    expect(looksLikeDockerfile("RUN echo FROM x")).toBe(false);
    expect(DockerfileContent.safeParse(b64("FROM scratch\n")).data).toBe("FROM scratch\n");
    expect(DockerfileContent.safeParse("RUN id").success).toBe(false);
    expect(DockerfileContent.safeParse("FROM a\u0000").success).toBe(false);
  });

  it("decodes compose contents and limits their size", () => {
    expect(ComposeContent.parse(b64("services: {}\n"))).toBe("services: {}\n");
    expect(ComposeContent.safeParse("x".repeat(1_048_577)).success).toBe(false);
  });
});

describe("DomainList / parseDomains", () => {
  it("normalises to scheme://host[/path], bare hosts meaning https", () => {
    expect(DomainList.parse("App.Example.com , http://plain.example.com/api/, https://x.example.com/")).toBe(
      "https://app.example.com,http://plain.example.com/api,https://x.example.com",
    );
    expect(DomainList.parse(" , ")).toBeNull();
    expect(parseDomains("http://a.example.com/v1")).toEqual({ entries: [{ host: "a.example.com", https: false, path: "/v1", url: "http://a.example.com/v1" }] });
  });

  it("refuses ports, duplicates, credentials, queries and non-http schemes", () => {
    for (const bad of ["https://a.example.com:444", "a.example.com,A.example.com", "https://u@a.example.com", "https://a.example.com?q", "ftp://a.example.com", "a_b.example.com"]) {
      expect(DomainList.safeParse(bad).success, bad).toBe(false);
    }
    expect(DomainList.safeParse(Array.from({ length: 101 }, (_, i) => `h${i}.example.com`).join(",")).success).toBe(false);
  });
});

describe("imageReference", () => {
  it("combines a name and a tag, defaulting to latest", () => {
    expect(imageReference("nginx", undefined)).toEqual({ ref: "nginx:latest" });
    expect(imageReference("nginx", "1.27")).toEqual({ ref: "nginx:1.27" });
    expect(imageReference("registry:5000/a/b", undefined)).toEqual({ ref: "registry:5000/a/b:latest" });
    expect(imageReference("registry:5000/a/b:2", undefined)).toEqual({ ref: "registry:5000/a/b:2" });
    expect(imageReference("a/b:2", "2")).toEqual({ ref: "a/b:2" });
    expect(imageReference("a/b:2", "3")).toHaveProperty("error");
    expect(imageReference(`a@sha256:${"0".repeat(64)}`, "3")).toHaveProperty("error");
  });
});

describe("branches and base directories", () => {
  it("refuses shell metacharacters in branches that git would accept", () => {
    for (const ok of ["main", "release/2.x", "feature/JIRA-12_fix", "fix#12"]) expect(AppGitBranch.safeParse(ok).success, ok).toBe(true);
    for (const bad of ["a;b", "$(id)", "a`b`", "a|b", "a&b", "a>b", "a'b", "a\"b", "a!b", "a{b}"]) expect(AppGitBranch.safeParse(bad).success, bad).toBe(false);
  });

  it("normalises base directories without a default", () => {
    expect(BaseDirectory.parse("apps/./web/")).toBe("/apps/web");
    expect(BaseDirectory.safeParse(undefined).success).toBe(false);
    expect(BaseDirectory.safeParse("../x").success).toBe(false);
  });
});
