import { useEffect, useState } from "preact/hooks";
import { io } from "socket.io-client";
import type { ConnectivityHistory, ServerListItem, ServerStatus, ServerStatusEvent, TeamRole } from "@capstan/shared";
import { apiGet, apiToken } from "./api.js";
import { canAddServers, EmptyFleet, JoinPanel, ShowJoinCommand, type JoinCommand } from "./join.js";

interface ServerRow {
  uuid: string;
  name: string;
  ip: string;
  status: ServerStatus;
  lastSeenAt: string | null;
  agentVersion: string | null;
  engineVersion: string | null;
  resources: number;
}

interface ServerDetailBody {
  engine: { version: string | null };
  agent: { version: string | null; last_seen_at: string | null };
}

/** The agent's connectivity in the words the issue uses. */
export const CONNECTIVITY: Record<ServerStatus, string> = { reachable: "connected", unreachable: "unreachable", pending: "never seen" };

function ago(iso: string | null, now: number): string {
  if (!iso) return "never";
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h ago`;
  return `${Math.floor(s / 86_400)} d ago`;
}

/** A length of time in the largest units that matter: "45 s", "3 min 20 s", "2 h 5 min", "3 d 4 h". */
export function span(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  if (s < 86_400) return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ""}`;
  return `${Math.floor(s / 86_400)} d${Math.floor((s % 86_400) / 3600) ? ` ${Math.floor((s % 86_400) / 3600)} h` : ""}`;
}

const when = (iso: string) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });

/**
 * A server's connectivity history (GET /servers/{uuid}/connectivity): when its agent connected
 * and dropped, for how long, newest first. Read again when the server's status changes (`version`).
 */
function History({ uuid, name, version }: { uuid: string; name: string; version: string }) {
  const [periods, setPeriods] = useState<ConnectivityHistory["data"] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let gone = false;
    apiGet<ConnectivityHistory>(`/servers/${encodeURIComponent(uuid)}/connectivity?limit=20`).then(
      (h) => !gone && (setPeriods(h.data), setError(null)),
      (err: Error) => !gone && setError(err.message),
    );
    return () => {
      gone = true;
    };
  }, [uuid, version]);
  if (error) return <p class="error" role="alert">{error}</p>;
  if (!periods) return <p>Loading history…</p>;
  if (periods.length === 0) return <p class="muted">No connectivity recorded yet: the history starts when the agent first connects.</p>;
  return (
    <ol class="history" aria-label={`Connectivity history of ${name}`}>
      {periods.map((p) => (
        <li key={`${p.since} ${p.state}`} data-state={p.state}>
          <span class={`badge ${p.state}`}>{CONNECTIVITY[p.state]}</span>{" "}
          <span class="period">
            {p.until === null ? "since" : "from"} <time dateTime={p.since}>{when(p.since)}</time>
            {p.until === null ? ", " : " for "}
            <span class="duration">{span(p.duration_seconds)}</span>
            {p.until === null ? " so far" : ""}
          </span>
        </li>
      ))}
    </ol>
  );
}

/** The team's servers with everything the page shows, in one read (GET /servers carries it: docs/decisions.md). */
async function loadRows(): Promise<ServerRow[]> {
  const list = await apiGet<{ data: ServerListItem[] }>("/servers");
  return list.data.map((s) => ({
    uuid: s.uuid,
    name: s.name,
    ip: s.ip,
    status: s.status,
    lastSeenAt: s.agent.last_seen_at,
    agentVersion: s.agent.version,
    engineVersion: s.engine_version,
    resources: s.resource_count,
  }));
}

async function detail(uuid: string): Promise<Partial<ServerRow>> {
  const d = await apiGet<ServerDetailBody>(`/servers/${encodeURIComponent(uuid)}`);
  return { engineVersion: d.engine.version, agentVersion: d.agent.version, lastSeenAt: d.agent.last_seen_at };
}

/**
 * Fleet: every server of the team with its agent's connectivity, kept current by the /fleet
 * stream (server:status) without reloading. After a reconnect of the stream the list is read
 * again: events sent while it was away are not replayed.
 */
export function Fleet({ role }: { role: TeamRole }) {
  const [rows, setRows] = useState<ServerRow[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [live, setLive] = useState(false);
  const [now, setNow] = useState(Date.now());
  const [open, setOpen] = useState<Set<string>>(new Set());
  /** A join command just issued: for a card's server (uuid), or for the server just added. */
  const [join, setJoin] = useState<(JoinCommand & { uuid?: string }) | null>(null);
  const [reload, setReload] = useState(0);
  const toggle = (uuid: string) =>
    setOpen((cur) => {
      const next = new Set(cur);
      if (!next.delete(uuid)) next.add(uuid);
      return next;
    });

  useEffect(() => {
    let gone = false;
    let loaded = false;
    const refresh = async () => {
      loaded = true;
      try {
        const fresh = await loadRows();
        if (gone) return;
        setRows(fresh);
        setError(null);
      } catch (err) {
        if (!gone) setError((err as Error).message);
      }
    };
    const socket = io("/fleet", {
      transports: ["websocket"],
      // Asked at every (re)connect: a fresh token when the last one expired or was revoked.
      auth: (cb) => void apiToken().then((token) => cb({ token }), () => cb({})),
    });
    socket.on("connect", () => {
      setLive(true);
      void refresh();
    });
    socket.on("disconnect", (reason) => {
      setLive(false);
      // The server drops the stream when its token stops granting access (expired): a new one.
      if (reason === "io server disconnect") void apiToken(true).then(() => socket.connect(), () => {});
    });
    socket.on("server:status", (e: ServerStatusEvent) => {
      setRows((cur) => {
        if (!cur) return cur;
        if (!cur.some((r) => r.uuid === e.uuid)) {
          void refresh();
          return cur;
        }
        return cur.map((r) => (r.uuid === e.uuid ? { ...r, name: e.name, status: e.status, lastSeenAt: e.last_seen_at, agentVersion: e.agent_version ?? r.agentVersion } : r));
      });
      // A connecting agent reports its host's facts (the engine's version): read them once it is in.
      if (e.status === "reachable") {
        detail(e.uuid).then(
          (d) => !gone && setRows((cur) => cur?.map((r) => (r.uuid === e.uuid && r.status === "reachable" ? { ...r, ...d } : r)) ?? cur),
          () => {},
        );
      }
    });
    // The list loads when the stream connects; without the stream, once anyway.
    socket.on("connect_error", () => {
      setLive(false);
      if (!loaded) void refresh();
    });
    const tick = setInterval(() => setNow(Date.now()), 5000);
    return () => {
      gone = true;
      clearInterval(tick);
      socket.close();
    };
  }, []);

  // A server just added (the empty state's form): list it without waiting for its agent.
  useEffect(() => {
    if (!reload) return;
    loadRows().then(setRows, (err: Error) => setError(err.message));
  }, [reload]);

  return (
    <section aria-labelledby="fleet-title">
      <div class="heading">
        <h1 id="fleet-title">Fleet</h1>
        <span class={live ? "live on" : "live"} role="status">
          {live ? "live" : "connecting…"}
        </span>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {rows === null && !error && <p>Loading servers…</p>}
      {join && !join.uuid && <JoinPanel join={join} onDone={() => setJoin(null)} />}
      {rows !== null && rows.length === 0 && (
        <EmptyFleet
          role={role}
          onJoined={(j) => {
            setJoin(j);
            setReload((n) => n + 1);
          }}
        />
      )}
      {rows !== null && rows.length > 0 && (
        <ul class="servers" aria-label="Servers">
          {rows.map((r) => (
            <li class="server" key={r.uuid} data-uuid={r.uuid} data-status={r.status}>
              <div class="server-head">
                <h2>{r.name}</h2>
                <span class={`badge ${r.status}`}>{CONNECTIVITY[r.status]}</span>
              </div>
              <dl>
                <dt>Address</dt>
                <dd>{r.ip}</dd>
                <dt>Last seen</dt>
                <dd title={r.lastSeenAt ?? undefined}>{r.status === "reachable" ? "now" : ago(r.lastSeenAt, now)}</dd>
                <dt>Agent</dt>
                <dd>{r.agentVersion ?? "–"}</dd>
                <dt>Docker Engine</dt>
                <dd>{r.engineVersion ?? "–"}</dd>
                <dt>Resources</dt>
                <dd class="resources">{r.resources}</dd>
              </dl>
              {r.status === "pending" && canAddServers(role) && (
                <div class="join-row">
                  {join?.uuid === r.uuid ? (
                    <JoinPanel join={join} onDone={() => setJoin(null)} />
                  ) : (
                    <ShowJoinCommand uuid={r.uuid} name={r.name} onJoined={(j) => setJoin({ ...j, uuid: r.uuid })} />
                  )}
                </div>
              )}
              <button type="button" class="plain history-toggle" aria-expanded={open.has(r.uuid)} aria-controls={`history-${r.uuid}`} onClick={() => toggle(r.uuid)}>
                {open.has(r.uuid) ? "Hide history" : "History"}
              </button>
              <div id={`history-${r.uuid}`} hidden={!open.has(r.uuid)}>
                {open.has(r.uuid) && <History uuid={r.uuid} name={r.name} version={`${r.status} ${r.lastSeenAt ?? ""}`} />}
              </div>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
