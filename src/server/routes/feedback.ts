/**
 * `/feedback/create`, `/feedback/query`, `/feedback/purge` (SPEC §2.3), and the hosted service's
 * `/feedback/batch/create` and `/feedback/replace`: schema-validated bodies, the project (every
 * project of a batch) authorized, then one store call.
 */
import type { RouteModule } from '../context.js';
import { createFeedbackStore } from '../store/feedback.js';
import { projectAuthorizer } from './project-authorizer.js';
import {
  FeedbackCreateBatchReqSchema,
  FeedbackCreateReqSchema,
  FeedbackPurgeReqSchema,
  FeedbackQueryReqSchema,
  FeedbackReplaceReqSchema,
  type FeedbackCreateBatchReq,
  type FeedbackCreateBatchRes,
  type FeedbackCreateReq,
  type FeedbackCreateRes,
  type FeedbackPurgeReq,
  type FeedbackPurgeRes,
  type FeedbackQueryReq,
  type FeedbackQueryRes,
  type FeedbackReplaceReq,
  type FeedbackReplaceRes,
} from '../../wire/feedback.js';

export const feedbackRoutes: RouteModule = (app, ctx) => {
  const feedback = createFeedbackStore(ctx.db);

  app.post<{ Body: FeedbackCreateReq }>(
    '/feedback/create',
    { schema: { body: FeedbackCreateReqSchema } },
    async (request): Promise<FeedbackCreateRes> => {
      // The writer is whoever authenticated: a `wb_user_id` in the body is ignored.
      const wbUserId = ctx.authorizeProject(request, request.body.project_id);
      return feedback.create(request.body, wbUserId);
    },
  );

  app.post<{ Body: FeedbackCreateBatchReq }>(
    '/feedback/batch/create',
    { schema: { body: FeedbackCreateBatchReqSchema } },
    async (request): Promise<FeedbackCreateBatchRes> => {
      const { batch } = request.body;
      if (batch.length === 0) return { res: [] };
      // Every record's project before anything is checked or stored (a 403 stores nothing); the
      // writer is the one authenticated user, whatever `wb_user_id` the records carry.
      const authorize = projectAuthorizer(ctx, request);
      const wbUserId = batch.map((item) => authorize(item.project_id))[0] as string;
      return { res: feedback.createBatch(batch, wbUserId) };
    },
  );

  app.post<{ Body: FeedbackReplaceReq }>(
    '/feedback/replace',
    { schema: { body: FeedbackReplaceReqSchema } },
    async (request): Promise<FeedbackReplaceRes> => {
      const { feedback_id: feedbackId, ...replacement } = request.body;
      const wbUserId = ctx.authorizeProject(request, replacement.project_id);
      return feedback.replace(feedbackId, replacement, wbUserId);
    },
  );

  app.post<{ Body: FeedbackQueryReq }>(
    '/feedback/query',
    { schema: { body: FeedbackQueryReqSchema } },
    async (request): Promise<FeedbackQueryRes> => {
      ctx.authorizeProject(request, request.body.project_id);
      return { result: feedback.query(request.body) };
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
