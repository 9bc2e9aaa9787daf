import {
  BackupExecutionList,
  BackupExecutionParams,
  BackupJobQueued,
  BackupSchedule,
  BackupScheduleList,
  BackupScheduleMutation,
  BackupScheduleParams,
  CreateBackupScheduleBody,
  DatabaseBackupsParams,
  MessageBody,
  PaginationQuery,
  RestoreBackupBody,
  UpdateBackupScheduleBody,
} from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { backupExecutionDto, backupScheduleDto } from "../mappers/backups.js";

const TAG = "Database backups";
const BASE = "/databases/{uuid}/backups";
const ONE = `${BASE}/{backup_uuid}`;
const EXECUTION = `${ONE}/executions/{execution_uuid}`;

export const backupRoutes = [
  route({
    method: "get",
    path: BASE,
    tag: TAG,
    summary: "List a database's backup schedules",
    params: DatabaseBackupsParams,
    query: PaginationQuery,
    responses: { 200: { description: "Schedules", schema: BackupScheduleList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params, query }) {
      return {
        body: await paginate(
          query,
          () => services.backups.countSchedules(scope, params.uuid),
          async (w) => (await services.backups.listSchedules(scope, params.uuid, w)).map(backupScheduleDto),
        ),
      };
    },
  }),
  route({
    method: "post",
    path: BASE,
    tag: TAG,
    summary: "Create a backup schedule",
    description:
      "Needs full access to the database's environment. frequency: five cron fields in UTC or @hourly/@daily/@weekly/@monthly/@yearly. s3_storage_id: an S3 storage of the team (404 when it is not one). Backups to a storage with an encryption passphrase are OpenPGP-encrypted.",
    params: DatabaseBackupsParams,
    body: CreateBackupScheduleBody,
    responses: { 201: { description: "Created", schema: BackupScheduleMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const data = backupScheduleDto(await services.backups.createSchedule(scope, params.uuid, body));
      return { status: 201, body: { message: "Backup schedule created.", data } };
    },
  }),
  route({
    method: "get",
    path: ONE,
    tag: TAG,
    summary: "Get a backup schedule",
    params: BackupScheduleParams,
    responses: { 200: { description: "Schedule", schema: BackupSchedule }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: backupScheduleDto(await services.backups.getSchedule(scope, params.uuid, params.backup_uuid)) };
    },
  }),
  route({
    method: "patch",
    path: ONE,
    tag: TAG,
    summary: "Change a backup schedule",
    description:
      "Only the fields given change. Moving a schedule to another S3 storage affects later runs: earlier backups stay in the storage each execution names (s3_storage_id) and are restored and deleted there. s3_storage_id null keeps backups on the server only (and drops number_of_backups_remote).",
    params: BackupScheduleParams,
    body: UpdateBackupScheduleBody,
    responses: { 200: { description: "Updated", schema: BackupScheduleMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const data = backupScheduleDto(await services.backups.updateSchedule(scope, params.uuid, params.backup_uuid, body));
      return { body: { message: "Backup schedule updated.", data } };
    },
  }),
  route({
    method: "delete",
    path: ONE,
    tag: TAG,
    summary: "Delete a backup schedule",
    description: "Running backups and restores of it are cancelled. Backup files on the server and objects in S3 stay.",
    params: BackupScheduleParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      await services.backups.deleteSchedule(scope, params.uuid, params.backup_uuid);
      return { body: { message: "Backup schedule deleted." } };
    },
  }),
  route({
    method: "post",
    path: `${ONE}/execute`,
    tag: TAG,
    summary: "Run a backup now (extension)",
    description:
      "Runs the schedule once, outside its cron times (also when disabled); needs deploy permission on the environment. Asynchronous: follow the execution's status. 409 while a backup of the schedule or a restore of the database runs, or when the server's agent is not connected.",
    params: BackupScheduleParams,
    responses: { 200: { description: "Queued", schema: BackupJobQueued }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "Cannot run now (reason in message)" } },
    async handler({ scope, services, params }) {
      const uuid = await services.backups.execute(scope, params.uuid, params.backup_uuid);
      return { body: { message: "Backup queued.", execution_uuid: uuid } };
    },
  }),
  route({
    method: "get",
    path: `${ONE}/executions`,
    tag: TAG,
    summary: "List a schedule's executions (newest first)",
    params: BackupScheduleParams,
    query: PaginationQuery,
    responses: { 200: { description: "Executions", schema: BackupExecutionList }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params, query }) {
      return {
        body: await paginate(
          query,
          () => services.backups.countExecutions(scope, params.uuid, params.backup_uuid),
          async (w) => (await services.backups.listExecutions(scope, params.uuid, params.backup_uuid, w)).map(backupExecutionDto),
        ),
      };
    },
  }),
  route({
    method: "delete",
    path: EXECUTION,
    tag: TAG,
    summary: "Delete a backup",
    description: "Removes the execution, and its file on the server and its object in S3 (asynchronously, by the server's agent). 409 while it runs or is being restored.",
    params: BackupExecutionParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "The backup is still running or being restored" } },
    async handler({ scope, services, params }) {
      const r = await services.backups.deleteExecution(scope, params.uuid, params.backup_uuid, params.execution_uuid);
      return { body: { message: r.removing ? "Backup deleted; its file and object are being removed." : "Backup deleted." } };
    },
  }),
  route({
    method: "post",
    path: `${EXECUTION}/restore`,
    tag: TAG,
    summary: "Restore a backup into its database (extension)",
    description:
      "Replaces the database's data with the backup's (decrypting it when it is encrypted); needs full access. Asynchronous: follow restore_status (queued, running, success, failed with restore_reason) on the execution. passphrase: only for backups encrypted with an earlier passphrase of the storage.",
    params: BackupExecutionParams,
    body: RestoreBackupBody,
    responses: {
      200: { description: "Queued", schema: BackupJobQueued },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: { description: "Cannot restore now (reason in message)" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const uuid = await services.backups.restore(scope, params.uuid, params.backup_uuid, params.execution_uuid, body);
      return { body: { message: "Restore queued.", execution_uuid: uuid } };
    },
  }),
];
