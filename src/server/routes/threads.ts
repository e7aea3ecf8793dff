/**
 * `/threads/stream_query`: a project's threads summed up over their turns (store/threads.ts), as
 * JSON lines.
 */
import type { RouteModule } from '../context.js';
import { cursorOf, pagedText } from '../paged-text.js';
import { createThreadStore } from '../store/threads.js';
import { ThreadsQueryReqSchema, type ThreadsQueryReq } from '../../wire/threads.js';

export const threadsRoutes: RouteModule = (app, ctx) => {
  const threads = createThreadStore(ctx.db);

  app.post<{ Body: ThreadsQueryReq }>('/threads/stream_query', { schema: { body: ThreadsQueryReqSchema } }, async (request, reply) => {
    ctx.authorizeProject(request, request.body.project_id);
    const lines = threads.query(request.body).values();
    return reply.type('application/jsonl; charset=utf-8').send(pagedText(cursorOf(lines, () => {}, (thread) => JSON.stringify(thread)), { end: '\n' }));
  });
};
