import { useEffect, useState } from "preact/hooks";
import type { Feature, Member } from "@capstan/shared";
import { apiGet } from "./api.js";

/**
 * What each paid feature covers (docs/features.md). Typed by the shared enum, so a feature added
 * there fails the build until it is named here (importing FEATURES would bundle zod: 50 KB).
 */
const COVERS: Record<Feature, string> = {
  REGISTRY_MANAGEMENT: "Registries",
  CLUSTER_MANAGEMENT: "Clusters",
  DNS_PROVIDER_MANAGEMENT: "DNS (every DNS endpoint)",
  DNS_MULTI_DOMAIN: "DNS Pro: several providers, domain assignment",
  DNS_ENV_BINDINGS: "DNS Pro: environment bindings of domains",
  PROXY_LABEL_OVERRIDES: "Proxy label overrides of template services",
};
const FEATURES = Object.keys(COVERS) as Feature[];

interface CurrentTeam {
  id: number;
  name: string;
  features: Feature[];
}

/** The team: its members and their roles (read-only: the CLI changes them), and its paid features. */
export function Team() {
  const [team, setTeam] = useState<CurrentTeam | null>(null);
  const [members, setMembers] = useState<Member[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    Promise.all([apiGet<CurrentTeam>("/teams/current"), apiGet<{ data: Member[] }>("/teams/current/members?per_page=100")]).then(
      ([t, m]) => {
        setTeam(t);
        setMembers(m.data);
      },
      (e: Error) => setError(e.message),
    );
  }, []);
  return (
    <section aria-labelledby="team-title">
      <div class="heading">
        <h1 id="team-title">Team{team ? `: ${team.name}` : ""}</h1>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {members && (
        <section class="group" aria-labelledby="members-title">
          <h2 id="members-title">Members</h2>
          <p class="muted">
            Roles are changed by an instance administrator with <code>capstan member add</code> / <code>capstan member remove</code>.
          </p>
          <ul class="cards" aria-label="Members">
            {members.map((m) => (
              <li class="card member" key={m.id} data-id={m.id}>
                <div class="server-head">
                  <h3>{m.name}</h3>
                  <span class="badge role">{m.role}</span>
                </div>
                <p class="muted">{m.email}</p>
              </li>
            ))}
          </ul>
        </section>
      )}
      {team && (
        <section class="group" aria-labelledby="features-title">
          <h2 id="features-title">Paid features</h2>
          <ul class="cards" aria-label="Paid features">
            {FEATURES.map((f) => {
              const on = team.features.includes(f);
              return (
                <li class="card feature" key={f} data-feature={f} data-enabled={String(on)}>
                  <div class="server-head">
                    <h3>{COVERS[f]}</h3>
                    <span class={`badge ${on ? "reachable" : "pending"}`}>{on ? "enabled" : "not enabled"}</span>
                  </div>
                  <p class="muted">
                    <code>{f}</code>
                    {on ? "" : ": not in this team's plan; its API answers 402 (Payment Required). An instance administrator enables it with "}
                    {!on && <code>capstan team features --team {team.id} --enable {f}</code>}
                  </p>
                </li>
              );
            })}
          </ul>
        </section>
      )}
    </section>
  );
}
