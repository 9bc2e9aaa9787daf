import { z } from "zod";
import { BodyId, IntId, PermissionLevel, Timestamp, Uuid, listOf, requestBody, resourceId } from "./common.js";

const Abilities = {
  can_view: z.boolean(),
  can_deploy: z.boolean(),
  can_manage: z.boolean(),
  can_delete: z.boolean(),
};

export const ProjectPermission = z
  .object({
    id: z.number().int(),
    project_uuid: z.string(),
    project_name: z.string(),
    user_id: z.number().int(),
    user_name: z.string(),
    user_email: z.string(),
    ...Abilities,
    permission_level: PermissionLevel.meta({
      description: "What the user can really do in the project, as can_* say: the grant, capped by the user's role (a viewer stays view_only; owners and admins have full access whatever the grant)",
    }),
    granted_level: PermissionLevel.meta({ description: "The level granted (stored); it applies in full only to members" }),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: "ProjectPermission" });
export type ProjectPermission = z.infer<typeof ProjectPermission>;

export const ProjectPermissionSummary = z
  .object({ id: z.number().int(), project_uuid: z.string(), user_id: z.number().int(), ...Abilities })
  .meta({ id: "ProjectPermissionSummary" });

export const EnvironmentPermission = z
  .object({
    id: z.number().int(),
    environment_id: z.number().int(),
    environment_name: z.string(),
    project_uuid: z.string(),
    user_id: z.number().int(),
    user_name: z.string(),
    ...Abilities,
    permission_level: PermissionLevel.meta({ description: "What the user can really do in the environment, as can_* say: the override, capped by the user's role" }),
    granted_level: PermissionLevel.meta({ description: "The level of the override (stored); it applies in full only to members" }),
    created_at: Timestamp,
  })
  .meta({ id: "EnvironmentPermission" });
export type EnvironmentPermission = z.infer<typeof EnvironmentPermission>;

export const EnvironmentPermissionSummary = z
  .object({ id: z.number().int(), environment_id: z.number().int(), user_id: z.number().int(), ...Abilities })
  .meta({ id: "EnvironmentPermissionSummary" });

export const ProjectPermissionQuery = z.object({ project_uuid: Uuid.optional(), user_id: IntId.optional() });
export const EnvironmentPermissionQuery = z.object({ environment_id: IntId.optional(), user_id: IntId.optional() });


export const GrantProjectPermissionBody = requestBody({
  project_uuid: Uuid,
  user_id: BodyId,
  permission_level: PermissionLevel,
});
export const UpdateProjectPermissionBody = requestBody({ permission_level: PermissionLevel });
export const BulkGrantBody = requestBody({
  project_uuid: Uuid,
  permission_level: PermissionLevel,
  overwrite: z
    .boolean()
    .optional()
    .meta({ description: "true: every member's and viewer's grant becomes permission_level, lowering higher ones. Default false: grants are created or raised, never lowered." }),
});
export const GrantEnvironmentPermissionBody = requestBody({
  environment_id: BodyId,
  user_id: BodyId,
  permission_level: PermissionLevel,
});

export const ProjectPermissionParams = z.object({ id: resourceId("project_permission", IntId) });
export const EnvironmentPermissionParams = z.object({ id: resourceId("environment_permission", IntId) });
export const BulkProjectParams = z.object({ project_uuid: resourceId("project", Uuid) });

export const ProjectPermissionList = listOf(ProjectPermission);
export const EnvironmentPermissionList = listOf(EnvironmentPermission);
export const CountBody = z.object({ message: z.string(), count: z.number().int() });

/** The fixed ability table of spec section 2. */
export function abilitiesOf(level: PermissionLevel) {
  return {
    can_view: true,
    can_deploy: level !== "view_only",
    can_manage: level === "full_access",
    can_delete: level === "full_access",
  };
}
