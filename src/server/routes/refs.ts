/**
 * `/refs/read_batch`: the values `weave:///` refs name (store/refs.ts), after every ref's project
 * is authorized: a ref into a project the user may not read is a 403 for the whole request.
 */
import type { RouteModule } from '../context.js';
import { createRefReader } from '../store/refs.js';
import { createTableStore } from '../store/tables.js';
import { RefsReadBatchReqSchema, type RefsReadBatchReq } from '../../wire/tables.js';
import { projectAuthorizer } from './project-authorizer.js';

export const refsRoutes: RouteModule = (app, ctx) => {
  const tables = createTableStore(ctx.db, { readers: ctx.readers });
  const refs = createRefReader(ctx.db, tables);
  app.addHook('onClose', async () => tables.close());

  app.post('/refs/read_batch', { schema: { body: RefsReadBatchReqSchema } }, async (request, reply) => {
    const body = request.body as RefsReadBatchReq;
    // The answer is JSON text already: sent without a second pass.
    return reply.type('application/json; charset=utf-8').send(refs.readBatch(body.refs, projectAuthorizer(ctx, request)));
  });
};
