/**
 * `/obj/create`, `/obj/read`, `/objs/query` (SPEC §2.2) and `/obj/delete`: schema-validated
 * bodies, the project authorized, then one store call. An object's value is digested and kept as
 * Python's text of it as the body spelled it (digest-bodies.ts).
 */
import type { RouteModule } from '../context.js';
import { objectValueText, readObjCreateBody } from '../digest-bodies.js';
import { createObjectStore } from '../store/objects.js';
import {
  ObjCreateReqSchema,
  ObjDeleteReqSchema,
  ObjQueryReqSchema,
  ObjReadReqSchema,
  type ObjCreateReq,
  type ObjCreateRes,
  type ObjDeleteReq,
  type ObjDeleteRes,
  type ObjQueryReq,
  type ObjReadReq,
} from '../../wire/objects.js';

/** Answers written as text (the object values spliced in as stored): JSON, as Fastify would type them. */
const JSON_TYPE = 'application/json; charset=utf-8';

export const objectsRoutes: RouteModule = (app, ctx) => {
  const objects = createObjectStore(ctx.db);

  app.post<{ Body: ObjCreateReq }>(
    '/obj/create',
    { schema: { body: ObjCreateReqSchema }, config: { readBodyVerbatim: readObjCreateBody } },
    async (request): Promise<ObjCreateRes> => {
      const { obj } = request.body;
      // The writer is whoever authenticated: a `wb_user_id` in the body is ignored.
      const wbUserId = ctx.authorizeProject(request, obj.project_id);
      return objects.create({
        projectId: obj.project_id,
        objectId: obj.object_id,
        val: obj.val,
        // A class's members are added to the value (objects.ts): its text is then written from the value.
        valText: obj.builtin_object_class == null ? objectValueText(obj) : undefined,
        builtinObjectClass: obj.builtin_object_class,
        wbUserId,
      });
    },
  );

  app.post<{ Body: ObjReadReq }>(
    '/obj/read',
    { schema: { body: ObjReadReqSchema } },
    async (request, reply) => {
      const body = request.body;
      ctx.authorizeProject(request, body.project_id);
      // Written as text: the value goes out as stored (an `ObjReadRes`).
      const obj = objects.readJson(body.project_id, body.object_id, body.digest, body.metadata_only === true);
      return reply.type(JSON_TYPE).send(`{"obj":${obj}}`);
    },
  );

  app.post<{ Body: ObjQueryReq }>(
    '/objs/query',
    { schema: { body: ObjQueryReqSchema } },
    async (request, reply) => {
      ctx.authorizeProject(request, request.body.project_id);
      // Written as text: each value goes out as stored (an `ObjQueryRes`).
      return reply.type(JSON_TYPE).send(`{"objs":[${objects.queryJson(request.body).join(',')}]}`);
    },
  );

  app.post<{ Body: ObjDeleteReq }>(
    '/obj/delete',
    { schema: { body: ObjDeleteReqSchema } },
    async (request): Promise<ObjDeleteRes> => {
      const body = request.body;
      ctx.authorizeProject(request, body.project_id);
      return { num_deleted: objects.delete(body.project_id, body.object_id, body.digests ?? null) };
    },
  );
};
