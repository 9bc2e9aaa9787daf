import { describe, expect, it } from "vitest";
import { Invalid } from "../domain/errors.js";
import { parseCompose } from "./parse.js";

function reasons(raw: string): string[] {
  try {
    parseCompose(raw);
  } catch (err) {
    expect(err).toBeInstanceOf(Invalid);
    return (err as Invalid).errors.docker_compose_raw ?? [];
  }
  throw new Error(`accepted:\n${raw}`);
}

describe("the refusal of networks says where services are placed, whatever the isolation mode", () => {
  it("a service's networks: the application's own network and its primary network (the environment's, or the destination's); the proxy network for the public service only", () => {
    const [reason] = reasons("services:\n  web:\n    image: nginx:1.27\n    networks: [other]\n");
    expect(reason).toMatch(/^services\.web\.networks is refused: the platform manages networks: every service joins the application's own network \(where services reach each other by service name\)/);
    expect(reason).toContain("the application's primary network (its environment's network with environment isolation, else the server's destination network)");
    expect(reason).toContain("only the public service joins the proxy network under proxy isolation");
    expect(reason).toContain("attach a shared network to the application");
    // Under isolation services are not on the server's destination network: never said so unqualified.
    expect(reason).not.toMatch(/and the server's destination network/);
  });

  it("top-level networks: the same placement", () => {
    const all = reasons("services:\n  web:\n    image: nginx:1.27\nnetworks:\n  other:\n    external: true\n");
    const reason = all.find((r) => r.includes("networks is refused"));
    expect(reason).toContain("every service joins the application's own network and the application's primary network (its environment's network with environment isolation, else the server's destination network)");
    expect(reason).not.toMatch(/and the server's destination network/);
  });
});
