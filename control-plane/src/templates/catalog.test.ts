import { readFileSync } from "node:fs";
import { TemplateSummary } from "@capstan/shared";
import { describe, expect, it } from "vitest";
import { repoPath } from "../lib/paths.js";
import { parseCompose, rewriteCompose } from "../compose/index.js";
import { BUILT_IN_CATALOG_DIR, builtInCatalog } from "./catalog.js";
import { generateValues } from "./generate.js";
import { renderTemplate } from "./render.js";
import { templateSummary } from "./template.js";
import { environmentEntries } from "./variables.js";

/** Variables that hold credentials: their values must come from generated values. */
const SECRET_KEY = /(PASSWORD|PASSWD|PASS|SECRET|SECRET_KEY|ENCRYPTION_KEY|_TOKEN|AUTH_KEY|_KEY_BASE)$/i;

/**
 * The built-in catalog (control-plane/templates/): every template parses, passes the checks,
 * generates its values, renders to a compose file the compose checker and the deploy rewrite
 * accept, and has something to browse to.
 */

const catalog = await builtInCatalog();
const names = catalog.templates.map((t) => t.name);

describe("the built-in catalog", () => {
  it("is read from control-plane/templates of the checkout, every file loads", () => {
    expect(BUILT_IN_CATALOG_DIR).toMatch(/control-plane\/templates$/);
    expect(catalog.broken).toEqual([]);
    expect(catalog.ignored).toEqual([]);
    expect(catalog.templates.length).toBeGreaterThanOrEqual(30);
  });

  it("covers the categories users look for", () => {
    const categories = new Set(catalog.templates.map((t) => t.header.category));
    for (const c of ["analytics", "automation", "cms", "monitoring", "git", "chat", "storage", "wiki", "security", "dashboard"]) expect(categories, c).toContain(c);
  });

  it("is listed in docs/templates.md, each template once", () => {
    const table = readFileSync(repoPath("docs", "templates.md"), "utf8").split("## The built-in catalog")[1]!;
    const rows = table.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| Category"));
    const listed = rows.flatMap((r) => [...r.split("|")[2]!.matchAll(/`([a-z0-9._-]+)`/g)].map((m) => m[1]!));
    expect(listed.sort()).toEqual([...names].sort());
  });

  it("is loaded once per process", async () => {
    expect(await builtInCatalog()).toBe(catalog);
  });
});

describe.each(names)("built-in template %s", (name) => {
  const t = catalog.templates.find((x) => x.name === name)!;

  it("has a complete header, and its summary is what the shared schema describes", () => {
    expect(TemplateSummary.parse(templateSummary(t))).toEqual(templateSummary(t));
    expect(templateSummary(t)).toMatchObject({ name, slogan: t.header.slogan, logo: null });
    expect(t.header.slogan.length).toBeGreaterThan(10);
    expect(t.header.documentation).toMatch(/^https:\/\//);
    expect(t.header.tags.length).toBeGreaterThan(0);
    expect(t.header.category).toBeTruthy();
  });

  it("has a routable application with a port, pinned images, health checks on every service", () => {
    const routable = t.services.filter((s) => s.kind === "application" && s.routable);
    expect(routable.length).toBeGreaterThan(0);
    for (const s of routable) expect(s.port, s.name).toBeGreaterThan(0);
    for (const s of t.services) {
      const tag = /:([^/@]+)$/.exec(s.image)?.[1];
      expect(tag, `${s.name}: ${s.image} names a tag`).toBeTruthy();
      expect(tag, `${s.name}: ${s.image} is pinned`).not.toMatch(/^(latest|main|master|stable|nightly)$/);
      const hc = t.data.services[s.name]!.healthcheck as { test?: unknown; disable?: boolean } | undefined;
      expect(hc?.test, `${s.name} has a health check`).toBeTruthy();
    }
  });

  it("keeps its data in named volumes; no literal secret, databases authenticate with generated values", () => {
    expect(Object.keys((t.data.volumes as object | undefined) ?? {}).length).toBeGreaterThan(0);
    expect(t.variables.filter((v) => v.kind === "input" && v.required)).toEqual([]);
    const generated = t.variables.filter((v) => v.kind === "generated").map((v) => v.name);
    for (const s of t.services) {
      for (const [key, value] of environmentEntries(t.data.services[s.name]!.environment)) {
        if (SECRET_KEY.test(key) && value !== null) expect(value, `${s.name}: ${key}`).toMatch(/\$\{?SERVICE_/);
      }
      if (s.kind === "database") {
        const text = JSON.stringify(t.data.services[s.name]);
        expect(generated.some((g) => text.includes(g)), `${s.name} uses a generated password`).toBe(true);
      }
    }
  });

  it("generates, renders, and passes the compose checker and the deploy rewrite", () => {
    const domains = Object.fromEntries(t.services.filter((s) => s.routable).map((s) => [s.name, `https://${s.name}.example.com`]));
    const g = generateValues(t, {}, domains);
    expect(g.missing).toEqual([]);
    expect(g.unrouted).toEqual([]);
    for (const v of t.variables) if (v.kind === "generated") expect(g.values[v.name], v.name).toBeTruthy();
    const r = renderTemplate(t, g.values);
    const doc = parseCompose(r.compose);
    expect(doc.publicService).toBe(t.primary);
    const primary = t.services.find((s) => s.name === t.primary)!;
    const rewritten = rewriteCompose(doc, {
      appUuid: "svc1",
      appName: name,
      deploymentUuid: "dep1",
      network: "capstan",
      routes: [{ host: `${primary.name}.example.com`, path: "/", https: true }],
      port: primary.port,
      env: {},
      rollout: 1,
    });
    expect(rewritten.length).toBeGreaterThan(0);
    // Stored values render byte-identically on the next deploy.
    const stored = Object.fromEntries(g.created.map((k) => [k, g.values[k]!]));
    expect(renderTemplate(t, generateValues(t, stored, domains).values).compose).toBe(r.compose);
  });
});
