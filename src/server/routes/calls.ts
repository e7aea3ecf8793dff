/**
 * Call routes (SPEC §2.1, §2.6): thin handlers that authorize, check what the schema cannot
 * (mode/req agreement, complete mode, path vs body project), and hand rows to the calls store.
 * Also the two service routes `GET /health` (no credentials) and `GET /server_info`.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import packageJson from '../../../package.json' with { type: 'json' };
import type { RouteModule, ServerContext } from '../context.js';
import { BadRequestError, HttpError } from '../errors.js';
import { quote } from '../quote.js';
import { createCallsStore, type CallPart, type QueryRequest } from '../store/calls.js';
import { checkNameLength, toCompleteRows, toEndRow, toStartRow, type EndInput, type StartInput } from '../store/calls-rows.js';
import { createVerbatimBodyReader } from '../verbatim-body.js';
import {
  CallEndReqSchema,
  CallReadReqSchema,
  CallsCompleteReqSchema,
  CallsDeleteReqSchema,
  CallsQueryReqSchema,
  CallsQueryStatsReqSchema,
  CallStartReqSchema,
  CallUpdateReqSchema,
  CallUpsertBatchReqSchema,
  isCallId,
  MAX_DELETE_IDS,
  MAX_DISPLAY_NAME_CHARS,
  type CallEndReq,
  type CallReadReq,
  type CallsCompleteReq,
  type CallsDeleteReq,
  type CallsQueryReq,
  type CallsQueryStatsReq,
  type CallsQueryStatsRes,
  type CallStartReq,
  type CallStartRes,
  type CallUpdateReq,
} from '../../wire/calls.js';
import { projectAuthorizer } from './project-authorizer.js';

/**
 * One `call/upsert_batch` item as the handler receives it: parsed, or read verbatim with the
 * parts' free-form fields kept as text (verbatim-body.ts). Either way it passed the schema.
 */
interface UpsertItemBody {
  mode: string;
  req: { start?: StartInput; end?: EndInput };
}

/**
 * Batches are read straight from their bytes: the parse and the re-stringify of the stored
 * values were ~40 % of the server's time per call (bench/README.md, server ingest).
 */
const readUpsertBatchVerbatim = createVerbatimBodyReader(CallUpsertBatchReqSchema);

/** The error code the hosted service gives v1 writes to a project in complete mode. */
export const COMPLETE_MODE_REQUIRED = 'CALLS_COMPLETE_MODE_REQUIRED';

const JSON_TYPE = 'application/json; charset=utf-8';

export const callsRoutes: RouteModule = (app, ctx) => {
  const store = createCallsStore(ctx.db, { readers: ctx.readers });
  app.addHook('onClose', async () => store.close());

  app.get('/health', { config: { public: true } }, async () => ({ status: 'ok' }));

  app.get('/server_info', async () => ({ trace_server_version: packageJson.version }));

  app.post('/call/start', { schema: { body: CallStartReqSchema } }, async (request) => {
    const { start } = request.body as CallStartReq;
    const username = ctx.authorizeProject(request, start.project_id);
    rejectInCompleteMode(ctx);
    const row = toStartRow(start, username, ['body', 'start']);
    store.writeParts([{ kind: 'start', row }]);
    return { id: row[1], trace_id: row[4] } satisfies CallStartRes;
  });

  app.post('/call/end', { schema: { body: CallEndReqSchema } }, async (request) => {
    const { end } = request.body as CallEndReq;
    const username = ctx.authorizeProject(request, end.project_id);
    rejectInCompleteMode(ctx);
    store.writeParts([{ kind: 'end', row: toEndRow(end, username, ['body', 'end']) }]);
    return {};
  });

  const upsertBatchOptions = { schema: { body: CallUpsertBatchReqSchema }, config: { readBodyVerbatim: readUpsertBatchVerbatim } };
  app.post('/call/upsert_batch', upsertBatchOptions, async (request) => {
    const { batch } = request.body as { batch: UpsertItemBody[] };
    const authorize = projectAuthorizer(ctx, request);
    // As /call/start: access first, then complete mode, before any item is checked. A complete-mode
    // project must answer CALLS_COMPLETE_MODE_REQUIRED whatever the items hold, or an exporter
    // would take a bad item's plain 400 for a reason to split the batch instead of switching.
    for (const item of batch) {
      const projectId = item.req.start?.project_id ?? item.req.end?.project_id;
      if (projectId !== undefined) authorize(projectId);
    }
    if (batch.length > 0) rejectInCompleteMode(ctx);
    const parts: CallPart[] = new Array(batch.length);
    const res: Array<CallStartRes | Record<string, never>> = new Array(batch.length);
    for (let index = 0; index < batch.length; index++) {
      const part = toPart(batch[index] as UpsertItemBody, index, authorize);
      parts[index] = part;
      res[index] = part.kind === 'start' ? { id: part.row[1], trace_id: part.row[4] } : {};
    }
    store.writeParts(parts);
    return { res };
  });

  app.post('/v2/:entity/:project/calls/complete', { schema: { body: CallsCompleteReqSchema } }, async (request) => {
    const { entity, project } = request.params as { entity: string; project: string };
    const projectId = `${entity}/${project}`;
    const username = ctx.authorizeProject(request, projectId);
    const parts: CallPart[] = [];
    (request.body as CallsCompleteReq).batch.forEach((call, index) => {
      if (call.project_id !== projectId) {
        throw new BadRequestError(
          `batch[${index}].project_id ${quote(call.project_id)} does not match the project in the path ${quote(projectId)}`,
        );
      }
      const [start, end] = toCompleteRows(call, username, ['body', 'batch', index]);
      parts.push({ kind: 'start', row: start }, { kind: 'end', row: end });
    });
    store.writeParts(parts);
    return {};
  });

  app.post('/call/read', { schema: { body: CallReadReqSchema } }, async (request, reply) => {
    const body = request.body as CallReadReq;
    ctx.authorizeProject(request, body.project_id);
    if (!isCallId(body.id)) throw new BadRequestError(`Invalid call id ${quote(body.id)}`);
    const call = store.readJson(body.project_id, body.id, {
      includeCosts: body.include_costs === true,
      includeStorageSize: body.include_storage_size === true,
      includeTotalStorageSize: body.include_total_storage_size === true,
    });
    // The call is JSON text already (stored JSON spliced in): send it without a second pass.
    return sendJsonText(reply, `{"call":${call ?? 'null'}}`);
  });

  app.post('/calls/stream_query', { schema: { body: CallsQueryReqSchema } }, async (request, reply) => {
    const body = request.body as CallsQueryReq;
    ctx.authorizeProject(request, body.project_id);
    return reply.type('application/jsonl; charset=utf-8').send(store.queryText(toQueryRequest(body), { end: '\n' }));
  });

  // The service's unstreamed form of the same query (`{"calls": [...]}`), for clients that want
  // one JSON answer; still read and sent row by row.
  app.post('/calls/query', { schema: { body: CallsQueryReqSchema } }, async (request, reply) => {
    const body = request.body as CallsQueryReq;
    ctx.authorizeProject(request, body.project_id);
    const answer = store.queryText(toQueryRequest(body), { open: '{"calls":[', separator: ',', close: ']}' });
    return reply.type('application/json; charset=utf-8').send(answer);
  });

  app.post('/calls/query_stats', { schema: { body: CallsQueryStatsReqSchema } }, async (request): Promise<CallsQueryStatsRes> => {
    const body = request.body as CallsQueryStatsReq;
    ctx.authorizeProject(request, body.project_id);
    return store.queryStats({
      projectId: body.project_id,
      filter: body.filter ?? null,
      query: body.query ?? null,
      limit: body.limit ?? null,
      includeTotalStorageSize: body.include_total_storage_size === true,
    });
  });

  app.post('/calls/delete', { schema: { body: CallsDeleteReqSchema } }, async (request) => {
    const body = request.body as CallsDeleteReq;
    ctx.authorizeProject(request, body.project_id);
    if (body.call_ids.length > MAX_DELETE_IDS) {
      // As the service answers (RequestTooLarge): a client may split the list and send it again.
      throw new HttpError(413, `Cannot delete more than ${MAX_DELETE_IDS} calls at once`);
    }
    return { num_deleted: store.deleteCalls(body.project_id, body.call_ids) };
  });

  app.post('/call/update', { schema: { body: CallUpdateReqSchema } }, async (request) => {
    const body = request.body as CallUpdateReq;
    ctx.authorizeProject(request, body.project_id);
    if (!isCallId(body.call_id)) throw new BadRequestError(`Invalid call_id ${quote(body.call_id)}`);
    const displayName = body.display_name;
    if (displayName === undefined || displayName === null) throw new BadRequestError('One of [display_name] is required for call update');
    checkNameLength(displayName, 'display_name', MAX_DISPLAY_NAME_CHARS, ['body']);
    store.updateDisplayName(body.project_id, body.call_id, displayName);
    return {};
  });
};

function toQueryRequest(body: CallsQueryReq): QueryRequest {
  return {
    projectId: body.project_id,
    filter: body.filter ?? null,
    query: body.query ?? null,
    sortBy: body.sort_by ?? null,
    limit: body.limit ?? null,
    offset: body.offset ?? null,
    columns: body.columns ?? null,
    includeCosts: body.include_costs === true,
    includeStorageSize: body.include_storage_size === true,
    includeTotalStorageSize: body.include_total_storage_size === true,
    includeFeedback: body.include_feedback === true,
  };
}

/** One batch item as a checked part. A mode other than start/end, or one that disagrees with its req, is a 400. */
function toPart(item: UpsertItemBody, index: number, authorize: (projectId: string) => string): CallPart {
  const { start, end } = item.req;
  if (item.mode === 'start' && start !== undefined && end === undefined) {
    return { kind: 'start', row: toStartRow(start, authorize(start.project_id), ['body', 'batch', index, 'req', 'start']) };
  }
  if (item.mode === 'end' && end !== undefined && start === undefined) {
    return { kind: 'end', row: toEndRow(end, authorize(end.project_id), ['body', 'batch', index, 'req', 'end']) };
  }
  if (item.mode !== 'start' && item.mode !== 'end') {
    throw new BadRequestError(`batch[${index}].mode ${quote(item.mode)} is not "start" or "end"`);
  }
  throw new BadRequestError(`batch[${index}]: mode "${item.mode}" needs req.${item.mode} and nothing else`);
}

function rejectInCompleteMode(ctx: ServerContext): void {
  if (ctx.completeMode) {
    throw new BadRequestError(
      'This project is in complete mode: write calls with POST /v2/{entity}/{project}/calls/complete',
      COMPLETE_MODE_REQUIRED,
    );
  }
}

function sendJsonText(reply: FastifyReply, text: string): FastifyReply {
  return reply.type(JSON_TYPE).send(text);
}
