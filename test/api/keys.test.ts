import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestInstance, type ApiResponse, type TeamFixture, type TestInstance } from "./harness.js";
import { KeyFactory, type GeneratedKey, type KeyType } from "./support/ssh.js";

let t: TestInstance;
const keys = new KeyFactory();
beforeAll(async () => {
  t = await startTestInstance();
});
afterAll(async () => {
  await t?.close();
  keys.cleanup();
});

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Neither the whole private key nor any line of its body shows up in a response. */
function expectNoSecret(res: ApiResponse, key: GeneratedKey) {
  const text = JSON.stringify(res.body);
  expect(text).not.toContain(key.secretLine);
  expect(text).not.toContain("PRIVATE KEY");
  expect(text).not.toContain("private_key\":\"");
  expect(key.secretLines.length).toBeGreaterThan(0);
  for (const line of key.secretLines) expect(text).not.toContain(line);
}

describe("POST /security/keys with real ssh-keygen keys", () => {
  let team: TeamFixture;
  beforeAll(async () => {
    team = await t.newTeam();
  });

  it.each([
    ["ed25519", {}],
    ["rsa", {}],
    ["ecdsa", {}],
    ["rsa", { pem: true }],
    ["ecdsa", { pem: true }],
  ] as [KeyType, { pem?: boolean }][])("stores a %s key %j: public part and fingerprint match ssh-keygen", async (type, opts) => {
    const key = await keys.generate(type, opts);
    const res = await team.api.post("/security/keys", { name: `${type} key`, description: "deploy", private_key: key.privateKey });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      uuid: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: `${type} key`,
      public_key: key.publicKey,
      fingerprint: key.fingerprint,
    });
    expectNoSecret(res, key);

    const got = await team.api.get(`/security/keys/${res.body.uuid}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      uuid: res.body.uuid,
      name: `${type} key`,
      description: "deploy",
      public_key: key.publicKey,
      fingerprint: key.fingerprint,
      created_at: expect.stringMatching(ISO),
      updated_at: expect.stringMatching(ISO),
    });
    expectNoSecret(got, key);
  });

  it("accepts a key pasted with surrounding whitespace or CRLF line ends", async () => {
    const key = await keys.generate("ed25519");
    const res = await team.api.post("/security/keys", { name: "pasted", private_key: `\n\n${key.privateKey.replace(/\n/g, "\r\n")}  \n` });
    expect(res.status).toBe(201);
    expect(res.body.fingerprint).toBe(key.fingerprint);
  });

  it("never returns the private key in the list", async () => {
    const key = await keys.generate("ed25519");
    await team.api.post("/security/keys", { name: "listed", private_key: key.privateKey });
    const list = await team.api.get("/security/keys");
    expect(list.status).toBe(200);
    expect(list.body.data.length).toBeGreaterThan(0);
    for (const k of list.body.data) {
      expect(Object.keys(k).sort()).toEqual(["created_at", "description", "fingerprint", "name", "public_key", "updated_at", "uuid"]);
    }
    expectNoSecret(list, key);
  });

  it("stores the private key encrypted, not in plaintext, and can still open it", async () => {
    const key = await keys.generate("rsa");
    const res = await team.api.post("/security/keys", { name: "sealed", private_key: key.privateKey });
    const row = await t.instance.database.prisma.privateKey.findUniqueOrThrow({ where: { uuid: res.body.uuid } });
    expect(row.privateKeyEncrypted).not.toContain(key.secretLine);
    expect(row.privateKeyEncrypted).not.toContain("PRIVATE KEY");
    expect(row.privateKeyEncrypted).not.toContain(Buffer.from(key.privateKey).toString("base64").slice(0, 40));
    expect(row.publicKey).toBe(key.publicKey);
    expect(await t.instance.services.keys.reveal(team.teamId, res.body.uuid)).toBe(key.privateKey.trim() + "\n");
  });

  it("keeps identical keys in two teams apart", async () => {
    const key = await keys.generate("ed25519");
    const other = await t.newTeam();
    const a = await team.api.post("/security/keys", { name: "shared", private_key: key.privateKey });
    const b = await other.api.post("/security/keys", { name: "shared", private_key: key.privateKey });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(a.body.uuid).not.toBe(b.body.uuid);
    expect((await other.api.get(`/security/keys/${a.body.uuid}`)).status).toBe(404);
  });
});

describe("invalid keys (422 with errors.private_key)", () => {
  let team: TeamFixture;
  beforeAll(async () => {
    team = await t.newTeam();
  });

  async function expectRefused(private_key: string, message?: RegExp) {
    const res = await team.api.post("/security/keys", { name: "bad", private_key });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ message: expect.any(String), errors: { private_key: [expect.any(String)] } });
    if (message) expect(res.body.errors.private_key[0]).toMatch(message);
    expect((await team.api.get("/security/keys")).body.data).toEqual([]);
    return res;
  }

  it("refuses garbage", async () => {
    await expectRefused("this is not a key");
    await expectRefused("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n");
  });

  it("refuses a public key", async () => {
    await expectRefused(await keys.publicLine(), /public key/i);
  });

  it("refuses a truncated private key", async () => {
    const key = await keys.generate("ed25519");
    const lines = key.privateKey.trim().split("\n");
    await expectRefused([...lines.slice(0, 3), lines[lines.length - 1]].join("\n"));
  });

  it.each([
    ["ed25519", {}],
    ["rsa", { pem: true }],
  ] as [KeyType, { pem?: boolean }][])("refuses a passphrase-protected %s key %j", async (type, opts) => {
    const key = await keys.generate(type, { ...opts, passphrase: "correct horse" });
    const res = await expectRefused(key.privateKey, /passphrase/i);
    expectNoSecret(res, key);
  });

  it("refuses a missing or empty key and a missing name", async () => {
    const key = await keys.generate("ed25519");
    const missing = await team.api.post("/security/keys", { name: "x" });
    expect(missing.status).toBe(422);
    expect(missing.body.errors).toEqual({ private_key: ["This field is required."] });
    const empty = await team.api.post("/security/keys", { name: "x", private_key: "" });
    expect(empty.status).toBe(422);
    expect(empty.body.errors.private_key).toBeDefined();
    const noName = await team.api.post("/security/keys", { private_key: key.privateKey });
    expect(noName.status).toBe(422);
    expect(Object.keys(noName.body.errors)).toEqual(["name"]);
    expectNoSecret(noName, key);
    expect((await team.api.get("/security/keys")).body.data).toEqual([]);
  });
});

describe("PATCH and DELETE /security/keys/{uuid}", () => {
  let team: TeamFixture;
  let original: GeneratedKey;
  let uuid: string;
  beforeAll(async () => {
    team = await t.newTeam();
    original = await keys.generate("ed25519");
    uuid = (await team.api.post("/security/keys", { name: "first", description: "d", private_key: original.privateKey })).body.uuid;
  });

  it("renames a key without touching the key material", async () => {
    const res = await team.api.patch(`/security/keys/${uuid}`, { name: "renamed" });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      message: expect.any(String),
      data: expect.objectContaining({ uuid, name: "renamed", description: "d", public_key: original.publicKey, fingerprint: original.fingerprint }),
    });
    expect(await t.instance.services.keys.reveal(team.teamId, uuid)).toBe(original.privateKey.trim() + "\n");
  });

  it("replaces the private key: new public part and fingerprint, name kept", async () => {
    const replacement = await keys.generate("ecdsa");
    const res = await team.api.patch(`/security/keys/${uuid}`, { private_key: replacement.privateKey });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ uuid, name: "renamed", public_key: replacement.publicKey, fingerprint: replacement.fingerprint });
    expectNoSecret(res, replacement);
    const got = await team.api.get(`/security/keys/${uuid}`);
    expect(got.body.fingerprint).toBe(replacement.fingerprint);
    expect(await t.instance.services.keys.reveal(team.teamId, uuid)).toBe(replacement.privateKey.trim() + "\n");
    const row = await t.instance.database.prisma.privateKey.findUniqueOrThrow({ where: { uuid } });
    expect(row.privateKeyEncrypted).not.toContain(replacement.secretLine);
  });

  it("refuses an invalid replacement and an empty patch, keeping the key", async () => {
    const before = (await team.api.get(`/security/keys/${uuid}`)).body;
    const bad = await team.api.patch(`/security/keys/${uuid}`, { name: "should-not-stick", private_key: "garbage" });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.private_key).toEqual([expect.any(String)]);
    const passphrase = await keys.generate("ed25519", { passphrase: "pw" });
    expect((await team.api.patch(`/security/keys/${uuid}`, { private_key: passphrase.privateKey })).status).toBe(422);
    const empty = await team.api.patch(`/security/keys/${uuid}`, {});
    expect(empty.status).toBe(422);
    expect(empty.body.errors).toBeDefined();
    expect((await team.api.get(`/security/keys/${uuid}`)).body).toEqual(before);
  });

  it("answers 404 for an unknown key", async () => {
    const key = await keys.generate("ed25519");
    for (const res of [
      await team.api.get("/security/keys/nope"),
      await team.api.patch("/security/keys/nope", { name: "x" }),
      await team.api.patch("/security/keys/nope", { private_key: key.privateKey }),
      await team.api.delete("/security/keys/nope"),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ message: expect.any(String) });
    }
  });

  it("deletes a key", async () => {
    const key = await keys.generate("ed25519");
    const doomed = (await team.api.post("/security/keys", { name: "doomed", private_key: key.privateKey })).body.uuid;
    const res = await team.api.delete(`/security/keys/${doomed}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: expect.any(String) });
    expect((await team.api.get(`/security/keys/${doomed}`)).status).toBe(404);
    expect((await team.api.get("/security/keys")).body.data.map((k: { uuid: string }) => k.uuid)).toEqual([uuid]);
    expect(await t.instance.database.prisma.privateKey.count({ where: { uuid: doomed } })).toBe(0);
    expect((await team.api.delete(`/security/keys/${doomed}`)).status).toBe(404);
  });
});

describe("GET /security/keys pagination", () => {
  it("paginates with meta only when asked", async () => {
    const team = await t.newTeam();
    for (let i = 0; i < 3; i++) {
      const key = await keys.generate("ed25519");
      await team.api.post("/security/keys", { name: `k${i}`, private_key: key.privateKey });
    }
    const all = await team.api.get("/security/keys");
    expect(all.body.meta).toBeUndefined();
    expect(all.body.data.map((k: { name: string }) => k.name)).toEqual(["k0", "k1", "k2"]);
    const page = await team.api.get("/security/keys", { page: 2, per_page: 2 });
    expect(page.body).toEqual({ data: [all.body.data[2]], meta: { current_page: 2, per_page: 2, total: 3, last_page: 2 } });
  });
});

describe("roles", () => {
  let team: TeamFixture;
  let key: GeneratedKey;
  let uuid: string;
  beforeAll(async () => {
    team = await t.newTeam();
    key = await keys.generate("ed25519");
    uuid = (await team.api.post("/security/keys", { name: "team key", private_key: key.privateKey })).body.uuid;
  });

  it.each(["member", "viewer"] as const)("a %s can list and read keys but not change them (403)", async (role) => {
    const m = await t.newMember(team.teamId, role);
    const api = t.api(m.token);
    const list = await api.get("/security/keys");
    expect(list.status).toBe(200);
    expect(list.body.data.map((k: { uuid: string }) => k.uuid)).toEqual([uuid]);
    expect((await api.get(`/security/keys/${uuid}`)).status).toBe(200);

    const fresh = await keys.generate("ed25519");
    const attempts = [
      await api.post("/security/keys", { name: "mine", private_key: fresh.privateKey }),
      await api.patch(`/security/keys/${uuid}`, { name: "hijacked" }),
      await api.patch(`/security/keys/${uuid}`, { private_key: fresh.privateKey }),
      await api.delete(`/security/keys/${uuid}`),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(403);
      expect(res.body).toEqual({ message: expect.any(String) });
    }
    const after = await team.api.get("/security/keys");
    expect(after.body.data).toEqual(list.body.data);
    expect(after.body.data[0]).toMatchObject({ name: "team key", fingerprint: key.fingerprint });
  });

  it("an admin can manage keys", async () => {
    const m = await t.newMember(team.teamId, "admin");
    const fresh = await keys.generate("ed25519");
    const res = await t.api(m.token).post("/security/keys", { name: "admin key", private_key: fresh.privateKey });
    expect(res.status).toBe(201);
    expect((await t.api(m.token).delete(`/security/keys/${res.body.uuid}`)).status).toBe(200);
  });
});
