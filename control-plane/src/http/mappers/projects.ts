import type { Environment, Project, ProjectDetail } from "@capstan/shared";
import type { Out } from "./types.js";
import { iso } from "../dto.js";
import type { ProjectView, ResourceCounts } from "../../services/projects.js";

export type EnvRecord = { id: number; uuid: string; name: string; createdAt: Date | string };

/** The plain read path hands timestamps over already in ISO 8601. */
export const at = (d: Date | string) => (typeof d === "string" ? d : iso(d));

export const environmentDto = (e: EnvRecord): Out<typeof Environment> => ({ id: e.id, uuid: e.uuid, name: e.name, created_at: at(e.createdAt) });

export const projectDto = (p: ProjectView): Out<typeof Project> => ({
  uuid: p.uuid,
  name: p.name,
  description: p.description,
  environments: p.environments.map(environmentDto),
  created_at: at(p.createdAt),
});

export const NO_COUNTS: ResourceCounts = { applications: 0, databases: 0, services: 0, total: 0 };

/** The detail: every environment and the project with its resource counts (services/projects.ts detail()). */
export const projectDetailDto = (p: ProjectView): Out<typeof ProjectDetail> => ({
  uuid: p.uuid,
  name: p.name,
  description: p.description,
  environments: p.environments.map((e) => ({ ...environmentDto(e), resource_counts: e.counts ?? NO_COUNTS })),
  resource_counts: p.counts ?? NO_COUNTS,
  created_at: at(p.createdAt),
});
