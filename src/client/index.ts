/**
 * The typed client: one method per endpoint of the service (SPEC §2.1-2.6), over the same
 * transport as the batcher.
 *
 * - Requests and answers are the wire types of `src/wire/*` (imported as types only: the client
 *   never loads TypeBox or anything of the server).
 * - A failed call throws a `CallbridgeHttpError` subclass (`AuthError`, `NotFoundError`,
 *   `RequestRejectedError`, `RequestTooLargeError`, `ServerError`, `NetworkError`, `TimeoutError`,
 *   `UnexpectedResponseError`) carrying `status`, `reason`, `errorCode`, `detail` and `url`.
 * - No retries here, by design: whether a call may be repeated is the caller's decision (reads
 *   can, a `feedback/create` without an id would create twice). Errors say `retryable` and
 *   `retryAfterMs` so a caller can decide. The batcher, which knows its writes are idempotent,
 *   retries on the transport's outcomes instead.
 */
import { Blob } from 'node:buffer';
import { FormData } from 'undici';
import { CallbridgeError, UnexpectedResponseError } from '../errors.js';
import { isProjectId, resolveConnection, type ConnectionOptions } from '../options.js';
import type {
  Call,
  CallEndReq,
  CallEndRes,
  CallReadReq,
  CallReadRes,
  CallStartReq,
  CallStartRes,
  CallUpdateReq,
  CallUpsertBatchReq,
  CallUpsertBatchRes,
  CallsCompleteReq,
  CallsDeleteReq,
  CallsDeleteRes,
  CallsQueryReq,
  CallsQueryStatsReq,
  CallsQueryStatsRes,
  CallWithColumns,
} from '../wire/calls.js';
import type { CostCreateReq, CostCreateRes, CostPurgeReq, CostQueryReq, CostQueryRes } from '../wire/costs.js';
import type { Thread, ThreadsQueryReq } from '../wire/threads.js';
import type {
  FeedbackCreateBatchReq,
  FeedbackCreateBatchRes,
  FeedbackCreateReq,
  FeedbackCreateRes,
  FeedbackPurgeReq,
  FeedbackQueryReq,
  FeedbackQueryRes,
  FeedbackReplaceReq,
  FeedbackReplaceRes,
} from '../wire/feedback.js';
import type { FileContentReq, FileCreateRes } from '../wire/files.js';
import type {
  ObjCreateReq,
  ObjCreateRes,
  ObjDeleteReq,
  ObjDeleteRes,
  ObjQueryReq,
  ObjQueryRes,
  ObjReadReq,
  ObjReadRes,
} from '../wire/objects.js';
import type {
  RefsReadBatchReq,
  RefsReadBatchRes,
  TableCreateFromDigestsReq,
  TableCreateFromDigestsRes,
  TableCreateReq,
  TableCreateRes,
  TableQueryReq,
  TableQueryRes,
  TableQueryStatsBatchReq,
  TableQueryStatsBatchRes,
  TableQueryStatsReq,
  TableQueryStatsRes,
  TableUpdateReq,
  TableUpdateRes,
} from '../wire/tables.js';
import { classify } from './classify.js';
import { JsonLinesError, parseJsonLines } from './jsonl.js';
import { errorFromOutcome } from './outcome-error.js';
import { createTransport, type ExchangeRequest, type HttpTransport } from './transport.js';

/** Per-call options. */
export interface RequestOptions {
  /** Cancels the request; the call then rejects with a `NetworkError`. */
  readonly signal?: AbortSignal;
}

/**
 * A calls query as the client takes it: its `columns` typed, so that the calls it answers have the
 * fields those columns select (`CallWithColumns`): `columns: ['inputs.question']` gives calls with
 * `inputs` and the fields always returned, and no `output` to read by mistake.
 */
export type CallsQueryInput<C extends readonly string[] | null | undefined = undefined> = Omit<CallsQueryReq, 'columns'> & {
  columns?: C;
};

/** Body of `callsComplete`: the `/v2/{entity}/{project}/calls/complete` path comes from `project_id`. */
export interface CallsCompleteInput extends CallsCompleteReq {
  readonly project_id: string;
}

/** Body of `fileCreate`: sent as `multipart/form-data` (field `project_id`, file part `file`). */
export interface FileCreateInput {
  readonly project_id: string;
  /** File name of the part. @default 'file' */
  readonly name?: string;
  /** The bytes (a string is sent as its UTF-8 bytes). */
  readonly content: Uint8Array | string | Blob;
}

/** `GET /health`. */
export interface HealthRes {
  readonly status: string;
}

/** `GET /server_info`. */
export interface ServerInfoRes {
  readonly trace_server_version?: string;
  readonly [key: string]: unknown;
}

/** An empty answer (`{}`). */
export type EmptyRes = Record<string, never>;

/**
 * One method per endpoint; every method rejects with a `CallbridgeHttpError` subclass when the
 * request fails, and with a `CallbridgeError` before sending a request that cannot be sent (a body
 * JSON cannot carry: `CALLBRIDGE_INVALID_REQUEST`; a malformed `project_id` in the URL:
 * `CALLBRIDGE_INVALID_PROJECT_ID`).
 */
export interface CallbridgeClient {
  /** Base URL the client talks to, as resolved (explicit option, then env, then default). */
  readonly baseUrl: string;
  /** `POST /call/start`: one call's start part. */
  callStart(req: CallStartReq, options?: RequestOptions): Promise<CallStartRes>;
  /** `POST /call/end`: one call's end part. */
  callEnd(req: CallEndReq, options?: RequestOptions): Promise<CallEndRes>;
  /** `POST /call/upsert_batch`: start and end parts, one result per item in order. */
  callUpsertBatch(req: CallUpsertBatchReq, options?: RequestOptions): Promise<CallUpsertBatchRes>;
  /** `POST /call/read`: `{call: null}` when there is no such call (not an error). */
  callRead(req: CallReadReq, options?: RequestOptions): Promise<CallReadRes>;
  /**
   * `POST /calls/stream_query`: the calls one by one as the server streams them. The request is
   * sent on the first `next()`; breaking out of the loop closes the response.
   */
  callsStreamQuery<const C extends readonly string[] | null | undefined = undefined>(
    req: CallsQueryInput<C>,
    options?: RequestOptions,
  ): AsyncGenerator<CallWithColumns<C>, void, undefined>;
  /** `callsStreamQuery` collected into an array. */
  callsQuery<const C extends readonly string[] | null | undefined = undefined>(
    req: CallsQueryInput<C>,
    options?: RequestOptions,
  ): Promise<Array<CallWithColumns<C>>>;
  /**
   * `POST /calls/query_stats`: how many calls a filter and query select (at most `limit`), without
   * reading them; with `include_total_storage_size`, the storage of the selected root calls' traces.
   */
  callsQueryStats(req: CallsQueryStatsReq, options?: RequestOptions): Promise<CallsQueryStatsRes>;
  /** `POST /calls/delete`. */
  callsDelete(req: CallsDeleteReq, options?: RequestOptions): Promise<CallsDeleteRes>;
  /** `POST /call/update`: rename a call (`display_name`). */
  callUpdate(req: CallUpdateReq, options?: RequestOptions): Promise<EmptyRes>;
  /** `POST /v2/{entity}/{project}/calls/complete`: whole calls, for projects in complete mode. */
  callsComplete(req: CallsCompleteInput, options?: RequestOptions): Promise<EmptyRes>;
  /** `POST /obj/create`: store a value; the same value again returns the same digest. */
  objCreate(req: ObjCreateReq, options?: RequestOptions): Promise<ObjCreateRes>;
  /** `POST /obj/read`: throws `NotFoundError` when absent or deleted. */
  objRead(req: ObjReadReq, options?: RequestOptions): Promise<ObjReadRes>;
  /** `POST /objs/query`. */
  objsQuery(req: ObjQueryReq, options?: RequestOptions): Promise<ObjQueryRes>;
  /**
   * `POST /obj/delete`: soft-delete the versions `digests` names, or every version; throws
   * `NotFoundError` when one is missing (nothing is deleted then).
   */
  objDelete(req: ObjDeleteReq, options?: RequestOptions): Promise<ObjDeleteRes>;
  /**
   * `POST /table/create`: store a table of rows (JSON objects); answers its digest and one digest
   * per row. The same rows again give the same digests.
   */
  tableCreate(req: TableCreateReq, options?: RequestOptions): Promise<TableCreateRes>;
  /**
   * `POST /table/update`: a new table made of `base_digest` by `append`, `pop` and `insert`
   * updates in order; throws `NotFoundError` when the base table is absent.
   */
  tableUpdate(req: TableUpdateReq, options?: RequestOptions): Promise<TableUpdateRes>;
  /** `POST /table/create_from_digests`: a table of rows the project holds already. */
  tableCreateFromDigests(req: TableCreateFromDigestsReq, options?: RequestOptions): Promise<TableCreateFromDigestsRes>;
  /**
   * `POST /table/query`: a table's rows (table order unless `sort_by`), each with its
   * `original_index`; no rows for a table that does not exist.
   */
  tableQuery(req: TableQueryReq, options?: RequestOptions): Promise<TableQueryRes>;
  /** `POST /table/query_stats`: a table's row count. */
  tableQueryStats(req: TableQueryStatsReq, options?: RequestOptions): Promise<TableQueryStatsRes>;
  /** `POST /table/query_stats_batch`: row counts (and storage sizes) of the tables that exist. */
  tableQueryStatsBatch(req: TableQueryStatsBatchReq, options?: RequestOptions): Promise<TableQueryStatsBatchRes>;
  /**
   * `POST /refs/read_batch`: the value each `weave:///` ref names, in order (null for a deleted
   * object or a path the value does not have); throws `NotFoundError` when an object is absent.
   */
  refsReadBatch(req: RefsReadBatchReq, options?: RequestOptions): Promise<RefsReadBatchRes>;
  /**
   * `POST /threads/stream_query`: a project's threads (calls grouped by `thread_id`), each summed
   * up over its turns, read as they stream in.
   */
  threadsStreamQuery(req: ThreadsQueryReq, options?: RequestOptions): AsyncGenerator<Thread, void, undefined>;
  /** `POST /feedback/create`. */
  feedbackCreate(req: FeedbackCreateReq, options?: RequestOptions): Promise<FeedbackCreateRes>;
  /**
   * `POST /feedback/batch/create`: several records in one request, stored all or none (give each
   * an `id` to retry safely).
   */
  feedbackCreateBatch(req: FeedbackCreateBatchReq, options?: RequestOptions): Promise<FeedbackCreateBatchRes>;
  /** `POST /feedback/replace`: a new record in place of record `feedback_id`. */
  feedbackReplace(req: FeedbackReplaceReq, options?: RequestOptions): Promise<FeedbackReplaceRes>;
  /** `POST /feedback/query`. */
  feedbackQuery(req: FeedbackQueryReq, options?: RequestOptions): Promise<FeedbackQueryRes>;
  /** `POST /feedback/purge`: delete by id. */
  feedbackPurge(req: FeedbackPurgeReq, options?: RequestOptions): Promise<EmptyRes>;
  /**
   * `POST /cost/create`: a project's own token prices by model name, which `include_costs` uses
   * before the service's list prices. Answers `[id, llm_id]` of each price stored.
   */
  costCreate(req: CostCreateReq, options?: RequestOptions): Promise<CostCreateRes>;
  /** `POST /cost/query`: a project's own token prices. */
  costQuery(req: CostQueryReq, options?: RequestOptions): Promise<CostQueryRes>;
  /** `POST /cost/purge`: delete prices by id. */
  costPurge(req: CostPurgeReq, options?: RequestOptions): Promise<EmptyRes>;
  /** `POST /file/create` (multipart): returns the digest of the bytes. */
  fileCreate(req: FileCreateInput, options?: RequestOptions): Promise<FileCreateRes>;
  /** `POST /file/content`: the bytes; throws `NotFoundError` when absent. */
  fileContent(req: FileContentReq, options?: RequestOptions): Promise<Uint8Array>;
  /** `GET /health` (sent without credentials). */
  health(options?: RequestOptions): Promise<HealthRes>;
  /** `GET /server_info`. */
  serverInfo(options?: RequestOptions): Promise<ServerInfoRes>;
  /** Close the connection pool. Idempotent; calls after it reject with a `NetworkError`. */
  close(): Promise<void>;
}

/**
 * A typed client for the service at `options.baseUrl` (or `CALLBRIDGE_BASE_URL`, ...; see
 * `ConnectionOptions`). Throws `InvalidOptionError` for a bad option.
 *
 * @example
 * const client = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
 * const { call } = await client.callRead({ project_id: 'acme/demo', id });
 * for await (const c of client.callsStreamQuery({ project_id: 'acme/demo', limit: 10 })) console.log(c.op_name);
 * await client.close();
 */
export function createClient(options: ConnectionOptions = {}): CallbridgeClient {
  return new TypedClient(createTransport(resolveConnection(options)));
}

class TypedClient implements CallbridgeClient {
  readonly #transport: HttpTransport;

  constructor(transport: HttpTransport) {
    this.#transport = transport;
  }

  get baseUrl(): string {
    return this.#transport.baseUrl;
  }

  callStart(req: CallStartReq, options?: RequestOptions): Promise<CallStartRes> {
    return this.#postJson('/call/start', req, options);
  }

  callEnd(req: CallEndReq, options?: RequestOptions): Promise<CallEndRes> {
    return this.#postJson('/call/end', req, options);
  }

  callUpsertBatch(req: CallUpsertBatchReq, options?: RequestOptions): Promise<CallUpsertBatchRes> {
    return this.#postJson('/call/upsert_batch', req, options);
  }

  callRead(req: CallReadReq, options?: RequestOptions): Promise<CallReadRes> {
    return this.#postJson('/call/read', req, options);
  }

  callsStreamQuery<const C extends readonly string[] | null | undefined = undefined>(
    req: CallsQueryInput<C>,
    options?: RequestOptions,
  ): AsyncGenerator<CallWithColumns<C>, void, undefined> {
    return this.#streamObjects<CallWithColumns<C>>('/calls/stream_query', req, options, 'call');
  }

  threadsStreamQuery(req: ThreadsQueryReq, options?: RequestOptions): AsyncGenerator<Thread, void, undefined> {
    return this.#streamObjects<Thread>('/threads/stream_query', req, options, 'thread');
  }

  /** The JSON objects a JSON-lines answer streams, read as they arrive. */
  async *#streamObjects<T>(path: string, req: unknown, options: RequestOptions | undefined, what: string): AsyncGenerator<T, void, undefined> {
    const url = this.#url(path);
    const result = await this.#transport.exchange(this.#jsonRequest(path, req, options), (body) => body);
    if (result.kind !== 'ok') throw errorFromOutcome(result, url);
    const body = result.value;
    const lines = parseJsonLines(body);
    try {
      for (;;) {
        // Only errors from reading the answer are classified: one the caller throws in at the
        // `yield` (`stream.throw(error)`, as Readable.from does when destroyed) stays its own.
        let next: IteratorResult<unknown>;
        try {
          next = await lines.next();
        } catch (error) {
          if (error instanceof JsonLinesError) throw new UnexpectedResponseError({ url, status: result.status, reason: error.message, cause: error });
          // The socket broke (or timed out) mid-stream: the same classification as any send.
          throw errorFromOutcome(classify({ error, status: result.status }, { url, username: this.#transport.username }), url);
        }
        if (next.done === true) return;
        const value = next.value;
        if (value === null || typeof value !== 'object' || Array.isArray(value)) {
          throw new UnexpectedResponseError({ url, status: result.status, reason: `a line of the stream is not a ${what} object` });
        }
        yield value as T;
      }
    } finally {
      // A consumer that stops early leaves the rest unread: release the connection.
      body.destroy();
      await lines.return();
    }
  }

  async callsQuery<const C extends readonly string[] | null | undefined = undefined>(
    req: CallsQueryInput<C>,
    options?: RequestOptions,
  ): Promise<Array<CallWithColumns<C>>> {
    const calls: Array<CallWithColumns<C>> = [];
    for await (const call of this.callsStreamQuery(req, options)) calls.push(call);
    return calls;
  }

  callsQueryStats(req: CallsQueryStatsReq, options?: RequestOptions): Promise<CallsQueryStatsRes> {
    return this.#postJson('/calls/query_stats', req, options);
  }

  callsDelete(req: CallsDeleteReq, options?: RequestOptions): Promise<CallsDeleteRes> {
    return this.#postJson('/calls/delete', req, options);
  }

  callUpdate(req: CallUpdateReq, options?: RequestOptions): Promise<EmptyRes> {
    return this.#postJson('/call/update', req, options);
  }

  async callsComplete(req: CallsCompleteInput, options?: RequestOptions): Promise<EmptyRes> {
    const { project_id: projectId, ...body } = req;
    return this.#postJson(completePath(projectId), body, options);
  }

  objCreate(req: ObjCreateReq, options?: RequestOptions): Promise<ObjCreateRes> {
    return this.#postJson('/obj/create', req, options);
  }

  objRead(req: ObjReadReq, options?: RequestOptions): Promise<ObjReadRes> {
    return this.#postJson('/obj/read', req, options);
  }

  objsQuery(req: ObjQueryReq, options?: RequestOptions): Promise<ObjQueryRes> {
    return this.#postJson('/objs/query', req, options);
  }

  objDelete(req: ObjDeleteReq, options?: RequestOptions): Promise<ObjDeleteRes> {
    return this.#postJson('/obj/delete', req, options);
  }

  tableCreate(req: TableCreateReq, options?: RequestOptions): Promise<TableCreateRes> {
    return this.#postJson('/table/create', req, options);
  }

  tableUpdate(req: TableUpdateReq, options?: RequestOptions): Promise<TableUpdateRes> {
    return this.#postJson('/table/update', req, options);
  }

  tableCreateFromDigests(req: TableCreateFromDigestsReq, options?: RequestOptions): Promise<TableCreateFromDigestsRes> {
    return this.#postJson('/table/create_from_digests', req, options);
  }

  tableQuery(req: TableQueryReq, options?: RequestOptions): Promise<TableQueryRes> {
    return this.#postJson('/table/query', req, options);
  }

  tableQueryStats(req: TableQueryStatsReq, options?: RequestOptions): Promise<TableQueryStatsRes> {
    return this.#postJson('/table/query_stats', req, options);
  }

  tableQueryStatsBatch(req: TableQueryStatsBatchReq, options?: RequestOptions): Promise<TableQueryStatsBatchRes> {
    return this.#postJson('/table/query_stats_batch', req, options);
  }

  refsReadBatch(req: RefsReadBatchReq, options?: RequestOptions): Promise<RefsReadBatchRes> {
    return this.#postJson('/refs/read_batch', req, options);
  }

  feedbackCreate(req: FeedbackCreateReq, options?: RequestOptions): Promise<FeedbackCreateRes> {
    return this.#postJson('/feedback/create', req, options);
  }

  feedbackCreateBatch(req: FeedbackCreateBatchReq, options?: RequestOptions): Promise<FeedbackCreateBatchRes> {
    return this.#postJson('/feedback/batch/create', req, options);
  }

  feedbackReplace(req: FeedbackReplaceReq, options?: RequestOptions): Promise<FeedbackReplaceRes> {
    return this.#postJson('/feedback/replace', req, options);
  }

  feedbackQuery(req: FeedbackQueryReq, options?: RequestOptions): Promise<FeedbackQueryRes> {
    return this.#postJson('/feedback/query', req, options);
  }

  feedbackPurge(req: FeedbackPurgeReq, options?: RequestOptions): Promise<EmptyRes> {
    return this.#postJson('/feedback/purge', req, options);
  }

  costCreate(req: CostCreateReq, options?: RequestOptions): Promise<CostCreateRes> {
    return this.#postJson('/cost/create', req, options);
  }

  costQuery(req: CostQueryReq, options?: RequestOptions): Promise<CostQueryRes> {
    return this.#postJson('/cost/query', req, options);
  }

  costPurge(req: CostPurgeReq, options?: RequestOptions): Promise<EmptyRes> {
    return this.#postJson('/cost/purge', req, options);
  }

  async fileCreate(req: FileCreateInput, options?: RequestOptions): Promise<FileCreateRes> {
    const form = new FormData();
    form.append('project_id', req.project_id);
    const content = req.content instanceof Blob ? req.content : new Blob([req.content]);
    form.append('file', content, req.name ?? 'file');
    return this.#send({ path: '/file/create', body: form, ...signalOf(options) });
  }

  async fileContent(req: FileContentReq, options?: RequestOptions): Promise<Uint8Array> {
    const path = '/file/content';
    const result = await this.#transport.exchange(this.#jsonRequest(path, req, options), (body) => body.bytes());
    if (result.kind !== 'ok') throw errorFromOutcome(result, this.#url(path));
    return result.value;
  }

  health(options?: RequestOptions): Promise<HealthRes> {
    return this.#send({ method: 'GET', path: '/health', authenticate: false, ...signalOf(options) });
  }

  serverInfo(options?: RequestOptions): Promise<ServerInfoRes> {
    return this.#send({ method: 'GET', path: '/server_info', ...signalOf(options) });
  }

  close(): Promise<void> {
    return this.#transport.close();
  }

  // async so that a body JSON.stringify cannot serialise (a cycle, a bigint) rejects instead of throwing.
  async #postJson<T>(path: string, body: unknown, options: RequestOptions | undefined): Promise<T> {
    return this.#send(this.#jsonRequest(path, body, options));
  }

  #jsonRequest(path: string, body: unknown, options: RequestOptions | undefined): ExchangeRequest {
    return { path, body: requestJson(body, this.#url(path)), ...signalOf(options) };
  }

  /** Send, and return the JSON object the endpoint answers, or throw what went wrong. */
  async #send<T>(request: ExchangeRequest): Promise<T> {
    const url = this.#url(request.path);
    const outcome = await this.#transport.request(request);
    if (outcome.kind !== 'ok') throw errorFromOutcome(outcome, url);
    if (outcome.bodyError !== undefined) throw new UnexpectedResponseError({ url, status: outcome.status, reason: outcome.bodyError });
    // Every JSON endpoint answers an object; anything else means we are not talking to the service.
    if (outcome.body === null || typeof outcome.body !== 'object' || Array.isArray(outcome.body)) {
      throw new UnexpectedResponseError({ url, status: outcome.status, reason: `expected a JSON object, got ${JSON.stringify(outcome.body) ?? 'nothing'}` });
    }
    return outcome.body as T;
  }

  #url(path: string): string {
    return this.#transport.baseUrl + path;
  }
}

/** `/v2/{entity}/{project}/calls/complete`, each segment percent-encoded. */
/** The path of `calls/complete` for `projectId`, checked as the exporter's `projectId` option is. */
function completePath(projectId: unknown): string {
  if (!isProjectId(projectId)) {
    const got = typeof projectId === 'string' ? JSON.stringify(projectId) : typeof projectId;
    throw new CallbridgeError(`project_id must be "entity/project", got ${got}`, 'CALLBRIDGE_INVALID_PROJECT_ID');
  }
  const [entity, project] = projectId.split('/') as [string, string];
  return `/v2/${encodeURIComponent(entity)}/${encodeURIComponent(project)}/calls/complete`;
}

/**
 * The JSON text of a request body. A value JSON cannot carry (a cycle, a bigint) is the caller's
 * mistake, not the service's: a `CallbridgeError` (`CALLBRIDGE_INVALID_REQUEST`) naming the
 * endpoint, before anything is sent.
 */
function requestJson(body: unknown, url: string): string {
  try {
    return JSON.stringify(body);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new CallbridgeError(`The request to ${url} cannot be sent as JSON: ${reason}`, 'CALLBRIDGE_INVALID_REQUEST', { cause: error });
  }
}

function signalOf(options: RequestOptions | undefined): { signal?: AbortSignal } {
  return options?.signal === undefined ? {} : { signal: options.signal };
}
