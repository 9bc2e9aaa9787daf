import { useEffect, useRef, useState } from "preact/hooks";
import type { SessionView } from "@capstan/shared";
import { apiGet, apiGetAll, apiPost, followEvents } from "./api.js";

/** Projects → environments → resources (issue 22), all through the public API. */

interface ProjectItem {
  uuid: string;
  name: string;
  description: string | null;
}
interface Counts {
  applications: number;
  databases: number;
  services: number;
  total: number;
}
interface ProjectDetail extends ProjectItem {
  environments: { id: number; name: string; resource_counts: Counts }[];
}
interface Resource {
  uuid: string;
  name: string;
  status: string;
  environment_name: string;
  project_uuid: string;
}
interface EnvironmentDetail {
  id: number;
  name: string;
  project_name: string;
  applications: (Resource & { fqdn: string | null; build_pack: string })[];
  databases: (Resource & { type: string })[];
}
type Kind = "applications" | "databases" | "services";
type Level = "view_only" | "deploy" | "full_access";

const enc = encodeURIComponent;

function Failure(props: { error: string | null }) {
  return props.error ? (
    <p class="error" role="alert">
      {props.error}
    </p>
  ) : null;
}

/** The projects of the team (the ones the user may see). */
export function Projects() {
  const [items, setItems] = useState<ProjectItem[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    apiGetAll<ProjectItem>("/projects").then(
      (r) => setItems(r),
      (e: Error) => setError(e.message),
    );
  }, []);
  return (
    <section aria-labelledby="projects-title">
      <div class="heading">
        <h1 id="projects-title">Projects</h1>
      </div>
      <Failure error={error} />
      {items === null && !error && <p>Loading projects…</p>}
      {items?.length === 0 && (
        <div class="empty">
          <p>No projects you can see yet.</p>
          <p>
            Create one with <code>POST /api/v1/projects</code> (a name is enough: it comes with a <code>production</code> environment), or ask a
            team admin to grant you one.
          </p>
        </div>
      )}
      {items && items.length > 0 && (
        <ul class="cards" aria-label="Projects">
          {items.map((p) => (
            <li class="card project" key={p.uuid}>
              <h2>
                <a href={`#/projects/${p.uuid}`}>{p.name}</a>
              </h2>
              {p.description && <p class="muted">{p.description}</p>}
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/** A project's environments with their resource counts. */
export function Project(props: { uuid: string }) {
  const [p, setP] = useState<ProjectDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    apiGet<ProjectDetail>(`/projects/${enc(props.uuid)}`).then(setP, (e: Error) => setError(e.message));
  }, [props.uuid]);
  return (
    <section aria-labelledby="project-title">
      <p class="crumbs">
        <a href="#/projects">Projects</a>
      </p>
      <div class="heading">
        <h1 id="project-title">{p?.name ?? "Project"}</h1>
      </div>
      <Failure error={error} />
      {p && (
        <ul class="cards" aria-label="Environments">
          {p.environments.map((e) => (
            <li class="card environment" key={e.id}>
              <h2>
                <a href={`#/projects/${p.uuid}/${enc(e.name)}`}>{e.name}</a>
              </h2>
              <p class="muted">
                {e.resource_counts.total === 0
                  ? "Empty: open it to see how to add resources."
                  : `${e.resource_counts.applications} applications, ${e.resource_counts.databases} databases, ${e.resource_counts.services} services`}
              </p>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

/**
 * What the signed-in user may do in an environment: owners and admins everything, viewers
 * nothing but look; a member what their project grant says, or the environment's override.
 */
async function levelIn(session: SessionView, projectUuid: string, environmentId: number): Promise<Level> {
  const role = session.team.role;
  if (role === "owner" || role === "admin") return "full_access";
  if (role === "viewer") return "view_only";
  const me = session.user.id;
  const [grants, overrides] = await Promise.all([
    apiGet<{ data: { permission_level: Level }[] }>(`/permissions/project?project_uuid=${enc(projectUuid)}&user_id=${me}`),
    apiGet<{ data: { permission_level: Level }[] }>(`/permissions/environment?environment_id=${environmentId}&user_id=${me}`),
  ]);
  return overrides.data[0]?.permission_level ?? grants.data[0]?.permission_level ?? "view_only";
}

interface Running {
  uuid: string;
  app: string;
}

/** An environment's applications, databases and services with their status and actions. */
export function Environment(props: { session: SessionView; project: string; environment: string }) {
  const [env, setEnv] = useState<EnvironmentDetail | null>(null);
  const [services, setServices] = useState<Resource[]>([]);
  const [level, setLevel] = useState<Level | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const [deployment, setDeployment] = useState<Running | null>(null);

  const load = async () => {
    // GET /services has no environment filter: every page of the team's services, this environment's kept.
    const [d, s] = await Promise.all([apiGet<EnvironmentDetail>(`/projects/${enc(props.project)}/${enc(props.environment)}`), apiGetAll<Resource>("/services")]);
    setEnv(d);
    setServices(s.filter((x) => x.project_uuid === props.project && x.environment_name === d.name));
    return d;
  };
  useEffect(() => {
    load().then(
      (d) => levelIn(props.session, props.project, d.id).then(setLevel, (e: Error) => setError(e.message)),
      (e: Error) => setError(e.message),
    );
  }, [props.project, props.environment]);

  const canAct = level === "deploy" || level === "full_access";
  const act = async (kind: Kind, r: Resource, action: "deploy" | "start" | "stop" | "restart") => {
    setBusy(`${r.uuid}:${action}`);
    setError(null);
    setNotice(null);
    try {
      const res = await apiPost<{ message: string; deployment_uuid?: string }>(`/${kind}/${enc(r.uuid)}/${action}`);
      if (res.deployment_uuid) setDeployment({ uuid: res.deployment_uuid, app: r.name });
      else setNotice(`${r.name}: ${res.message}`);
      await load();
    } catch (e) {
      setError(`${r.name}: ${(e as Error).message}`);
    } finally {
      setBusy(null);
    }
  };

  const group = (title: string, kind: Kind, list: Resource[], detail: (r: Resource) => string) => (
    <section class="group" aria-labelledby={`group-${kind}`}>
      <h2 id={`group-${kind}`}>{title}</h2>
      {list.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <ul class="cards" aria-label={title}>
          {list.map((r) => (
            <li class="card resource" key={r.uuid} data-uuid={r.uuid}>
              <div class="server-head">
                <h3>{r.name}</h3>
                <span class={`badge status-${r.status.split(":")[0]}`}>{r.status}</span>
              </div>
              <p class="muted">{detail(r)}</p>
              {canAct && (
                <div class="actions">
                  {kind === "applications" && (
                    <button type="button" disabled={busy !== null} onClick={() => void act(kind, r, "deploy")} aria-label={`Deploy ${r.name}`}>
                      Deploy
                    </button>
                  )}
                  {(["start", "stop", "restart"] as const).map((a) => (
                    <button type="button" class="plain" key={a} disabled={busy !== null} onClick={() => void act(kind, r, a)} aria-label={`${a[0]!.toUpperCase()}${a.slice(1)} ${r.name}`}>
                      {a[0]!.toUpperCase() + a.slice(1)}
                    </button>
                  ))}
                </div>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  );

  return (
    <section aria-labelledby="env-title">
      <p class="crumbs">
        <a href="#/projects">Projects</a> / <a href={`#/projects/${props.project}`}>{env?.project_name ?? "Project"}</a>
      </p>
      <div class="heading">
        <h1 id="env-title">{env?.name ?? props.environment}</h1>
        {level && (
          <span class="muted level" data-level={level}>
            {canAct ? "you can deploy here" : "view only"}
          </span>
        )}
      </div>
      <Failure error={error} />
      {notice && <p role="status">{notice}</p>}
      {deployment && <DeploymentLog key={deployment.uuid} uuid={deployment.uuid} app={deployment.app} canCancel={canAct} onEnd={() => void load()} />}
      {env && env.applications.length + env.databases.length + services.length === 0 && level && (
        <EmptyEnvironment project={props.project} environment={env.name} canCreate={level === "full_access"} />
      )}
      {env && (
        <>
          {group("Applications", "applications", env.applications, (r) => (r as EnvironmentDetail["applications"][number]).fqdn ?? (r as EnvironmentDetail["applications"][number]).build_pack)}
          {group("Databases", "databases", env.databases, (r) => (r as EnvironmentDetail["databases"][number]).type)}
          {group("Services", "services", services, () => "service")}
        </>
      )}
    </section>
  );
}

/** An environment with nothing in it: how to put something there (the API's create calls), then deploy it here. */
function EmptyEnvironment(props: { project: string; environment: string; canCreate: boolean }) {
  return (
    <div class="empty">
      <h2>Nothing here yet</h2>
      {props.canCreate ? (
        <>
          <p>
            Create resources in this environment through the API (reference at <a href="/docs">/docs</a>) with{" "}
            <code>project_uuid</code> <code>{props.project}</code> and <code>environment_name</code> <code>{props.environment}</code>:
          </p>
          <ul>
            <li>
              an application: <code>POST /api/v1/applications/dockerimage</code> (an image), <code>/applications/public</code> (a git repository)…
            </li>
            <li>
              a database: <code>POST /api/v1/databases/postgresql</code> (or another engine);
            </li>
            <li>
              a service from a template: <code>POST /api/v1/services</code>.
            </li>
          </ul>
          <p>They show up here: deploy an application, start a database or service with its buttons, and follow the deployment's log.</p>
        </>
      ) : (
        <p>Resources appear here once someone with full access to this environment creates them; ask a team admin.</p>
      )}
    </div>
  );
}

/** A deployment's output, live from its event stream until it ends; cancel while it runs. */
function DeploymentLog(props: { uuid: string; app: string; canCancel: boolean; onEnd: () => void }) {
  const [lines, setLines] = useState<string[]>([]);
  const [status, setStatus] = useState<string>("queued");
  const [error, setError] = useState<string | null>(null);
  const box = useRef<HTMLPreElement>(null);
  useEffect(() => {
    const abort = new AbortController();
    followEvents(
      `/deployments/${enc(props.uuid)}/logs/stream`,
      {
        line: (l) => {
          setStatus((s) => (s === "queued" ? "in_progress" : s));
          setLines((cur) => [...cur, l]);
        },
        event: (name, data) => {
          if (name === "end") {
            setStatus((JSON.parse(data) as { status: string }).status);
            props.onEnd();
          } else if (name === "gap") setLines((cur) => [...cur, "[… output dropped by the log cap …]"]);
          else if (name === "timeout") setError("The log stream timed out; reload to follow it again.");
        },
      },
      abort.signal,
    ).catch((e: Error) => {
      if (!abort.signal.aborted) setError(e.message);
    });
    return () => abort.abort();
  }, [props.uuid]);
  useEffect(() => {
    if (box.current) box.current.scrollTop = box.current.scrollHeight;
  }, [lines]);
  const running = status === "queued" || status === "in_progress";
  const cancel = async () => {
    try {
      await apiPost(`/deployments/${enc(props.uuid)}/cancel`);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <section class="deployment" aria-labelledby="deployment-title" data-uuid={props.uuid} data-status={status}>
      <div class="server-head">
        <h2 id="deployment-title">Deployment of {props.app}</h2>
        <span class="badge" role="status">
          {status}
        </span>
      </div>
      <pre class="log" ref={box} tabIndex={0} aria-label="Deployment log">
        {lines.join("\n")}
      </pre>
      <Failure error={error} />
      {running && props.canCancel && (
        <button type="button" onClick={() => void cancel()}>
          Cancel deployment
        </button>
      )}
    </section>
  );
}
