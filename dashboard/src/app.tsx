import { useEffect, useState } from "preact/hooks";
import type { SessionView } from "@capstan/shared";
import { loadSession, signIn, signInWithLink, signOut, switchTeam } from "./api.js";
import { Fleet } from "./fleet.js";
import { Tokens } from "./tokens.js";
import { Environment, Project, Projects } from "./projects.js";
import { Team } from "./team.js";
import { Storages } from "./storages.js";

type PageName = "fleet" | "tokens" | "projects" | "team" | "storages";
interface Route {
  name: PageName;
  /** #/projects/{project}/{environment}: the project's uuid and the environment's name. */
  args: string[];
}
function pageOf(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "tokens") return { name: "tokens", args: [] };
  if (parts[0] === "team") return { name: "team", args: [] };
  if (parts[0] === "storages") return { name: "storages", args: [] };
  if (parts[0] === "projects") return { name: "projects", args: parts.slice(1, 3) };
  return { name: "fleet", args: [] };
}

/** The page named by the URL's fragment (#/fleet, #/tokens, #/projects/...), following its changes. */
function usePage(): Route {
  const [page, setPage] = useState(pageOf(location.hash));
  useEffect(() => {
    const on = () => setPage(pageOf(location.hash));
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  return page;
}

/** A one-time link (capstan user sign-in-link) arrives as #link=...: the fragment never reaches a server log. */
function linkFromHash(): string | null {
  const m = /^#link=([A-Za-z0-9_-]+)$/.exec(location.hash);
  return m ? m[1]! : null;
}

function SignIn(props: { onSignedIn: (v: SessionView) => void; notice: string | null }) {
  const [email, setEmail] = useState("");
  const [password, setPassword] = useState("");
  const [error, setError] = useState<string | null>(props.notice);
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      props.onSignedIn(await signIn(email, password));
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return (
    <main class="signin">
      <h1>Sign in to Capstan</h1>
      <form onSubmit={submit}>
        <label for="email">Email</label>
        <input id="email" name="email" type="email" autocomplete="username" required value={email} onInput={(e) => setEmail(e.currentTarget.value)} />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required value={password} onInput={(e) => setPassword(e.currentTarget.value)} />
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
      <p class="hint">
        No password yet? An administrator sets one with <code>capstan user password --user ID</code> or prints a one-time link with{" "}
        <code>capstan user sign-in-link --user ID</code>.
      </p>
    </main>
  );
}

function Shell(props: { session: SessionView; onChange: (v: SessionView | null) => void }) {
  const { session } = props;
  const [error, setError] = useState<string | null>(null);
  const route = usePage();
  const page = route.name;
  const change = async (teamId: number) => {
    try {
      props.onChange(await switchTeam(teamId));
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const out = async () => {
    try {
      await signOut();
      props.onChange(null);
    } catch (err) {
      setError((err as Error).message);
    }
  };
  return (
    <>
      <header class="top">
        <span class="brand">Capstan</span>
        <nav aria-label="Main">
          <a href="#/fleet" aria-current={page === "fleet" ? "page" : undefined}>
            Fleet
          </a>
          <a href="#/projects" aria-current={page === "projects" ? "page" : undefined}>
            Projects
          </a>
          <a href="#/team" aria-current={page === "team" ? "page" : undefined}>
            Team
          </a>
          <a href="#/storages" aria-current={page === "storages" ? "page" : undefined}>
            S3 storages
          </a>
          <a href="#/tokens" aria-current={page === "tokens" ? "page" : undefined}>
            API Tokens
          </a>
        </nav>
        <div class="who">
          {session.teams.length > 1 ? (
            <label>
              <span class="sr-only">Team</span>
              <select value={String(session.team.id)} onChange={(e) => void change(Number(e.currentTarget.value))} aria-label="Team">
                {session.teams.map((t) => (
                  <option value={String(t.id)} key={t.id}>
                    {t.name}
                  </option>
                ))}
              </select>
            </label>
          ) : (
            <span class="team">{session.team.name}</span>
          )}
          <span class="user" title={session.user.email}>
            {session.user.name}
          </span>
          <button type="button" onClick={() => void out()}>
            Sign out
          </button>
        </div>
      </header>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <main>
        {/* Keyed by team: switching teams starts the page afresh with the new team's token. */}
        {page === "fleet" && <Fleet key={session.team.id} role={session.team.role} />}
        {page === "team" && <Team key={session.team.id} />}
        {page === "storages" && <Storages key={session.team.id} session={session} />}
        {page === "tokens" && <Tokens key={session.team.id} session={session} />}
        {page === "projects" && route.args.length === 0 && <Projects key={session.team.id} />}
        {page === "projects" && route.args.length === 1 && <Project key={`${session.team.id}/${route.args[0]}`} uuid={route.args[0]!} />}
        {page === "projects" && route.args.length === 2 && (
          <Environment key={`${session.team.id}/${route.args.join("/")}`} session={session} project={route.args[0]!} environment={route.args[1]!} />
        )}
      </main>
    </>
  );
}

export function App() {
  const [session, setSession] = useState<SessionView | null | undefined>(undefined);
  const [notice, setNotice] = useState<string | null>(null);
  useEffect(() => {
    const link = linkFromHash();
    if (link) history.replaceState(null, "", location.pathname);
    (link ? signInWithLink(link) : loadSession()).then(setSession, (err: Error) => {
      setNotice(err.message);
      setSession(null);
    });
  }, []);
  if (session === undefined) return <p class="loading">Loading…</p>;
  if (session === null) return <SignIn onSignedIn={setSession} notice={notice} />;
  return <Shell session={session} onChange={setSession} />;
}
