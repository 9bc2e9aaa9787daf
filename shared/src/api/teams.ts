import { z } from "zod";
import { IntId, requestBody, resourceId, TeamRole, Timestamp, listOf } from "./common.js";
import { Feature } from "./features.js";

export const Team = z
  .object({
    id: z.number().int(),
    name: z.string(),
    description: z.string(),
    created_at: Timestamp,
  })
  .meta({ id: "Team" });
export type Team = z.infer<typeof Team>;

/** Team-wide settings; owners change them (PATCH /teams/current/settings), instance admins with `capstan team settings`. */
export const TeamSettings = z
  .object({
    allow_member_bind_mounts: z.boolean().meta({
      description:
        "Members (not only owners and admins) may add bind mounts of server directories (storages with host_path, compose bind volumes). Default false.",
    }),
  })
  .meta({ id: "TeamSettings" });
export type TeamSettings = z.infer<typeof TeamSettings>;

export const UpdateTeamSettingsBody = requestBody({ allow_member_bind_mounts: TeamSettings.shape.allow_member_bind_mounts })
  .meta({ id: "UpdateTeamSettingsBody" });
export type UpdateTeamSettingsBody = z.infer<typeof UpdateTeamSettingsBody>;

export const TeamSettingsMutation = z.object({ message: z.string(), data: TeamSettings }).meta({ id: "TeamSettingsMutation" });

export const TeamDetail = Team.extend({ members_count: z.number().int(), settings: TeamSettings }).meta({ id: "TeamDetail" });
export type TeamDetail = z.infer<typeof TeamDetail>;

/** GET /teams/current: the detail plus the team's paid features, read-only (set with the `capstan` CLI). */
export const CurrentTeam = TeamDetail.extend({
  features: z.array(Feature).meta({ description: "Paid features enabled for the team (docs/features.md); routes needing another one answer 402" }),
}).meta({ id: "CurrentTeam" });
export type CurrentTeam = z.infer<typeof CurrentTeam>;

export const Member = z
  .object({ id: z.number().int(), name: z.string(), email: z.string(), role: TeamRole })
  .meta({ id: "Member" });
export type Member = z.infer<typeof Member>;

export const TeamIdParams = z.object({ id: resourceId("team", IntId) });
export const TeamList = listOf(Team);
export const MemberList = listOf(Member);
