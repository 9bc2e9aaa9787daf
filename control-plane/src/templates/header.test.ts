import { describe, expect, it } from "vitest";
import { parseHeader } from "./header.js";

const HEADER = [
  "# documentation: https://example.org/docs",
  "# slogan: A fine app.",
  "# category: analytics",
  "# tags: Analytics, privacy,  , web",
  "# logo: svgs/app.svg",
  "# port: 3000",
  "",
  "services:",
  "  app:",
  "    image: nginx:1.27",
].join("\n");

describe("parseHeader: the catalog's leading comment lines", () => {
  it("reads every key; tags split, trimmed, lowercased; port a number", () => {
    const r = parseHeader(HEADER);
    expect(r).toEqual({
      ok: true,
      header: { documentation: "https://example.org/docs", slogan: "A fine app.", category: "analytics", tags: ["analytics", "privacy", "web"], logo: "svgs/app.svg", port: 3000 },
    });
  });

  it("ignore: true is read; unknown keys and free comments are skipped; the header ends at the first content line", () => {
    const r = parseHeader(`# documentation: https://x.org\n# minversion: 4.0.0\n# just a comment\n# slogan: S\n# ignore: true\nservices: {}\n# port: nope\n`);
    expect(r).toEqual({ ok: true, header: { documentation: "https://x.org", slogan: "S", tags: [], ignore: true } });
  });

  it("one pair of surrounding quotes is not part of a value (the catalog quotes some slogans)", () => {
    const r = parseHeader(`# documentation: https://x.org\n# slogan: "Fast: and 'simple'."\n# tags: 'a, b'\n`);
    expect(r).toEqual({ ok: true, header: { documentation: "https://x.org", slogan: "Fast: and 'simple'.", tags: ["a", "b"] } });
  });

  it("empty optional values count as absent", () => {
    expect(parseHeader("# documentation: https://x.org\n# slogan: S\n# logo:\n# tags:\n")).toEqual({ ok: true, header: { documentation: "https://x.org", slogan: "S", tags: [] } });
  });

  it.each([
    ["# slogan: S\n", /# documentation: is missing/],
    ["# documentation: https://x.org\n", /# slogan: is missing/],
    ["# documentation: ftp://x.org\n# slogan: S\n", /documentation: Use an http\(s\) URL/],
    ["# documentation: https://x.org\n# slogan: S\n# port: 99999\n", /port: Ports are 1-65535/],
    ["# documentation: https://x.org\n# slogan: S\n# port: http\n", /port: Use a container port number/],
    ["# documentation: https://x.org\n# slogan: S\n# logo: ../../etc/passwd\n", /logo: A relative logo path must not contain '\.\.'/],
    ["# documentation: https://x.org\n# slogan: S\n# ignore: maybe\n", /ignore: Use true or false/],
    ["# documentation: https://x.org\n# slogan: S\n# slogan: T\n", /slogan is given twice/],
  ])("refuses %j with a reason", (text, reason) => {
    const r = parseHeader(text);
    expect(r.ok).toBe(false);
    expect(r.ok ? "" : r.problems.join("; ")).toMatch(reason);
  });
});
