/**
 * Tables (the hosted service's `table/*`, which its SDKs use for datasets): schema-validated
 * bodies, the project authorized, then one store call. Rows are read with the text they arrived
 * as (digest-bodies.ts), since their digests depend on it.
 */
import type { RouteModule } from '../context.js';
import { pagedText } from '../paged-text.js';
import { createTableStore, type TableQuery, type TableUpdate } from '../store/tables.js';
import { readTableCreateBody, readTableUpdateBody, rowText } from '../digest-bodies.js';
import {
  TableCreateFromDigestsReqSchema,
  TableCreateReqSchema,
  TableQueryReqSchema,
  TableQueryStatsBatchReqSchema,
  TableQueryStatsReqSchema,
  TableUpdateReqSchema,
  type TableCreateFromDigestsReq,
  type TableCreateFromDigestsRes,
  type TableCreateReq,
  type TableCreateRes,
  type TableQueryReq,
  type TableQueryStatsBatchReq,
  type TableQueryStatsBatchRes,
  type TableQueryStatsReq,
  type TableQueryStatsRes,
  type TableUpdateReq,
  type TableUpdateRes,
} from '../../wire/tables.js';

export const tablesRoutes: RouteModule = (app, ctx) => {
  const tables = createTableStore(ctx.db, { readers: ctx.readers });
  app.addHook('onClose', async () => tables.close());

  app.post(
    '/table/create',
    { schema: { body: TableCreateReqSchema }, config: { readBodyVerbatim: readTableCreateBody } },
    async (request): Promise<TableCreateRes> => {
      const { table } = request.body as TableCreateReq;
      ctx.authorizeProject(request, table.project_id);
      const texts = table.rows.map((row, index) => rowText(row, `table.rows[${index}]`));
      return tables.create(table.project_id, texts, table.expected_digest);
    },
  );

  app.post(
    '/table/update',
    { schema: { body: TableUpdateReqSchema }, config: { readBodyVerbatim: readTableUpdateBody } },
    async (request): Promise<TableUpdateRes> => {
      const body = request.body as TableUpdateReq;
      ctx.authorizeProject(request, body.project_id);
      const updates = body.updates.map((spec, index): TableUpdate => {
        if ('append' in spec) return { kind: 'append', rowText: rowText(spec.append.row, `updates[${index}].append.row`) };
        if ('pop' in spec) return { kind: 'pop', index: spec.pop.index };
        return { kind: 'insert', index: spec.insert.index, rowText: rowText(spec.insert.row, `updates[${index}].insert.row`) };
      });
      return tables.update(body.project_id, body.base_digest, updates);
    },
  );

  app.post(
    '/table/create_from_digests',
    { schema: { body: TableCreateFromDigestsReqSchema } },
    async (request): Promise<TableCreateFromDigestsRes> => {
      const body = request.body as TableCreateFromDigestsReq;
      ctx.authorizeProject(request, body.project_id);
      return tables.createFromDigests(body.project_id, body.row_digests, body.expected_digest);
    },
  );

  // Both forms are streamed from the rows as they are read: a table can be far larger than a body.
  app.post('/table/query', { schema: { body: TableQueryReqSchema } }, async (request, reply) => {
    const body = request.body as TableQueryReq;
    ctx.authorizeProject(request, body.project_id);
    const cursor = tables.query(toTableQuery(body));
    return reply.type('application/json; charset=utf-8').send(pagedText(cursor, { open: '{"rows":[', separator: ',', close: ']}' }));
  });

  app.post('/table/query_stream', { schema: { body: TableQueryReqSchema } }, async (request, reply) => {
    const body = request.body as TableQueryReq;
    ctx.authorizeProject(request, body.project_id);
    const cursor = tables.query(toTableQuery(body));
    return reply.type('application/jsonl; charset=utf-8').send(pagedText(cursor, { end: '\n' }));
  });

  app.post('/table/query_stats', { schema: { body: TableQueryStatsReqSchema } }, async (request): Promise<TableQueryStatsRes> => {
    const body = request.body as TableQueryStatsReq;
    ctx.authorizeProject(request, body.project_id);
    // A table that does not exist has no rows (the service's older answer; its newer one is a 500).
    return { count: tables.stats(body.project_id, [body.digest], false)[0]?.count ?? 0 };
  });

  app.post(
    '/table/query_stats_batch',
    { schema: { body: TableQueryStatsBatchReqSchema } },
    async (request): Promise<TableQueryStatsBatchRes> => {
      const body = request.body as TableQueryStatsBatchReq;
      ctx.authorizeProject(request, body.project_id);
      return { tables: tables.stats(body.project_id, body.digests ?? [], body.include_storage_size === true) };
    },
  );
};

function toTableQuery(body: TableQueryReq): TableQuery {
  return {
    projectId: body.project_id,
    digest: body.digest,
    rowDigests: body.filter?.row_digests ?? null,
    sortBy: body.sort_by ?? null,
    limit: body.limit ?? null,
    offset: body.offset ?? null,
  };
}
