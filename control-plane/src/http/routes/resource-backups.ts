import {
  CreateResourceBackupBody,
  MessageBody,
  ResourceBackupDetail,
  ResourceBackupList,
  ResourceBackupMutation,
  ResourceBackupParams,
  ResourceBackupQuery,
  ResourceBackupQueued,
  UpdateResourceBackupBody,
  // ---- resource restores (issue 19, w7/restore) ----
  ResourceBackupExecutionParams,
  ResourceRestoreQueued,
  RestoreResourceBackupBody,
} from "@capstan/shared";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { resourceBackupDetailDto, resourceBackupDto } from "../mappers/resource-backups.js";

const TAG = "Resource backups";
const BASE = "/resource-backups";
const ONE = `${BASE}/{id}`;

/** Resource backups (spec 4.10, issue 19; docs/resource-backups.md). */
export const resourceBackupRoutes = [
  route({
    method: "get",
    path: BASE,
    tag: TAG,
    summary: "List resource backups",
    description: "The team's resource backups the caller can see, filtered by resource_type (application, service, database; class-style strings too) and resource_id.",
    query: ResourceBackupQuery,
    responses: { 200: { description: "Resource backups", schema: ResourceBackupList }, 401: ERR[401], 422: ERR[422] },
    async handler({ scope, services, query }) {
      return { body: { data: (await services.backups.resources.list(scope, query)).map(resourceBackupDto) } };
    },
  }),
  route({
    method: "post",
    path: BASE,
    tag: TAG,
    summary: "Create a resource backup",
    description:
      "backup_type volume copies the volumes of an application (its persistent storages), a service (every component's named volumes) or a standalone database (its data volume, a file-level copy; its dumps stay under /databases/{uuid}/backups). For applications also configuration (the configuration document: settings, environment variables with their values sealed with the instance key, storages) or full (both in one archive); configuration and full of services and databases answer 422, and stop_during_backup is refused (422) for configuration backups. platform_instance backs up the whole instance. Needs full access to the resource's environment. resource_id: the integer id of the team's resource of that resource_type (the id of its detail; 404 otherwise). number_of_backups_remote (with an S3 storage): the newest archives of this backup kept in S3, the oldest beyond it deleted after each successful upload. s3_storage_id: an S3 storage of the team (404 when it is not one); backups to a storage with an encryption passphrase are OpenPGP-encrypted. keep_locally false needs an S3 storage.",
    body: CreateResourceBackupBody,
    responses: { 201: { description: "Created", schema: ResourceBackupMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const data = resourceBackupDto(await services.backups.resources.create(scope, body));
      return { status: 201, body: { message: "Resource backup created.", data } };
    },
  }),
  route({
    method: "get",
    path: ONE,
    tag: TAG,
    summary: "Get a resource backup with its recent executions",
    params: ResourceBackupParams,
    responses: { 200: { description: "Resource backup", schema: ResourceBackupDetail }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: resourceBackupDetailDto(await services.backups.resources.get(scope, params.id)) };
    },
  }),
  route({
    method: "put",
    path: ONE,
    tag: TAG,
    summary: "Change a resource backup",
    description: "Only the fields given change (frequency, s3_storage_id, enabled, keep_locally, number_of_backups_locally, number_of_backups_remote, stop_during_backup); the resource and types are fixed. Removing the S3 storage drops number_of_backups_remote.",
    params: ResourceBackupParams,
    body: UpdateResourceBackupBody,
    responses: { 200: { description: "Updated", schema: ResourceBackupMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const data = resourceBackupDto(await services.backups.resources.update(scope, params.id, body));
      return { body: { message: "Resource backup updated.", data } };
    },
  }),
  route({
    method: "delete",
    path: ONE,
    tag: TAG,
    summary: "Delete a resource backup",
    description: "A running backup of it is cancelled. Existing backup files on the server and objects in S3 stay (spec 4.10).",
    params: ResourceBackupParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      await services.backups.resources.remove(scope, params.id);
      return { body: { message: "Resource backup deleted; its backup files stay." } };
    },
  }),
  route({
    method: "post",
    path: `${ONE}/execute`,
    tag: TAG,
    summary: "Run a resource backup now",
    description:
      "Runs it once, outside its cron times (also when disabled); needs deploy permission on the environment. Asynchronous: follow the execution in GET /resource-backups/{id}. 409 while a run of it is open or when the server's agent is not connected, or when the resource has no persistent storage.",
    params: ResourceBackupParams,
    responses: { 200: { description: "Queued", schema: ResourceBackupQueued }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "Cannot run now (reason in message)" } },
    async handler({ scope, services, params }) {
      const id = await services.backups.resources.execute(scope, params.id);
      return { body: { message: "Backup queued.", execution_id: id } };
    },
  }),
  // ---- resource restores (issue 19, w7/restore) ----
  route({
    method: "post",
    path: `${ONE}/executions/{execution_id}/restore`,
    tag: TAG,
    summary: "Restore a backup into its resource or a clone (extension)",
    description:
      "Replaces the resource's volume contents (an application's, a service's or a database's) with the backup's: the agent streams the archive back (from the server or S3), decrypts it, and checks every file against the archive's manifest in a staging area before it stops the resource's containers, swaps the volumes' contents and starts them again. A configuration backup resets the application's settings, environment variables and storages to its configuration document (nothing is stopped; redeploy to run with them); a full backup does both. Needs full access. Asynchronous (202): follow restore_status and restore_reason on the execution in GET /resource-backups/{id}. 409 while a deployment of the application, a start or stop of the service or database, a backup or a restore of the resource runs, when the execution did not succeed, when its file is gone, or when the server's agent is not connected. passphrase: only for backups encrypted with an earlier passphrase of the storage. target_uuid: restore into another resource of the same kind of the team instead (a clone; full access on it too), each volume into the target's storage of the same name; another kind or a target lacking one of the storages is a 422, another team's or an unknown uuid a 404. target_uuid with a configuration or full backup is a 422 in this version.",
    params: ResourceBackupExecutionParams,
    body: RestoreResourceBackupBody,
    responses: {
      202: { description: "Restore queued", schema: ResourceRestoreQueued },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      409: { description: "Cannot restore now (reason in message)" },
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const r = await services.backups.resourceRestores.restore(scope, params.id, params.execution_id, body);
      return { status: 202, body: { message: "Restore queued.", execution_id: r.executionId, restore_status: r.restoreStatus } };
    },
  }),
];
