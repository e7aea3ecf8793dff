/**
 * `/cost/create`, `/cost/query`, `/cost/purge`: a project's own token prices, which calls read
 * with `include_costs` before the server's list prices. Schema-validated bodies, the project
 * authorized, then one store call.
 */
import type { RouteModule } from '../context.js';
import { createTokenPriceStore } from '../store/token-prices.js';
import {
  CostCreateReqSchema,
  CostPurgeReqSchema,
  CostQueryReqSchema,
  type CostCreateReq,
  type CostCreateRes,
  type CostPurgeReq,
  type CostQueryReq,
  type CostQueryRes,
} from '../../wire/costs.js';

export const costsRoutes: RouteModule = (app, ctx) => {
  const prices = createTokenPriceStore(ctx.db);

  app.post<{ Body: CostCreateReq }>('/cost/create', { schema: { body: CostCreateReqSchema } }, async (request): Promise<CostCreateRes> => {
    // The writer is whoever authenticated: a `wb_user_id` in the body is ignored.
    const wbUserId = ctx.authorizeProject(request, request.body.project_id);
    return prices.create(request.body, wbUserId);
  });

  app.post<{ Body: CostQueryReq }>('/cost/query', { schema: { body: CostQueryReqSchema } }, async (request): Promise<CostQueryRes> => {
    ctx.authorizeProject(request, request.body.project_id);
    return { results: prices.query(request.body) };
  });

  app.post<{ Body: CostPurgeReq }>('/cost/purge', { schema: { body: CostPurgeReqSchema } }, async (request) => {
    ctx.authorizeProject(request, request.body.project_id);
    prices.purge(request.body.project_id, request.body.query);
    return {};
  });
};
