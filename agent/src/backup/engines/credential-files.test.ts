import { describe, expect, it } from "vitest";
import { clientConfig } from "./clickhouse.js";
import { optionFile, optionValue } from "./mysql.js";
import { pgpassLine } from "./postgres.js";

/**
 * The credential files' contents. That the tools read them back as the same password is shown
 * end to end (test/e2e/agent-backups.test.ts backs up and restores every engine with a password
 * holding quotes, a backslash, a space, `#` and `$`); these pin the quoting rules themselves.
 */
describe("credential files of the backup tools", () => {
  it("pgpass: one line matching any connection; `\\` and `:` escaped; no line break possible", () => {
    expect(pgpassLine("plain")).toBe("*:*:*:*:plain\n");
    expect(pgpassLine("a:b\\c")).toBe("*:*:*:*:a\\:b\\\\c\n");
    expect(() => pgpassLine("a\nb")).toThrow(/line break/);
  });

  it("mysql option file: [client] password in double quotes, escaped for the option-file reader", () => {
    expect(optionValue(`p"w'\\ #x`)).toBe(`"p\\"w\\'\\\\ #x"`);
    expect(optionValue("a\nb\tc")).toBe('"a\\nb\\tc"');
    // The root password when there is one (the dump runs as root).
    expect(optionFile({ user: "app", password: "user-pw", database: "db", root_password: "root-pw" }).content).toBe('[client]\npassword="root-pw"\n');
    expect(optionFile({ user: "app", password: "user-pw", database: "db", root_password: null }).content).toBe('[client]\npassword="user-pw"\n');
  });

  it("clickhouse client config: user and password as XML text; control characters refused", () => {
    expect(clientConfig({ user: "admin", password: `<&>"'`, database: "db", root_password: null }).content).toBe(
      "<config><user>admin</user><password>&lt;&amp;&gt;&quot;&apos;</password></config>\n",
    );
    expect(clientConfig({ user: null, password: "x", database: null, root_password: null }).content).toContain("<user>default</user>");
    expect(() => clientConfig({ user: "admin", password: "a\u0001b", database: null, root_password: null })).toThrow(/control characters/);
  });
});
