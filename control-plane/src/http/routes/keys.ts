import {
  CreatedPrivateKey,
  CreatePrivateKeyBody,
  MessageBody,
  PaginationQuery,
  PrivateKey,
  PrivateKeyList,
  PrivateKeyParams,
  UpdatePrivateKeyBody,
} from "@capstan/shared";
import { z } from "zod";
import { paginate } from "../pagination.js";
import { route } from "../route.js";
import { ERR } from "../dto.js";
import { keyDto } from "../mappers/keys.js";

export const keyRoutes = [
  route({
    method: "get",
    path: "/security/keys",
    tag: "Private keys",
    summary: "List SSH private keys (public parts only)",
    query: PaginationQuery,
    responses: { 200: { description: "Keys", schema: PrivateKeyList }, 401: ERR[401], 403: ERR[403] },
    async handler({ scope, services, query }) {
      return {
        body: await paginate(
          query,
          () => services.keys.count(scope),
          async (w) => (await services.keys.list(scope, w)).map(keyDto),
        ),
      };
    },
  }),
  route({
    method: "post",
    path: "/security/keys",
    tag: "Private keys",
    summary: "Store an SSH private key",
    body: CreatePrivateKeyBody,
    responses: { 201: { description: "Created", schema: CreatedPrivateKey }, 401: ERR[401], 403: ERR[403], 422: ERR[422] },
    async handler({ scope, services, body }) {
      const k = await services.keys.create(scope, body);
      return { status: 201, body: { uuid: k.uuid, name: k.name, public_key: k.publicKey, fingerprint: k.fingerprint } };
    },
  }),
  route({
    method: "get",
    path: "/security/keys/{uuid}",
    tag: "Private keys",
    summary: "Get a key's public part and fingerprint",
    params: PrivateKeyParams,
    responses: { 200: { description: "Key", schema: PrivateKey }, 401: ERR[401], 403: ERR[403], 404: ERR[404] },
    async handler({ scope, services, params }) {
      return { body: keyDto(await services.keys.get(scope, params.uuid)) };
    },
  }),
  route({
    method: "patch",
    path: "/security/keys/{uuid}",
    tag: "Private keys",
    summary: "Rename a key or replace its private part",
    params: PrivateKeyParams,
    body: UpdatePrivateKeyBody,
    responses: {
      200: { description: "Updated", schema: z.object({ message: z.string(), data: PrivateKey }) },
      401: ERR[401],
      403: ERR[403],
      404: ERR[404],
      422: ERR[422],
    },
    async handler({ scope, services, params, body }) {
      const k = await services.keys.update(scope, params.uuid, body);
      return { body: { message: "Private key updated.", data: keyDto(k) } };
    },
  }),
  route({
    method: "delete",
    path: "/security/keys/{uuid}",
    tag: "Private keys",
    summary: "Delete a key",
    params: PrivateKeyParams,
    responses: { 200: { description: "Deleted", schema: MessageBody }, 401: ERR[401], 403: ERR[403], 404: ERR[404], 409: { description: "Servers or applications use the key" } },
    async handler({ scope, services, params }) {
      await services.keys.remove(scope, params.uuid);
      return { body: { message: "Private key deleted." } };
    },
  }),
];
