import {
  CreateS3StorageBody,
  MessageBody,
  PaginationQuery,
  S3Storage,
  S3StorageList,
  S3StorageMutation,
  S3StorageParams,
  S3StorageTestResult,
  UpdateS3StorageBody,
} from "@capstan/shared";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { s3StorageDto } from "../mappers/s3-storages.js";

const TAG = "S3 storages";

const ADMIN_ONLY = "Team owners and admins only.";

export const s3StorageRoutes = [
  route({
    method: "get",
    path: "/s3-storages",
    tag: TAG,
    summary: "List S3 storages",
    query: PaginationQuery,
    responses: { 200: { description: "S3 storages", schema: S3StorageList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      const box = services.s3Storages.box;
      return { body: await paginate(query, () => services.s3Storages.count(scope), async (w) => (await services.s3Storages.list(scope, w)).map((s) => s3StorageDto(s, box))) };
    },
  }),
  route({
    method: "post",
    path: "/s3-storages",
    tag: TAG,
    summary: "Add an S3 storage for backups",
    description: `${ADMIN_ONLY} access_key, secret_key and encryption_passphrase are stored encrypted and never returned. Endpoints naming loopback, link-local or metadata addresses are refused unless the instance allows private endpoints. The storage is not contacted: test it with POST /s3-storages/{id}/test.`,
    body: CreateS3StorageBody,
    responses: { 201: { description: "Created", schema: S3StorageMutation }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const s = await services.s3Storages.create(scope, body);
      return { status: 201, body: { message: "S3 storage created.", data: s3StorageDto(s, services.s3Storages.box) } };
    },
  }),
  route({
    method: "get",
    path: "/s3-storages/{id}",
    tag: TAG,
    summary: "Get an S3 storage",
    params: S3StorageParams,
    responses: { 200: { description: "S3 storage", schema: S3Storage }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: s3StorageDto(await services.s3Storages.get(scope, params.id), services.s3Storages.box) };
    },
  }),
  route({
    method: "patch",
    path: "/s3-storages/{id}",
    tag: TAG,
    summary: "Change an S3 storage",
    description: `${ADMIN_ONLY} Only the fields given change. Changing a connection field (endpoint, region, bucket, path_prefix, path_style, keys) resets is_usable until the next test. encryption_passphrase null stops encrypting later backups.`,
    params: S3StorageParams,
    body: UpdateS3StorageBody,
    responses: { 200: { description: "Updated", schema: S3StorageMutation }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 422: ERR[422] },
    async handler({ scope, services, params, body }) {
      const s = await services.s3Storages.update(scope, params.id, body);
      return { body: { message: "S3 storage updated.", data: s3StorageDto(s, services.s3Storages.box) } };
    },
  }),
  route({
    method: "delete",
    path: "/s3-storages/{id}",
    tag: TAG,
    summary: "Delete an S3 storage",
    description: `${ADMIN_ONLY} Refused (409, saying what still needs it) while backup schedules send backups there, backups have their object in it (backup_count) or a run is uploading to it. Objects of deleted schedules and databases stay in the bucket.`,
    params: S3StorageParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "Schedules or backups still need the storage" } },
    async handler({ scope, services, params }) {
      await services.s3Storages.remove(scope, params.id);
      return { body: { message: "S3 storage deleted." } };
    },
  }),
  route({
    method: "post",
    path: "/s3-storages/{id}/test",
    tag: TAG,
    summary: "Test the connection to an S3 storage",
    description: `${ADMIN_ONLY} Checks the bucket, then writes and deletes a small object under the path prefix. A failed test is not an HTTP error: it answers 200 with usable false and a short reason. Records is_usable and last_tested_at.`,
    params: S3StorageParams,
    responses: { 200: { description: "Test result", schema: S3StorageTestResult }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      const r = await services.s3Storages.test(scope, params.id);
      return {
        body: r.usable
          ? { message: "The S3 storage is reachable and writable.", usable: true }
          : { message: "The S3 storage could not be used.", usable: false, error: r.error ?? "unknown error" },
      };
    },
  }),
];
