import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { pushesOf, safeEqual, verifySignature } from "./webhooks.js";

const secret = "s3cret";
const body = Buffer.from('{"ref":"refs/heads/main"}');
const hex = createHmac("sha256", secret).update(body).digest("hex");

describe("webhook signatures", () => {
  it("accepts each provider's own scheme and nothing else", () => {
    expect(verifySignature("github", secret, { "x-hub-signature-256": `sha256=${hex}` }, body)).toBe(true);
    expect(verifySignature("github", secret, { "x-hub-signature-256": hex }, body)).toBe(false);
    expect(verifySignature("github", secret, { "x-hub-signature": `sha256=${hex}` }, body)).toBe(false);
    expect(verifySignature("gitlab", secret, { "x-gitlab-token": secret }, body)).toBe(true);
    expect(verifySignature("gitlab", secret, { "x-gitlab-token": `${secret} ` }, body)).toBe(false);
    expect(verifySignature("gitea", secret, { "x-gitea-signature": hex }, body)).toBe(true);
    expect(verifySignature("gitea", secret, { "x-gitea-signature": `sha256=${hex}` }, body)).toBe(false);
    expect(verifySignature("bitbucket", secret, { "x-hub-signature": `sha256=${hex}` }, body)).toBe(true);
    const flipped = hex.slice(0, -1) + (hex.endsWith("0") ? "1" : "0");
    expect(verifySignature("bitbucket", secret, { "x-hub-signature": `sha256=${flipped}` }, body)).toBe(false);
  });

  it("a signature over other bytes, a missing header or an empty one fails", () => {
    const other = Buffer.from('{"ref":"refs/heads/evil"}');
    expect(verifySignature("github", secret, { "x-hub-signature-256": `sha256=${hex}` }, other)).toBe(false);
    expect(verifySignature("gitea", secret, {}, body)).toBe(false);
    expect(verifySignature("gitlab", secret, { "x-gitlab-token": "" }, body)).toBe(false);
    // An empty secret never matches a missing header.
    expect(safeEqual("", undefined)).toBe(false);
    expect(safeEqual("a", "a")).toBe(true);
    expect(safeEqual("a", "ab")).toBe(false);
  });
});

describe("push payloads", () => {
  const sha = "a".repeat(40);

  it("reads the branch, head commit and message of each provider", () => {
    expect(pushesOf("github", { ref: "refs/heads/main", after: sha, head_commit: { message: "m1" } })).toEqual([{ branch: "main", commit: sha, message: "m1" }]);
    expect(pushesOf("gitea", { ref: "refs/heads/feature/x", after: sha, head_commit: { message: "m2" } })).toEqual([{ branch: "feature/x", commit: sha, message: "m2" }]);
    expect(
      pushesOf("gitlab", { ref: "refs/heads/main", after: sha, checkout_sha: sha, commits: [{ id: "b".repeat(40), message: "old" }, { id: sha, message: "m3" }] }),
    ).toEqual([{ branch: "main", commit: sha, message: "m3" }]);
    expect(
      pushesOf("bitbucket", {
        push: { changes: [{ new: { type: "tag", name: "v1", target: { hash: sha } } }, { new: { type: "branch", name: "dev", target: { hash: sha, message: "m4" } } }] },
      }),
    ).toEqual([{ branch: "dev", commit: sha, message: "m4" }]);
  });

  it("gives nothing for tags, deletions and shapes it does not know", () => {
    expect(pushesOf("github", { ref: "refs/tags/v1", after: sha })).toEqual([]);
    expect(pushesOf("github", { ref: "refs/heads/main", after: "0".repeat(40), deleted: true })).toEqual([]);
    expect(pushesOf("gitlab", { ref: "refs/heads/main", checkout_sha: null, after: "0".repeat(40) })).toEqual([]);
    expect(pushesOf("bitbucket", { push: { changes: [{ new: null, old: { type: "branch", name: "main" } }] } })).toEqual([]);
    expect(pushesOf("github", null)).toEqual([]);
    expect(pushesOf("bitbucket", { push: "nope" })).toEqual([]);
    expect(pushesOf("gitea", { ref: 42 })).toEqual([]);
  });
});
