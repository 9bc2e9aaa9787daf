import { useEffect, useState } from "preact/hooks";
import type { DashboardTokenView, SessionView, TokenScope } from "@capstan/shared";
import { createToken, listTokens, revokeToken } from "./api.js";

const SCOPES: { scope: TokenScope; what: string }[] = [
  { scope: "read", what: "read everything the user may see" },
  { scope: "write", what: "create, change and delete" },
  { scope: "deploy", what: "deploy, start, stop, restart" },
];

const date = (iso: string | null) => (iso ? new Date(iso).toLocaleString() : "never");

/**
 * Keys and Tokens → API Tokens: the signed-in user's own tokens in the current team. The value
 * of a new token is shown once, here, and never again (only its hash is stored).
 */
export function Tokens(props: { session: SessionView }) {
  const allowed: TokenScope[] = props.session.team.role === "viewer" ? ["read"] : ["read", "write", "deploy"];
  const [tokens, setTokens] = useState<DashboardTokenView[] | null>(null);
  const [name, setName] = useState("");
  const [scopes, setScopes] = useState<TokenScope[]>(["read"]);
  const [created, setCreated] = useState<{ name: string; token: string } | null>(null);
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<string | null>(null);

  const reload = () => listTokens().then(setTokens, (err: Error) => setError(err.message));
  useEffect(() => void reload(), []);

  const submit = async (e: Event) => {
    e.preventDefault();
    setError(null);
    try {
      const out = await createToken(name, scopes);
      setCreated({ name: out.data.name, token: out.token });
      setCopied(false);
      setName("");
      await reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const revoke = async (t: DashboardTokenView) => {
    setError(null);
    try {
      await revokeToken(t.id);
      await reload();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const copy = async () => {
    if (!created) return;
    try {
      await navigator.clipboard.writeText(created.token);
      setCopied(true);
    } catch {
      setError("Copying was not allowed by the browser: select the token and copy it by hand.");
    }
  };

  return (
    <section aria-labelledby="tokens-title">
      <div class="heading">
        <h1 id="tokens-title">API Tokens</h1>
      </div>
      <p class="hint">
        Tokens for the API (<code>Authorization: Bearer …</code>) acting as you in {props.session.team.name}. See <a href="/docs">/docs</a>.
      </p>
      {created && (
        <div class="created" role="status">
          <p>
            Token <strong>{created.name}</strong> created. Copy it now: it is not shown again.
          </p>
          <label for="new-token">Token value</label>
          <div class="copy-row">
            <input id="new-token" readOnly value={created.token} onFocus={(e) => e.currentTarget.select()} />
            <button type="button" onClick={() => void copy()}>
              {copied ? "Copied" : "Copy"}
            </button>
          </div>
          <button type="button" class="plain" onClick={() => setCreated(null)}>
            Done
          </button>
        </div>
      )}
      <form class="token-form" onSubmit={submit}>
        <label for="token-name">Name</label>
        <input id="token-name" required maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} placeholder="e.g. CI deploys" />
        <fieldset>
          <legend>Scopes</legend>
          {SCOPES.filter((s) => allowed.includes(s.scope)).map((s) => (
            <label class="check" key={s.scope}>
              <input
                type="checkbox"
                name="scope"
                value={s.scope}
                checked={scopes.includes(s.scope)}
                onChange={(e) => setScopes((cur) => (e.currentTarget.checked ? [...cur, s.scope] : cur.filter((x) => x !== s.scope)))}
              />
              {s.scope} <span class="hint">({s.what})</span>
            </label>
          ))}
        </fieldset>
        <button type="submit" disabled={!scopes.length}>
          Create token
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {tokens !== null && tokens.length === 0 && <p class="empty">No API tokens yet: create one above.</p>}
      {tokens !== null && tokens.length > 0 && (
        <ul class="tokens" aria-label="API tokens">
          {tokens.map((t) => (
            <li class="token" key={t.id} data-id={t.id}>
              <div class="server-head">
                <h2>{t.name}</h2>
                <button type="button" class="plain" onClick={() => void revoke(t)} aria-label={`Revoke ${t.name}`}>
                  Revoke
                </button>
              </div>
              <dl>
                <dt>Scopes</dt>
                <dd class="scopes">{t.scopes.join(", ")}</dd>
                <dt>Created</dt>
                <dd>{date(t.created_at)}</dd>
                <dt>Last used</dt>
                <dd>{date(t.last_used_at)}</dd>
              </dl>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
