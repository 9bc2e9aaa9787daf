import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { EngineError, type Engine, type RegistryCredentials } from "../docker/engine.js";
import { KeyedMutex } from "../mutex.js";
import { allLogins, loginStates, pullPlan, storedLogin } from "../registries/config.js";
import { registryLogin, registryLogout } from "./registries.js";

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const stateDir = () => {
  const d = mkdtempSync(join(tmpdir(), "capstan-registry-"));
  dirs.push(d);
  return d;
};
const ctx = () => {
  const lines: string[] = [];
  return { lines, c: { signal: new AbortController().signal, progress: (l: string) => lines.push(l), job: { id: "job-1", attempt: 1 } } };
};

/** An engine whose /auth accepts one login. */
function engine(accept: RegistryCredentials, calls: RegistryCredentials[] = []): Engine {
  return {
    async checkAuth(auth: RegistryCredentials) {
      calls.push(auth);
      if (auth.username === accept.username && auth.password === accept.password && auth.serveraddress === accept.serveraddress) return { status: "Login Succeeded" };
      // The engine's words for a refused login, with the password echoed as some registries do.
      throw new EngineError(`log in to ${auth.serveraddress}: login attempt to http://${auth.serveraddress}/v2/ failed with status: 401 Unauthorized (${auth.password})`, 401);
    },
  } as unknown as Engine;
}

describe("registry.login / registry.logout", () => {
  it("logs in through the engine, then keeps the login in a 0600 docker config.json in a 0700 directory", async () => {
    const dir = stateDir();
    const calls: RegistryCredentials[] = [];
    const login = { username: "ci", password: "s3cret-pw", serveraddress: "registry.example.com:5000" };
    const h = registryLogin(engine(login, calls), { stateDir: dir }, new KeyedMutex());
    const { lines, c } = ctx();
    const result = await h({ registry: login.serveraddress, username: "ci", password: "s3cret-pw", fingerprint: "f1" }, c);
    expect(result).toEqual({ registry: login.serveraddress, fingerprint: "f1", status: "Login Succeeded" });
    expect(calls).toEqual([login]);
    const file = join(dir, "docker", "config.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, "docker")).mode & 0o777).toBe(0o700);
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ auths: { [login.serveraddress]: { auth: Buffer.from("ci:s3cret-pw").toString("base64") } } });
    expect(lines.join("\n")).not.toContain("s3cret-pw");
    // A second delivery rewrites the same entry; the hub's login goes under docker login's key.
    await h({ registry: login.serveraddress, username: "ci", password: "s3cret-pw", fingerprint: "f1" }, c);
    const hub = registryLogin(engine({ ...login, serveraddress: "docker.io" }), { stateDir: dir }, new KeyedMutex());
    await hub({ registry: "docker.io", username: "ci", password: "s3cret-pw", fingerprint: "f2" }, c);
    expect(Object.keys(JSON.parse(readFileSync(file, "utf8")).auths)).toEqual([login.serveraddress, "https://index.docker.io/v1/"]);
    expect(await storedLogin(dir, "docker.io")).toEqual({ username: "ci", password: "s3cret-pw" });

    const out = registryLogout({ stateDir: dir }, new KeyedMutex());
    expect(await out({ registry: login.serveraddress }, c)).toEqual({ removed: true });
    expect(await out({ registry: login.serveraddress }, c)).toEqual({ removed: false });
    expect(await storedLogin(dir, login.serveraddress)).toBeNull();
    expect(await storedLogin(dir, "docker.io")).not.toBeNull();
  });

  it("a refused login fails with the engine's reason, the password masked, and stores nothing", async () => {
    const dir = stateDir();
    const h = registryLogin(engine({ username: "ci", password: "right", serveraddress: "r.example" }), { stateDir: dir }, new KeyedMutex());
    const { c } = ctx();
    const err = await h({ registry: "r.example", username: "ci", password: "wrong-pw", fingerprint: "f" }, c).catch((e: Error) => e);
    expect((err as Error).message).toMatch(/401 Unauthorized/);
    expect((err as Error).message).not.toContain("wrong-pw");
    expect(await storedLogin(dir, "r.example")).toBeNull();
  });
});

describe("pulls use the stored logins (registries/config.ts)", () => {
  it("matches the image's registry host; an image naming no host comes from the default registry, qualified; none stored is anonymous", async () => {
    const dir = stateDir();
    const { c } = ctx();
    const accept = (serveraddress: string) => engine({ username: "ci", password: "pw-1", serveraddress });
    await registryLogin(accept("reg.example:5000"), { stateDir: dir }, new KeyedMutex())(
      { registry: "reg.example:5000", username: "ci", password: "pw-1", fingerprint: "fp-a", is_default: true },
      c,
    );
    expect(await pullPlan(dir, "reg.example:5000/team/app:2")).toEqual({ pull: "reg.example:5000/team/app:2", auth: { username: "ci", password: "pw-1", serveraddress: "reg.example:5000" } });
    // Hostless: the default registry, the reference qualified with its host.
    expect(await pullPlan(dir, "team/app:2")).toEqual({ pull: "reg.example:5000/team/app:2", auth: { username: "ci", password: "pw-1", serveraddress: "reg.example:5000" } });
    // Another host: no login of it, anonymous (never another registry's credentials).
    expect(await pullPlan(dir, "other.example/team/app:2")).toEqual({ pull: "other.example/team/app:2", auth: null });
    expect(await allLogins(dir)).toEqual({ "reg.example:5000": { username: "ci", password: "pw-1", serveraddress: "reg.example:5000" } });
    expect(await loginStates(dir)).toEqual([{ registry: "reg.example:5000", fingerprint: "fp-a" }]);

    // Logged in again without is_default: hostless images go to the hub again.
    await registryLogin(accept("reg.example:5000"), { stateDir: dir }, new KeyedMutex())({ registry: "reg.example:5000", username: "ci", password: "pw-1", fingerprint: "fp-a" }, c);
    expect(await pullPlan(dir, "team/app:2")).toEqual({ pull: "team/app:2", auth: null });

    // Logged out: the next pull is anonymous (the registry's refusal is the reason), the default forgotten.
    await registryLogin(accept("reg.example:5000"), { stateDir: dir }, new KeyedMutex())(
      { registry: "reg.example:5000", username: "ci", password: "pw-1", fingerprint: "fp-a", is_default: true },
      c,
    );
    await registryLogout({ stateDir: dir }, new KeyedMutex())({ registry: "reg.example:5000" }, c);
    expect(await pullPlan(dir, "reg.example:5000/team/app:2")).toEqual({ pull: "reg.example:5000/team/app:2", auth: null });
    expect(await pullPlan(dir, "team/app:2")).toEqual({ pull: "team/app:2", auth: null });
    expect(await loginStates(dir)).toEqual([]);
  });

  it("a login changed or removed by hand in config.json no longer reports its fingerprint (drift)", async () => {
    const dir = stateDir();
    const { c } = ctx();
    const h = registryLogin(engine({ username: "ci", password: "pw-1", serveraddress: "docker.io" }), { stateDir: dir }, new KeyedMutex());
    await h({ registry: "docker.io", username: "ci", password: "pw-1", fingerprint: "fp-hub" }, c);
    expect(await loginStates(dir)).toEqual([{ registry: "docker.io", fingerprint: "fp-hub" }]);
    const file = join(dir, "docker", "config.json");
    writeFileSync(file, JSON.stringify({ auths: {} }));
    expect(await loginStates(dir)).toEqual([{ registry: "docker.io", fingerprint: null }]);
    expect(await pullPlan(dir, "nginx:1.27")).toEqual({ pull: "nginx:1.27", auth: null });
  });
});
