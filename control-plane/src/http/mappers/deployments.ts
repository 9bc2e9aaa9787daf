import { DeploymentStatus, DeploymentTrigger, type ApplicationDeployment, type Deployment, type DeploymentDetail } from "@capstan/shared";
import { iso } from "../dto.js";
import type { Out } from "./types.js";
import type { DeploymentDetailRow, DeploymentListRow } from "../../services/deployments/index.js";

export const deploymentDto = (d: DeploymentListRow): Out<typeof Deployment> => ({
  uuid: d.uuid,
  application_uuid: d.applicationUuid,
  application_name: d.applicationName,
  status: d.status,
  commit: d.commit,
  commit_message: d.commitMessage,
  branch: d.branch,
  created_at: d.createdAt,
  finished_at: d.finishedAt,
});

export const deploymentDetailDto = (d: DeploymentDetailRow): Out<typeof DeploymentDetail> => ({
  ...deploymentDto(d),
  trigger: d.trigger,
  force: d.force,
  server_uuid: d.serverUuid,
  started_at: d.startedAt,
  reason: d.reason,
  logs: d.logs,
});

/** A deployment as the application detail lists it (its 10 most recent), from the stored row. */
export const applicationDeploymentDto = (d: {
  uuid: string;
  status: string;
  trigger: string;
  commit: string | null;
  commitMessage: string | null;
  branch: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
}): Out<typeof ApplicationDeployment> => ({
  uuid: d.uuid,
  status: DeploymentStatus.parse(d.status),
  trigger: DeploymentTrigger.parse(d.trigger),
  commit: d.commit,
  commit_message: d.commitMessage,
  branch: d.branch,
  created_at: iso(d.createdAt),
  started_at: d.startedAt ? iso(d.startedAt) : null,
  finished_at: d.finishedAt ? iso(d.finishedAt) : null,
});
