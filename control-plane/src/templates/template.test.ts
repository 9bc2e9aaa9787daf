import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { parseCompose, rewriteCompose } from "../compose/index.js";
import { generateValues, withContainerPort, withoutScheme } from "./generate.js";
import { generate } from "./magic.js";
import { TemplateRenderError, renderTemplate } from "./render.js";
import { type ParsedTemplate, parseTemplate } from "./template.js";
import type { Template } from "./types.js";

const HEADER = "# documentation: https://example.org\n# slogan: An app.\n# tags: a,b\n# logo: svgs/app.svg\n# port: 3000\n\n";

const APP = `${HEADER}services:
  app:
    image: ghcr.io/example/app:2
    environment:
      - SERVICE_URL_APP_3000
      - PUBLIC_URL=\${SERVICE_URL_APP}
      - HOST=$SERVICE_FQDN_APP
      - DB=postgres://$SERVICE_USER_DB:\${SERVICE_PASSWORD_DB}@db:5432/\${DB_NAME:-app}
      - SECRET=\${SERVICE_BASE64_64_APP}
      - GREETING=\${GREETING}
      - SHELL_VAR=$$HOME
    depends_on:
      db:
        condition: service_healthy
    healthcheck:
      test: ["CMD", "wget", "-qO-", "http://127.0.0.1:3000/health"]
  db:
    image: postgres:16-alpine
    environment:
      POSTGRES_USER: $SERVICE_USER_DB
      POSTGRES_PASSWORD: $SERVICE_PASSWORD_DB
      POSTGRES_DB: \${DB_NAME:-app}
    volumes:
      - db-data:/var/lib/postgresql/data
    healthcheck:
      test: ["CMD-SHELL", "pg_isready -U $\${POSTGRES_USER}"]
volumes:
  db-data:
`;

function ok(parsed: ParsedTemplate): Template {
  if (!parsed.ok) throw new Error(`refused: ${parsed.reason}`);
  return parsed.template;
}
const reason = (parsed: ParsedTemplate) => (parsed.ok ? "" : parsed.reason);

describe("parseTemplate", () => {
  it("reads header, variables (each once, by kind) and services", () => {
    const t = ok(parseTemplate("app", APP));
    expect(t.header).toMatchObject({ slogan: "An app.", tags: ["a", "b"], port: 3000 });
    expect(t.variables.map((v) => [v.name, v.kind])).toEqual([
      ["SERVICE_URL_APP_3000", "domain"],
      ["SERVICE_URL_APP", "domain"],
      ["SERVICE_FQDN_APP", "domain"],
      ["SERVICE_USER_DB", "generated"],
      ["SERVICE_PASSWORD_DB", "generated"],
      ["DB_NAME", "input"],
      ["SERVICE_BASE64_64_APP", "generated"],
      ["GREETING", "input"],
    ]);
    expect(t.variables.find((v) => v.name === "DB_NAME")).toEqual({ kind: "input", name: "DB_NAME", default: "app", required: false });
    expect(t.services).toEqual([
      { name: "app", image: "ghcr.io/example/app:2", kind: "application", routable: true, port: 3000, path: null, excludeFromStatus: false },
      { name: "db", image: "postgres:16-alpine", kind: "database", routable: false, port: null, path: null, excludeFromStatus: false },
    ]);
    expect(t.primary).toBe("app");
  });

  it.each([
    ["a name that is not a template name", "App Name", APP, /template name "App Name"/],
    ["a missing slogan", "x", APP.replace("# slogan: An app.\n", ""), /# slogan: is missing/],
    ["broken YAML", "x", `${HEADER}services:\n  app: [\n`, /YAML/],
    ["no services", "x", `${HEADER}volumes: {}\n`, /services mapping/],
    ["an unknown magic variable", "x", APP.replace("${SERVICE_BASE64_64_APP}", "${SERVICE_SUPABASEANON_KONG}"), /SERVICE_SUPABASEANON_KONG is not a variable Capstan fills in/],
    ["a domain of no service", "x", APP.replace("- SERVICE_URL_APP_3000", "- SERVICE_URL_WEB_3000"), /SERVICE_URL_WEB_3000 names no service of this template/],
    ["a domain on a database", "x", APP.replace("POSTGRES_DB: ${DB_NAME:-app}", "POSTGRES_DB: ${DB_NAME:-app}\n      X: $SERVICE_URL_DB_5432"), /service db runs a database image .*databases get no domain/],
    ["a published host port (the compose checker's rule)", "x", APP.replace("    depends_on:", '    ports: ["8080:3000"]\n    depends_on:'), /publishing ports on the server is not supported/],
    ["a privileged service", "x", APP.replace("    depends_on:", "    privileged: true\n    depends_on:"), /privileged is refused/],
    ["a relative bind mount", "x", APP.replace("- db-data:/var/lib/postgresql/data", "- ./data:/var/lib/postgresql/data"), /relative and home-directory bind mounts are not supported/],
    ["a bad variable syntax", "x", APP.replace("${GREETING}", "${GREETING"), /unterminated/],
  ])("refuses %s with a reason", (_what, name, text, re) => {
    expect(reason(parseTemplate(name, text))).toMatch(re);
  });

  it("a routed service's port: its variable's, else the header's (first routed service), else its first exposed port, else 80", () => {
    const noPort = APP.replace("# port: 3000\n", "").replace("- SERVICE_URL_APP_3000", "- SERVICE_URL_APP");
    expect(ok(parseTemplate("x", noPort)).services[0]!.port).toBe(80);
    expect(ok(parseTemplate("x", noPort.replace("    depends_on:", '    expose: ["8080"]\n    depends_on:'))).services[0]!.port).toBe(8080);
    expect(ok(parseTemplate("x", APP.replace("- SERVICE_URL_APP_3000", "- SERVICE_URL_APP"))).services[0]!.port).toBe(3000);
    expect(ok(parseTemplate("x", APP.replace("# port: 3000", "# port: 4000"))).services[0]!.port).toBe(3000);
  });

  it("a variable in a volume is resolved before the check (the catalog writes ${VOLUME:-name})", () => {
    const t = ok(parseTemplate("x", APP.replace("- db-data:/var/lib/postgresql/data", "- ${DB_VOLUME:-db-data}:/var/lib/postgresql/data")));
    expect(t.variables.find((v) => v.name === "DB_VOLUME")).toMatchObject({ default: "db-data" });
  });

  it("a required input makes the template valid but the service undeployable until it is set", () => {
    const t = ok(parseTemplate("x", APP.replace("${GREETING}", "${GREETING:?set a greeting}")));
    const g = generateValues(t, {}, { app: "https://a.example.com" });
    expect(g.missing).toEqual(["GREETING"]);
    expect(() => renderTemplate(t, g.values)).toThrow(TemplateRenderError);
    expect(() => renderTemplate(t, g.values)).toThrow(/GREETING is required: set a greeting/);
    expect(renderTemplate(t, { ...g.values, GREETING: "hi" }).compose).toContain("GREETING: hi");
  });

  it("the catalog's exclude_from_hc marks a service out of the status and never reaches compose", () => {
    const t = ok(parseTemplate("x", APP.replace("    image: postgres:16-alpine", "    image: postgres:16-alpine\n    exclude_from_hc: true")));
    expect(t.services.map((s) => [s.name, s.excludeFromStatus])).toEqual([["app", false], ["db", true]]);
    const g = generateValues(t, {}, { app: "https://a.example.com" });
    expect(renderTemplate(t, g.values).compose).not.toContain("exclude_from_hc");
    expect(reason(parseTemplate("x", APP.replace("    image: postgres:16-alpine", "    image: postgres:16-alpine\n    exclude_from_hc: yes")))).toMatch(/services\.db\.exclude_from_hc: use true or false/);
  });

  it("the catalog's file volumes (content:) are reported; is_directory is dropped before the compose checks", () => {
    const withContent = APP.replace("      - db-data:/var/lib/postgresql/data", "      - db-data:/var/lib/postgresql/data\n      - type: bind\n        source: ./init.sql\n        target: /docker-entrypoint-initdb.d/init.sql\n        content: |\n          select 1;");
    expect(reason(parseTemplate("x", withContent))).toMatch(/services\.db\.volumes: files written from the template \(content:\) are not supported yet/);
    const withDirectory = APP.replace("      - db-data:/var/lib/postgresql/data", "      - type: volume\n        source: db-data\n        target: /var/lib/postgresql/data\n        is_directory: true");
    const t = ok(parseTemplate("x", withDirectory));
    expect(renderTemplate(t, generateValues(t, {}, { app: "https://a.example.com" }).values).compose).not.toMatch(/is_?[dD]irectory/);
  });

  it("an environment that is neither a list nor a map reaches the compose checker, which refuses it", () => {
    expect(reason(parseTemplate("x", APP.replace(/    environment:\n      POSTGRES_USER[^]*?POSTGRES_DB: \$\{DB_NAME:-app\}\n/, "    environment: FOO\n")))).toMatch(/services\.db\.environment/);
  });

  it("SERVICE_FQDN_<PORT> is the domain of the service that uses it; used by two services it is refused", () => {
    const own = `${HEADER}services:\n  kuma:\n    image: louislam/uptime-kuma:1\n    environment:\n      - SERVICE_FQDN_3001\n    volumes:\n      - data:/app/data\nvolumes:\n  data:\n`;
    const t = ok(parseTemplate("kuma", own));
    expect(t.services[0]).toMatchObject({ name: "kuma", routable: true, port: 3001 });
    expect(generateValues(t, {}, { kuma: "https://k.example.com" }).values).toEqual({ SERVICE_FQDN_3001: "k.example.com:3001" });
    const shared = own.replace("    volumes:\n      - data:/app/data\n", "    volumes:\n      - data:/app/data\n  other:\n    image: nginx:1.27\n    environment:\n      - X=$SERVICE_FQDN_3001\n");
    expect(reason(parseTemplate("kuma", shared))).toMatch(/SERVICE_FQDN_3001 is used by several services \(kuma, other\)/);
  });

  it("named volumes the catalog leaves undeclared are declared in the rendered file", () => {
    const t = ok(parseTemplate("x", APP.replace("volumes:\n  db-data:\n", "").replace("    healthcheck:\n      test: [\"CMD\", \"wget\"", "    volumes:\n      - type: volume\n        source: app-data\n        target: /data\n      - /srv/app:/srv\n    healthcheck:\n      test: [\"CMD\", \"wget\"")));
    const doc = parseCompose(renderTemplate(t, generateValues(t, {}, { app: "https://a.example.com" }).values).compose);
    expect(doc.volumes.map((v) => v.name).sort()).toEqual(["app-data", "db-data"]);
  });

  it("the catalog's path form SERVICE_FQDN_X=/path gives the route a path", () => {
    const t = ok(parseTemplate("x", APP.replace("- SERVICE_URL_APP_3000", "- SERVICE_URL_APP_3000=/app")));
    expect(t.services[0]).toMatchObject({ routable: true, port: 3000, path: "/app" });
  });
});

describe("generateValues: created once, then byte-identical", () => {
  const t = ok(parseTemplate("app", APP));
  const domains = { app: "https://app.example.com" };

  it("creates every missing secret and default, and reports what it created", () => {
    const g = generateValues(t, {}, domains);
    expect(g.created.sort()).toEqual(["DB_NAME", "SERVICE_BASE64_64_APP", "SERVICE_PASSWORD_DB", "SERVICE_USER_DB"]);
    expect(g.values.SERVICE_PASSWORD_DB).toMatch(/^[A-Za-z0-9]{32}$/);
    expect(g.values.SERVICE_USER_DB).toMatch(/^[A-Za-z0-9]{16}$/);
    expect(g.values.SERVICE_BASE64_64_APP).toMatch(/^[A-Za-z0-9]{64}$/);
    expect(g.values.DB_NAME).toBe("app");
    expect(g.values).not.toHaveProperty("GREETING");
    expect(g.missing).toEqual([]);
  });

  it("stored values come back byte for byte across redeploys (and generation never touches them)", () => {
    const first = generateValues(t, {}, domains);
    const stored = Object.fromEntries(first.created.map((k) => [k, first.values[k]!]));
    for (let i = 0; i < 5; i++) {
      const again = generateValues(t, stored, domains);
      expect(again.created).toEqual([]);
      for (const [k, v] of Object.entries(stored)) expect(Buffer.from(again.values[k]!)).toEqual(Buffer.from(v));
      expect(renderTemplate(t, again.values).compose).toBe(renderTemplate(t, first.values).compose);
    }
  });

  it("a value the user changed wins over generation; only the still-missing ones are created", () => {
    const g = generateValues(t, { SERVICE_PASSWORD_DB: "mine$${X}", DB_NAME: "other" }, domains);
    expect(g.values.SERVICE_PASSWORD_DB).toBe("mine$${X}");
    expect(g.values.DB_NAME).toBe("other");
    expect(g.created.sort()).toEqual(["SERVICE_BASE64_64_APP", "SERVICE_USER_DB"]);
  });

  it("FQDN and URL follow the current domain, whatever was stored", () => {
    const stale = { SERVICE_URL_APP: "https://old.example.com", SERVICE_FQDN_APP: "old.example.com" };
    const g = generateValues(t, stale, { app: "https://new.example.com" });
    expect(g.values.SERVICE_URL_APP).toBe("https://new.example.com");
    expect(g.values.SERVICE_FQDN_APP).toBe("new.example.com");
    expect(g.values.SERVICE_URL_APP_3000).toBe("https://new.example.com:3000");
    expect(g.created).not.toContain("SERVICE_URL_APP");
  });

  it("a routable service without a domain has empty FQDN/URL values and is reported", () => {
    const g = generateValues(t, {}, {});
    expect(g.values.SERVICE_URL_APP).toBe("");
    expect(g.unrouted).toEqual(["app"]);
  });

  it("withoutScheme and withContainerPort", () => {
    expect(withoutScheme("https://a.example.com/x")).toBe("a.example.com/x");
    expect(withContainerPort("https://a.example.com/x", 3000)).toBe("https://a.example.com:3000/x");
    expect(withContainerPort("http://a.example.com:8443", 3000)).toBe("http://a.example.com:3000");
  });
});

describe("renderTemplate", () => {
  const t = ok(parseTemplate("app", APP));
  const base = generateValues(t, {}, { app: "https://app.example.com" }).values;

  /** The environment the container of `service` gets after the deploy rewrite. */
  function containerEnv(compose: string, service: string): Record<string, string> {
    const rewritten = rewriteCompose(parseCompose(compose), {
      appUuid: "svc1",
      appName: "svc",
      deploymentUuid: "dep1",
      network: "capstan",
      routes: [],
      port: null,
      env: {},
      rollout: 1,
    });
    // The rewritten file escapes `$` once more; compose reads `$$` as `$`.
    const doc = parseYaml(rewritten) as { services: Record<string, { environment: Record<string, string> }> };
    return Object.fromEntries(Object.entries(doc.services[`svc1-${service}`]!.environment).map(([k, v]) => [k, v.split("$$").join("$")]));
  }

  it("resolves every variable, keeps the template's $$ literal, passes the compose checker", () => {
    const r = renderTemplate(t, base);
    const env = containerEnv(r.compose, "app");
    expect(env.PUBLIC_URL).toBe("https://app.example.com");
    expect(env.HOST).toBe("app.example.com");
    expect(env.SERVICE_URL_APP_3000).toBe("https://app.example.com:3000");
    expect(env.DB).toBe(`postgres://${base.SERVICE_USER_DB}:${base.SERVICE_PASSWORD_DB}@db:5432/app`);
    expect(env.SHELL_VAR).toBe("$HOME");
    expect(env.GREETING).toBe("");
    const doc = parseCompose(r.compose);
    expect(doc.publicService).toBe("app");
    expect(doc.services.find((s) => s.name === "db")!.healthcheck!.test).toEqual(["CMD-SHELL", "pg_isready -U $${POSTGRES_USER}"]);
  });

  it.each([
    "p$ss", "${HOME}", "a$$b", "$(id)", "`id`", "x: y # z", "'\"", "line1\nline2", "${X:-y}$", "$",
    // YAML's indicators and plain scalars that would change type
    "!tag", "&anchor", "*alias", "- item", "? key", "| block", "> fold", "{a: 1}", "[1]", "@x", "%x", "#c", " lead", "trail ", "null", "true", "0x1F", "1e3", "~", "",
  ])("a value %j arrives in the container unchanged", (value) => {
    const r = renderTemplate(t, { ...base, SERVICE_PASSWORD_DB: value, GREETING: value });
    const env = containerEnv(r.compose, "app");
    expect(env.GREETING).toBe(value);
    expect(containerEnv(r.compose, "db").POSTGRES_PASSWORD).toBe(value);
    expect(env.DB).toBe(`postgres://${base.SERVICE_USER_DB}:${value}@db:5432/app`);
  });

  it("generated passwords with symbols arrive unchanged (200 random ones)", () => {
    for (let i = 0; i < 200; i++) {
      const value = generate(i % 2 ? "PASSWORDWITHSYMBOLS" : "PASSWORDWITHSYMBOLS_64");
      expect(containerEnv(renderTemplate(t, { ...base, SERVICE_PASSWORD_DB: value }).compose, "db").POSTGRES_PASSWORD).toBe(value);
    }
  });

  it("applies image overrides after resolving, and lists the variables with their values", () => {
    const r = renderTemplate(t, base, { imageOverrides: { postgres: "capstan-test/postgres:16" } });
    expect(parseCompose(r.compose).services.map((s) => s.image)).toEqual(["ghcr.io/example/app:2", "capstan-test/postgres:16"]);
    expect(r.env).toContainEqual({ key: "SERVICE_PASSWORD_DB", value: base.SERVICE_PASSWORD_DB, kind: "generated" });
    expect(r.env).toContainEqual({ key: "SERVICE_URL_APP", value: "https://app.example.com", kind: "domain" });
    expect(r.env).toContainEqual({ key: "GREETING", value: null, kind: "input" });
  });

  it("a bare name without a value is left out, as compose does with an unset variable", () => {
    const t2 = ok(parseTemplate("x", APP.replace("      - SHELL_VAR=$$HOME", "      - SHELL_VAR=$$HOME\n      - PASSED_THROUGH")));
    expect(containerEnv(renderTemplate(t2, base).compose, "app")).not.toHaveProperty("PASSED_THROUGH");
    expect(containerEnv(renderTemplate(t2, { ...base, PASSED_THROUGH: "v$1" }).compose, "app").PASSED_THROUGH).toBe("v$1");
  });

  it("the template text keeps its references: secrets appear in the rendered file only", () => {
    expect(t.text).toContain("${SERVICE_PASSWORD_DB}");
    expect(t.text).not.toContain(base.SERVICE_PASSWORD_DB);
  });
});
