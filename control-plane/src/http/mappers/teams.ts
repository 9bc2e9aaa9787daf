import type { Team, TeamDetail } from "@capstan/shared";
import type { Out } from "./types.js";
import { type TeamSettings } from "@capstan/shared";
import { iso } from "../dto.js";

export const teamDto = (t: { id: number; name: string; description: string; createdAt: Date }): Out<typeof Team> => ({
  id: t.id,
  name: t.name,
  description: t.description,
  created_at: iso(t.createdAt),
});

export const settingsDto = (t: { allowMemberBindMounts: boolean }): TeamSettings => ({ allow_member_bind_mounts: t.allowMemberBindMounts });

export type TeamRow = Parameters<typeof teamDto>[0] & Parameters<typeof settingsDto>[0] & { _count: { memberships: number } };
export const teamDetailDto = (t: TeamRow): Out<typeof TeamDetail> => ({ ...teamDto(t), members_count: t._count.memberships, settings: settingsDto(t) });
