import { bareName, type DnsProvider, type DnsRecord, type RecordData } from "./providers/types.js";

/**
 * Plan, then apply (issue 21, "Safety"). Every name Capstan routes carries an ownership marker:
 * a TXT record at a sibling name (`_capstan.<name>`, or `_capstan-wildcard.<parent>` for
 * `*.<parent>`: a label after "*" would make the wildcard literal) whose text names the owner
 * (the managed domain). The marker sits at its own name because a CNAME may not share its name
 * with any other record. A record at a name without our marker is somebody else's: the plan
 * never changes or deletes it and reports it as drift instead. Markers are created before the
 * records they cover and deleted after them, so a reconcile cut short never leaves a record of
 * ours without its marker (which would then look foreign forever).
 */

const ROUTING_TYPES = new Set(["A", "AAAA", "CNAME"]);

export function markerName(name: string): string {
  const n = bareName(name);
  return n.startsWith("*.") ? `_capstan-wildcard.${n.slice(2)}` : `_capstan.${n}`;
}

export function markerText(owner: string): string {
  return `capstan-owner=${owner}`;
}

export interface Drift {
  name: string;
  type: string;
  content: string;
  reason: string;
}

export interface Plan {
  creates: RecordData[];
  updates: { existing: DnsRecord; record: RecordData }[];
  deletes: DnsRecord[];
  /** Records in the way that are not ours: left as they are. */
  drift: Drift[];
}

export function isEmptyPlan(p: Plan): boolean {
  return !p.creates.length && !p.updates.length && !p.deletes.length;
}

/**
 * The diff between what the zone holds and what `owner` wants in it. `desired` are routing
 * records (A, AAAA, CNAME); `current` is the zone as listed. Names `owner` marked earlier that
 * are no longer desired lose their records and then their marker.
 */
export function planZone(current: DnsRecord[], desired: RecordData[], owner: string, markerTtl = 300): Plan {
  const plan: Plan = { creates: [], updates: [], deletes: [], drift: [] };
  const text = markerText(owner);
  const markers = current.filter((r) => r.type === "TXT" && r.content === text);
  const owned = new Set(markers.map((m) => m.name));
  const routingAt = (name: string) => current.filter((r) => r.name === name && ROUTING_TYPES.has(r.type));
  const byName = new Map<string, RecordData[]>();
  for (const d of desired) {
    const name = bareName(d.name);
    byName.set(name, [...(byName.get(name) ?? []), { ...d, name }]);
  }

  const markerCreates: RecordData[] = [];
  for (const [name, wanted] of byName) {
    const here = routingAt(name);
    if (!owned.has(markerName(name))) {
      if (here.length) {
        for (const r of here) plan.drift.push({ name, type: r.type, content: r.content, reason: "The name already has a record Capstan did not create (no ownership marker); it is left as it is." });
        continue;
      }
      markerCreates.push({ name: markerName(name), type: "TXT", content: text, ttl: markerTtl });
      plan.creates.push(...wanted);
      continue;
    }
    const left = [...here];
    for (const w of wanted) {
      const same = left.findIndex((r) => r.type === w.type && r.content === w.content);
      if (same >= 0) {
        const [r] = left.splice(same, 1);
        if (r!.ttl !== w.ttl) plan.updates.push({ existing: r!, record: w });
        continue;
      }
      const sameType = left.findIndex((r) => r.type === w.type);
      if (sameType >= 0) {
        const [r] = left.splice(sameType, 1);
        plan.updates.push({ existing: r!, record: w });
      } else {
        plan.creates.push(w);
      }
    }
    // Ours, at a name we still route, but no longer wanted (an AAAA after the address changed family).
    plan.deletes.push(...left);
  }
  plan.creates.unshift(...markerCreates);

  // Names we marked that nothing routes any more: their records, then the marker.
  const desiredMarkers = new Set([...byName.keys()].map(markerName));
  const goneMarkers: DnsRecord[] = [];
  for (const m of markers) {
    if (desiredMarkers.has(m.name)) continue;
    const routed = current.filter((r) => ROUTING_TYPES.has(r.type) && markerName(r.name) === m.name);
    plan.deletes.push(...routed);
    goneMarkers.push(m);
  }
  plan.deletes.push(...goneMarkers);
  return plan;
}

/** Applies a plan in its order (markers first on create, last on delete). */
export async function applyPlan(provider: DnsProvider, zone: string, plan: Plan): Promise<void> {
  for (const r of plan.creates) await provider.createRecord(zone, r);
  for (const u of plan.updates) await provider.updateRecord(zone, u.existing, u.record);
  for (const r of plan.deletes) await provider.deleteRecord(zone, r);
}
