/**
 * `/feedback/create`, `/feedback/query`, `/feedback/purge` (SPEC §2.3), and the hosted service's
 * `/feedback/batch/create` and `/feedback/replace`: schema-validated bodies, the project (every
 * project of a batch) authorized, then one store call. Payloads are read with the text they
 * arrived as (digest-bodies.ts) and answered as stored, so the answers are written as text.
 */
import type { RouteModule } from '../context.js';
import { readFeedbackBatchBody, readFeedbackBody } from '../digest-bodies.js';
import { createFeedbackStore } from '../store/feedback.js';
import { projectAuthorizer } from './project-authorizer.js';
import {
  FeedbackCreateBatchReqSchema,
  FeedbackCreateReqSchema,
  FeedbackPurgeReqSchema,
  FeedbackQueryReqSchema,
  FeedbackReplaceReqSchema,
  type FeedbackCreateBatchReq,
  type FeedbackCreateReq,
  type FeedbackPurgeReq,
  type FeedbackPurgeRes,
  type FeedbackQueryReq,
  type FeedbackReplaceReq,
} from '../../wire/feedback.js';

/** Answers written as text (payloads spliced in as stored): JSON, as Fastify would type them. */
const JSON_TYPE = 'application/json; charset=utf-8';

export const feedbackRoutes: RouteModule = (app, ctx) => {
  const feedback = createFeedbackStore(ctx.db);

  app.post<{ Body: FeedbackCreateReq }>(
    '/feedback/create',
    { schema: { body: FeedbackCreateReqSchema }, config: { readBodyVerbatim: readFeedbackBody } },
    async (request, reply) => {
      // The writer is whoever authenticated: a `wb_user_id` in the body is ignored.
      const wbUserId = ctx.authorizeProject(request, request.body.project_id);
      // A `FeedbackCreateRes`.
      return reply.type(JSON_TYPE).send(feedback.create(request.body, wbUserId));
    },
  );

  app.post<{ Body: FeedbackCreateBatchReq }>(
    '/feedback/batch/create',
    { schema: { body: FeedbackCreateBatchReqSchema }, config: { readBodyVerbatim: readFeedbackBatchBody } },
    async (request, reply) => {
      const { batch } = request.body;
      if (batch.length === 0) return { res: [] };
      // Every record's project before anything is checked or stored (a 403 stores nothing); the
      // writer is the one authenticated user, whatever `wb_user_id` the records carry.
      const authorize = projectAuthorizer(ctx, request);
      const wbUserId = batch.map((item) => authorize(item.project_id))[0] as string;
      // A `FeedbackCreateBatchRes`.
      return reply.type(JSON_TYPE).send(`{"res":[${feedback.createBatch(batch, wbUserId).join(',')}]}`);
    },
  );

  app.post<{ Body: FeedbackReplaceReq }>(
    '/feedback/replace',
    { schema: { body: FeedbackReplaceReqSchema }, config: { readBodyVerbatim: readFeedbackBody } },
    async (request, reply) => {
      const { feedback_id: feedbackId, ...replacement } = request.body;
      const wbUserId = ctx.authorizeProject(request, replacement.project_id);
      // A `FeedbackReplaceRes`.
      return reply.type(JSON_TYPE).send(feedback.replace(feedbackId, replacement, wbUserId));
    },
  );

  app.post<{ Body: FeedbackQueryReq }>(
    '/feedback/query',
    { schema: { body: FeedbackQueryReqSchema } },
    async (request, reply) => {
      ctx.authorizeProject(request, request.body.project_id);
      // A `FeedbackQueryRes`.
      return reply.type(JSON_TYPE).send(`{"result":[${feedback.query(request.body).join(',')}]}`);
    },
  );

  app.post<{ Body: FeedbackPurgeReq }>(
    '/feedback/purge',
    { schema: { body: FeedbackPurgeReqSchema } },
    async (request): Promise<FeedbackPurgeRes> => {
      ctx.authorizeProject(request, request.body.project_id);
      feedback.purge(request.body.project_id, request.body.query);
      return {};
    },
  );
};
