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
  type ObjQueryRes,
  type ObjReadReq,
  type ObjReadRes,
} from '../../wire/objects.js';

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
        valText: objectValueText(obj),
        builtinObjectClass: obj.builtin_object_class,
        wbUserId,
      });
    },
  );

  app.post<{ Body: ObjReadReq }>(
    '/obj/read',
    { schema: { body: ObjReadReqSchema } },
    async (request): Promise<ObjReadRes> => {
      const body = request.body;
      ctx.authorizeProject(request, body.project_id);
      return { obj: objects.read(body.project_id, body.object_id, body.digest, body.metadata_only === true) };
    },
  );

  app.post<{ Body: ObjQueryReq }>(
    '/objs/query',
    { schema: { body: ObjQueryReqSchema } },
    async (request): Promise<ObjQueryRes> => {
      ctx.authorizeProject(request, request.body.project_id);
      return { objs: objects.query(request.body) };
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
