import { useEffect, useState } from "preact/hooks";
import type { S3Storage, SessionView } from "@capstan/shared";
import { apiGet, apiSend } from "./api.js";

/**
 * S3 storages (docs/backups.md): where backups go, and whether they are encrypted. Owners and
 * admins turn encryption on with a passphrase (sent once, never shown again: the API returns
 * only is_encrypted), change it, or turn it off.
 */
export function Storages(props: { session: SessionView }) {
  const [items, setItems] = useState<S3Storage[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const admin = props.session.team.role === "owner" || props.session.team.role === "admin";
  const load = () =>
    apiGet<{ data: S3Storage[] }>("/s3-storages?per_page=100").then(
      (r) => setItems(r.data),
      (e: Error) => setError(e.message),
    );
  useEffect(() => void load(), []);
  return (
    <section aria-labelledby="storages-title">
      <div class="heading">
        <h1 id="storages-title">S3 storages</h1>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {items?.length === 0 && (
        <div class="empty">
          <p>No S3 storages yet.</p>
          <p>
            Add one with <code>POST /api/v1/s3-storages</code> (endpoint, bucket and keys; see <a href="/docs">/docs</a>), then back up databases
            to it. Its backup encryption is set here.
          </p>
        </div>
      )}
      {items && items.length > 0 && (
        <ul class="cards" aria-label="S3 storages">
          {items.map((s) => (
            <StorageCard key={s.id} storage={s} admin={admin} onChange={(n) => setItems((cur) => cur?.map((x) => (x.id === n.id ? n : x)) ?? cur)} />
          ))}
        </ul>
      )}
    </section>
  );
}

function StorageCard(props: { storage: S3Storage; admin: boolean; onChange: (s: S3Storage) => void }) {
  const s = props.storage;
  const [passphrase, setPassphrase] = useState("");
  const [again, setAgain] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const id = `storage-${s.id}`;
  const save = async (value: string | null) => {
    setError(null);
    setNotice(null);
    if (value !== null && value !== again) {
      setError("The two passphrases differ.");
      return;
    }
    setBusy(true);
    try {
      const r = await apiSend<{ data: S3Storage }>("PATCH", `/s3-storages/${s.id}`, { encryption_passphrase: value });
      setPassphrase("");
      setAgain("");
      setNotice(value === null ? "Encryption off: later backups are not encrypted." : "Passphrase set. It is not shown again: keep it safe, restores need it.");
      props.onChange(r.data);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <li class="card storage" data-id={s.id} data-encrypted={String(s.is_encrypted)}>
      <div class="server-head">
        <h2>{s.name}</h2>
        <span class={`badge ${s.is_encrypted ? "reachable" : "pending"}`}>{s.is_encrypted ? "encrypted" : "not encrypted"}</span>
      </div>
      <p class="muted">
        {s.endpoint} · {s.bucket}/{s.path_prefix}
      </p>
      {props.admin ? (
        <form
          class="token-form"
          onSubmit={(e) => {
            e.preventDefault();
            void save(passphrase);
          }}
        >
          <label for={`${id}-pass`}>{s.is_encrypted ? "New passphrase" : "Encryption passphrase"}</label>
          <input id={`${id}-pass`} type="password" autocomplete="new-password" minLength={12} required value={passphrase} onInput={(e) => setPassphrase(e.currentTarget.value)} />
          <label for={`${id}-again`}>Passphrase again</label>
          <input id={`${id}-again`} type="password" autocomplete="new-password" minLength={12} required value={again} onInput={(e) => setAgain(e.currentTarget.value)} />
          <div class="actions">
            <button type="submit" disabled={busy}>
              {s.is_encrypted ? "Change passphrase" : "Turn encryption on"}
            </button>
            {s.is_encrypted && (
              <button type="button" class="plain" disabled={busy} onClick={() => void save(null)}>
                Turn encryption off
              </button>
            )}
          </div>
        </form>
      ) : (
        <p class="muted">Team owners and admins set the backup encryption.</p>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {notice && <p role="status">{notice}</p>}
    </li>
  );
}
