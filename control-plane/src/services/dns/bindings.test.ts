import { describe, expect, it } from "vitest";
import { bindHost, type BindingContext } from "./bindings.js";

const outer = { id: 1, name: "example.com" };
const inner = { id: 2, name: "apps.example.com" };
const other = { id: 3, name: "other.com" };
const ctx = (over: Partial<BindingContext<typeof outer>> = {}): BindingContext<typeof outer> => ({ domains: [outer, inner, other], pins: new Map(), bindings: [], ...over });
const prod = { id: 10, name: "production" };
const preview = { id: 11, name: "Preview" };

describe("bindHost", () => {
  it("the most specific covering domain; a name no domain covers is unbound", () => {
    expect(bindHost("web.apps.example.com", prod, ctx())).toEqual({ domain: inner, binding: "suffix_match" });
    expect(bindHost("apps.example.com", prod, ctx())).toEqual({ domain: inner, binding: "suffix_match" });
    expect(bindHost("www.example.com", prod, ctx())).toEqual({ domain: outer, binding: "suffix_match" });
    expect(bindHost("xapps.example.com", prod, ctx())).toEqual({ domain: outer, binding: "suffix_match" });
    expect(bindHost("example.org", prod, ctx())).toBeNull();
  });

  it("a pin wins when its domain covers the name, and is ignored otherwise", () => {
    expect(bindHost("web.apps.example.com", prod, ctx({ pins: new Map([["web.apps.example.com", 1]]) }))).toEqual({ domain: outer, binding: "override" });
    expect(bindHost("web.apps.example.com", prod, ctx({ pins: new Map([["web.apps.example.com", 3]]) }))).toEqual({ domain: inner, binding: "suffix_match" });
  });

  it("environment bindings: by role (the environment's name, any case) or id, highest priority, id before role on a tie, covering domains only", () => {
    const role = { id: 1, dnsDomainId: 1, environmentId: null, environmentRole: "preview", priority: 0 };
    expect(bindHost("pr.apps.example.com", preview, ctx({ bindings: [role] }))).toEqual({ domain: outer, binding: "environment_binding" });
    expect(bindHost("pr.apps.example.com", prod, ctx({ bindings: [role] }))).toEqual({ domain: inner, binding: "suffix_match" });
    const byId = { id: 2, dnsDomainId: 2, environmentId: 11, environmentRole: null, priority: 0 };
    expect(bindHost("pr.apps.example.com", preview, ctx({ bindings: [role, byId] }))).toEqual({ domain: inner, binding: "environment_binding" });
    expect(bindHost("pr.apps.example.com", preview, ctx({ bindings: [{ ...role, priority: 5 }, byId] }))).toEqual({ domain: outer, binding: "environment_binding" });
    const elsewhere = { id: 3, dnsDomainId: 3, environmentId: null, environmentRole: "preview", priority: 100 };
    expect(bindHost("pr.apps.example.com", preview, ctx({ bindings: [elsewhere] }))).toEqual({ domain: inner, binding: "suffix_match" });
    // A pin beats every binding.
    expect(bindHost("pr.apps.example.com", preview, ctx({ bindings: [role], pins: new Map([["pr.apps.example.com", 2]]) }))).toEqual({ domain: inner, binding: "override" });
  });
});
