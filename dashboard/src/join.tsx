import { useEffect, useState } from "preact/hooks";
import type { TeamRole } from "@capstan/shared";
import { apiGet, apiPost } from "./api.js";

/**
 * Joining a server (issue 22's empty states; docs/dashboard.md "Joining a server"): the public
 * API only. POST /servers registers the machine and answers its join command once; for a
 * server whose agent was never seen, POST /servers/{uuid}/agent-token issues a new token and
 * its join command (nothing is connected that the rotation could drop). Team owners and admins
 * only, as in the API.
 */
export const canAddServers = (role: TeamRole) => role === "owner" || role === "admin";

export interface JoinCommand {
  server: string;
  command: string;
}

/** The join command, shown once, with a copy button. */
export function JoinPanel({ join, onDone }: { join: JoinCommand; onDone: () => void }) {
  const [copied, setCopied] = useState<boolean | null>(null);
  const id = `join-${join.server.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(join.command);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div class="created join" role="status">
      <p>
        Run this on <strong>{join.server}</strong> (a machine with Docker, as root or a member of the <code>docker</code> group). Its agent
        dials out to this control plane and the server shows <strong>connected</strong> here. Copy it now: the token in it is not shown again.
      </p>
      <label for={id}>Join command</label>
      <div class="copy-row">
        <input id={id} class="join-command" readOnly value={join.command} onFocus={(e) => e.currentTarget.select()} />
        <button type="button" onClick={() => void copy()}>
          {copied ? "Copied" : "Copy"}
        </button>
      </div>
      {copied === false && <p class="error">Copying was not allowed by the browser: select the command and copy it by hand.</p>}
      <button type="button" class="plain" onClick={onDone}>
        Done
      </button>
    </div>
  );
}

/** The Fleet page with no servers: what to do next, and for owners and admins the form that adds one. */
export function EmptyFleet({ role, onJoined }: { role: TeamRole; onJoined: (j: JoinCommand) => void }) {
  const admin = canAddServers(role);
  return (
    <div class="empty">
      <h2>No servers yet</h2>
      <p>
        A server joins when its agent connects: add the machine here, then run the join command it shows on that machine. Other ways (an
        install script, an install over SSH) are in the API reference at <a href="/docs">/docs</a>.
      </p>
      {admin ? <AddServer onJoined={onJoined} /> : <p>Ask an owner or admin of the team to add a server.</p>}
    </div>
  );
}

function AddServer({ onJoined }: { onJoined: (j: JoinCommand) => void }) {
  const [keys, setKeys] = useState<{ uuid: string; name: string }[] | null>(null);
  const [name, setName] = useState("");
  const [ip, setIp] = useState("");
  const [key, setKey] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    apiGet<{ data: { uuid: string; name: string }[] }>("/security/keys").then(
      (r) => {
        setKeys(r.data);
        setKey(r.data[0]?.uuid ?? "");
      },
      (err: Error) => setError(err.message),
    );
  }, []);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const created = await apiPost<{ name: string; join_command: string }>("/servers", { name, ip, private_key_uuid: key });
      onJoined({ server: created.name, command: created.join_command });
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  if (keys === null) return error ? <p class="error" role="alert">{error}</p> : <p>Loading…</p>;
  if (keys.length === 0) {
    return (
      <p>
        A server needs an SSH private key of the team (used only for installs over SSH): add one with <code>POST /api/v1/security/keys</code>,
        then come back here.
      </p>
    );
  }
  return (
    <form class="token-form" onSubmit={submit} aria-label="Add a server">
      <label for="server-name">Name</label>
      <input id="server-name" type="text" required maxLength={255} value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="e.g. web-1" />
      <label for="server-ip">Address</label>
      <input id="server-ip" type="text" required value={ip} onInput={(e) => setIp(e.currentTarget.value)} placeholder="IP address or host name" />
      <label for="server-key">SSH key</label>
      <select id="server-key" value={key} onChange={(e) => setKey(e.currentTarget.value)}>
        {keys.map((k) => (
          <option key={k.uuid} value={k.uuid}>
            {k.name}
          </option>
        ))}
      </select>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <button type="submit" disabled={busy}>
        Add server and show join command
      </button>
    </form>
  );
}

/**
 * For a server whose agent was never seen: a new join command (POST /servers/{uuid}/agent-token;
 * the previous token stops working, and no agent is connected that it would drop).
 */
export function ShowJoinCommand({ uuid, name, onJoined }: { uuid: string; name: string; onJoined: (j: JoinCommand) => void }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const show = async () => {
    setBusy(true);
    setError(null);
    try {
      const r = await apiPost<{ data: { join_command: string } }>(`/servers/${encodeURIComponent(uuid)}/agent-token`);
      onJoined({ server: name, command: r.data.join_command });
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <>
      <button type="button" class="plain" disabled={busy} onClick={() => void show()}>
        Show join command
      </button>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </>
  );
}
