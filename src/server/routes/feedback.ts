/**
 * `/feedback/create`, `/feedback/query`, `/feedback/purge` (SPEC §2.3): schema-validated
 * bodies, the project authorized, then one store call.
 */
import type { RouteModule } from '../context.js';
import { createFeedbackStore } from '../store/feedback.js';
import {
  FeedbackCreateReqSchema,
  FeedbackPurgeReqSchema,
  FeedbackQueryReqSchema,
  type FeedbackCreateReq,
  type FeedbackCreateRes,
  type FeedbackPurgeReq,
  type FeedbackPurgeRes,
  type FeedbackQueryReq,
  type FeedbackQueryRes,
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
