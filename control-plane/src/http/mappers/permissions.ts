import type { EnvironmentPermission, ProjectPermission, ProjectPermissionSummary } from "@capstan/shared";
import type { Out } from "./types.js";
import {
  abilitiesOf,
  PermissionLevel,
} from "@capstan/shared";
import { iso } from "../dto.js";
import type { EnvironmentPermissionRow, ProjectPermissionRow } from "../../services/permissions.js";

/**
 * can_* and permission_level say what the user can really do (the grant capped by its role:
 * domain/permissions.ts effectiveLevel); granted_level is the level stored (docs/decisions.md).
 */
export const levels = (p: { level: string; effectiveLevel: string }) => {
  const effective = PermissionLevel.parse(p.effectiveLevel);
  return { ...abilitiesOf(effective), permission_level: effective, granted_level: PermissionLevel.parse(p.level) };
};

export const projectPermissionDto = (p: ProjectPermissionRow): Out<typeof ProjectPermission> => {
  const { permission_level, granted_level, ...abilities } = levels(p);
  return {
    id: p.id,
    project_uuid: p.project.uuid,
    project_name: p.project.name,
    user_id: p.userId,
    user_name: p.user.name,
    user_email: p.user.email,
    ...abilities,
    permission_level,
    granted_level,
    created_at: iso(p.createdAt),
    updated_at: iso(p.updatedAt),
  };
};

export const projectPermissionSummary = (p: ProjectPermissionRow): Out<typeof ProjectPermissionSummary> => ({
  id: p.id,
  project_uuid: p.project.uuid,
  user_id: p.userId,
  ...abilitiesOf(PermissionLevel.parse(p.effectiveLevel)),
});

export const environmentPermissionDto = (p: EnvironmentPermissionRow): Out<typeof EnvironmentPermission> => {
  const { permission_level, granted_level, ...abilities } = levels(p);
  return {
    id: p.id,
    environment_id: p.environmentId,
    environment_name: p.environment.name,
    project_uuid: p.environment.project.uuid,
    user_id: p.userId,
    user_name: p.user.name,
    ...abilities,
    permission_level,
    granted_level,
    created_at: iso(p.createdAt),
  };
};
