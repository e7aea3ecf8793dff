/**
 * Call records on the wire (SPEC §2.1). One TypeBox schema per body: the server validates with
 * it, and the TypeScript types below are derived from it, so the two cannot drift apart.
 *
 * Request bodies are closed (`additionalProperties: false` -> 422 on unknown keys), as the hosted
 * service's `BaseModelStrict` models are: the envelopes (`batch`, `mode`, `req`, `start`/`end`)
 * and the read, query, delete and update bodies. StartedCall/EndedCall/CompletedCall are open: the
 * hosted service ignores keys it does not know there, and so do we.
 *
 * Id shapes (span ids, UUIDs, lowercase only) are a 400 with a reason, not a schema 422, so they
 * are checked by `isCallId`/`isTraceId` rather than by a `pattern` here.
 */
import { Type, type Static } from 'typebox';
import { JsonObject, NullableString, SortByListSchema } from './common.js';
import type { Feedback } from './feedback.js';
const NullableInteger = Type.Union([Type.Integer(), Type.Null()]);

export const StartedCallSchema = Type.Object(
  {
    project_id: Type.String(),
    id: Type.Optional(NullableString),
    op_name: Type.String(),
    display_name: Type.Optional(NullableString),
    trace_id: Type.Optional(NullableString),
    parent_id: Type.Optional(NullableString),
    thread_id: Type.Optional(NullableString),
    turn_id: Type.Optional(NullableString),
    started_at: Type.String(),
    attributes: JsonObject,
    inputs: JsonObject,
    otel_dump: Type.Optional(Type.Union([JsonObject, Type.Null()])),
    wb_user_id: Type.Optional(NullableString),
    wb_run_id: Type.Optional(NullableString),
    wb_run_step: Type.Optional(NullableInteger),
  },
  { additionalProperties: true },
);
export type StartedCall = Static<typeof StartedCallSchema>;

export const EndedCallSchema = Type.Object(
  {
    project_id: Type.String(),
    id: Type.String(),
    ended_at: Type.String(),
    exception: Type.Optional(NullableString),
    output: Type.Optional(Type.Unknown()),
    summary: JsonObject,
    wb_run_step_end: Type.Optional(NullableInteger),
  },
  { additionalProperties: true },
);
export type EndedCall = Static<typeof EndedCallSchema>;

export const StartItemSchema = Type.Object(
  {
    mode: Type.Literal('start'),
    req: Type.Object({ start: StartedCallSchema }, { additionalProperties: false }),
  },
  { additionalProperties: false },
);
export const EndItemSchema = Type.Object(
  {
    mode: Type.Literal('end'),
    req: Type.Object({ end: EndedCallSchema }, { additionalProperties: false }),
  },
  { additionalProperties: false },
);
export type StartItem = Static<typeof StartItemSchema>;
export type EndItem = Static<typeof EndItemSchema>;
/** One entry of `call/upsert_batch`: exactly one of a start part or an end part. */
export type UpsertItem = StartItem | EndItem;

/** A call sent whole to `/v2/{entity}/{project}/calls/complete` (complete-mode projects). */
export const CompletedCallSchema = Type.Object(
  {
    project_id: Type.String(),
    id: Type.String(),
    trace_id: Type.String(),
    op_name: Type.String(),
    display_name: Type.Optional(NullableString),
    parent_id: Type.Optional(NullableString),
    thread_id: Type.Optional(NullableString),
    turn_id: Type.Optional(NullableString),
    started_at: Type.String(),
    ended_at: Type.String(),
    attributes: JsonObject,
    inputs: JsonObject,
    output: Type.Optional(Type.Unknown()),
    summary: Type.Optional(JsonObject),
    exception: Type.Optional(NullableString),
    otel_dump: Type.Optional(Type.Union([JsonObject, Type.Null()])),
    wb_user_id: Type.Optional(NullableString),
    wb_run_id: Type.Optional(NullableString),
    wb_run_step: Type.Optional(NullableInteger),
    wb_run_step_end: Type.Optional(NullableInteger),
  },
  { additionalProperties: true },
);
export type CompletedCall = Static<typeof CompletedCallSchema>;

/**
 * What `call/upsert_batch` validates each item against. Deliberately wider than `UpsertItem`:
 * `mode` is any string and `req` may hold `start` and/or `end`, so that an unknown mode or a mode
 * that does not match its `req` reaches the route and gets the 400 of SPEC §2.1, while unknown
 * keys at any envelope level are still a schema 422.
 */
export const UpsertItemInputSchema = Type.Object(
  {
    mode: Type.String(),
    req: Type.Object(
      { start: Type.Optional(StartedCallSchema), end: Type.Optional(EndedCallSchema) },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
);
export type UpsertItemInput = Static<typeof UpsertItemInputSchema>;

export const CallUpsertBatchReqSchema = Type.Object(
  { batch: Type.Array(UpsertItemInputSchema) },
  { additionalProperties: false },
);
export type CallUpsertBatchReq = { batch: UpsertItem[] };

export const CallStartReqSchema = Type.Object({ start: StartedCallSchema }, { additionalProperties: false });
export type CallStartReq = Static<typeof CallStartReqSchema>;

export const CallEndReqSchema = Type.Object({ end: EndedCallSchema }, { additionalProperties: false });
export type CallEndReq = Static<typeof CallEndReqSchema>;

/** Answer to a start part: the call's id and trace id (generated when the start had none). */
export interface CallStartRes {
  id: string;
  trace_id: string;
}
/** Answer to an end part. */
export type CallEndRes = Record<string, never>;
export interface CallUpsertBatchRes {
  res: Array<CallStartRes | CallEndRes>;
}

export const CallsCompleteReqSchema = Type.Object(
  { batch: Type.Array(CompletedCallSchema) },
  { additionalProperties: false },
);
export type CallsCompleteReq = Static<typeof CallsCompleteReqSchema>;

const Flag = Type.Optional(Type.Union([Type.Boolean(), Type.Null()]));

export const CallReadReqSchema = Type.Object(
  {
    project_id: Type.String(),
    id: Type.String(),
    include_costs: Flag,
    include_storage_size: Flag,
    include_total_storage_size: Flag,
  },
  { additionalProperties: false },
);
export type CallReadReq = Static<typeof CallReadReqSchema>;

/** One model's entry of `summary.weave.costs` (present with `include_costs`). */
export interface CallCost {
  prompt_tokens: number;
  completion_tokens: number;
  requests: number;
  total_tokens: number;
  prompt_token_cost: number;
  completion_token_cost: number;
  prompt_tokens_total_cost: number;
  completion_tokens_total_cost: number;
  /** `USD`, or the unit a project's own price (`cost/create`) names. */
  prompt_token_cost_unit: string;
  completion_token_cost_unit: string;
  effective_date: string;
  provider_id: string;
  /** `project` for a project's own price, `default` for the server's list price. */
  pricing_level: 'default' | 'project';
  /** The project's id, or `default`. */
  pricing_level_id: string;
  created_by: string;
  created_at: string;
}

/** The derived part of a call's summary, computed on every read and never stored. */
export interface CallWeaveSummary {
  status: 'success' | 'error' | 'running' | 'descendant_error';
  /** Present when both start and end times are known. */
  latency_ms?: number;
  trace_name: string;
  costs?: Record<string, CallCost>;
  /** Present with `include_feedback`: the call's feedback records, oldest first. */
  feedback?: Array<Omit<Feedback, 'id' | 'project_id'>>;
}

/** A call as reads and queries return it (SPEC §2.1, "Call (read form)"). */
export interface Call {
  id: string;
  project_id: string;
  op_name: string;
  display_name: string | null;
  trace_id: string;
  parent_id: string | null;
  thread_id: string | null;
  turn_id: string | null;
  started_at: string;
  ended_at: string | null;
  deleted_at: string | null;
  attributes: Record<string, unknown>;
  inputs: Record<string, unknown>;
  output: unknown;
  summary: Record<string, unknown> & { weave: CallWeaveSummary };
  exception: string | null;
  wb_user_id: string | null;
  wb_run_id: string | null;
  wb_run_step: number | null;
  wb_run_step_end: number | null;
  storage_size_bytes: number | null;
  total_storage_size_bytes: number | null;
}

export interface CallReadRes {
  call: Call | null;
}

/** Fields every call a query answers carries, whatever `columns` names (as the service does). */
export type AlwaysReturnedCallField = 'id' | 'project_id' | 'op_name' | 'trace_id' | 'started_at';

/** The read-form field a column names (`inputs.question` -> `inputs`). */
type FieldOfColumn<C> = C extends `${infer Field}.${string}` ? Field : C;

/**
 * What a calls query answers per call for its `columns`: the whole call when none are named (or
 * an empty list), else the named fields and the ones always returned (the answer holds the other
 * fields too, at their defaults: `{}` or null, as the service's does; the type leaves them out
 * so that a default is not read as the call's value); for columns known only as
 * `string[]`, the fields always returned and maybe the rest. Not distributed over a union: a
 * `columns` that may be absent (`string[] | undefined`, or the method's own constraint, as in
 * `ReturnType<CallbridgeClient['callsQuery']>`) gives whole calls.
 *
 * @example
 * type Row = CallWithColumns<readonly ['inputs.question', 'output']>;
 * // Pick<Call, 'id' | 'project_id' | 'op_name' | 'trace_id' | 'started_at' | 'inputs' | 'output'>
 */
export type CallWithColumns<C extends readonly string[] | null | undefined> = [C] extends [readonly [string, ...string[]]]
  ? Pick<Call, AlwaysReturnedCallField | Extract<FieldOfColumn<C[number]>, keyof Call>>
  : [C] extends [readonly []]
    ? Call
    : [C] extends [readonly string[]]
      ? Pick<Call, AlwaysReturnedCallField> & Partial<Call>
      : Call;

const StringList = Type.Optional(Type.Union([Type.Array(Type.String()), Type.Null()]));

/**
 * Filters of `calls/stream_query`. Closed (unknown keys are a 422): a filter the server would
 * silently ignore returns wrong results. An empty or null list means "no filter on this field",
 * as in the hosted service.
 */
export const CallsFilterSchema = Type.Object(
  {
    op_names: StringList,
    call_ids: StringList,
    trace_ids: StringList,
    parent_ids: StringList,
    thread_ids: StringList,
    turn_ids: StringList,
    wb_user_ids: StringList,
    wb_run_ids: StringList,
    trace_roots_only: Flag,
    /** Calls whose inputs (output) hold one of these refs as a text value, at any depth; `<ref prefix>:*` for any version. */
    input_refs: StringList,
    output_refs: StringList,
  },
  { additionalProperties: false },
);
export type CallsFilter = Static<typeof CallsFilterSchema>;

// Bounded so every accepted value binds as an SQLite integer.
const Count = Type.Optional(Type.Union([Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }), Type.Null()]));

export const CallsQueryReqSchema = Type.Object(
  {
    project_id: Type.String(),
    filter: Type.Optional(Type.Union([CallsFilterSchema, Type.Null()])),
    /** `{"$expr": ...}` (SPEC §2.4); its grammar is checked by the query compiler. */
    query: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    sort_by: Type.Optional(SortByListSchema),
    limit: Count,
    offset: Count,
    columns: StringList,
    include_costs: Flag,
    include_storage_size: Flag,
    include_total_storage_size: Flag,
    /** Each call's feedback records, oldest first, in `summary.weave.feedback`. */
    include_feedback: Flag,
    /** Accepted as the service accepts it, and ignored: the local server stores no refs to expand. */
    expand_columns: StringList,
    return_expanded_column_values: Flag,
  },
  { additionalProperties: false },
);
export type CallsQueryReq = Static<typeof CallsQueryReqSchema>;

/** `calls/query_stats`: `calls/stream_query`'s selection, counted (at most `limit` calls). */
export const CallsQueryStatsReqSchema = Type.Object(
  {
    project_id: Type.String(),
    filter: Type.Optional(Type.Union([CallsFilterSchema, Type.Null()])),
    query: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    limit: Count,
    include_total_storage_size: Flag,
    /** Accepted as the service accepts it, and ignored, as in `calls/stream_query`. */
    expand_columns: StringList,
  },
  { additionalProperties: false },
);
export type CallsQueryStatsReq = Static<typeof CallsQueryStatsReqSchema>;
export interface CallsQueryStatsRes {
  count: number;
  /** With `include_total_storage_size`: the storage of the selected root calls' traces; else null. */
  total_storage_size_bytes: number | null;
}

/** The hosted service caps one delete at 1000 ids (more: a 413, checked by the route). */
export const MAX_DELETE_IDS = 1000;

export const CallsDeleteReqSchema = Type.Object(
  {
    project_id: Type.String(),
    call_ids: Type.Array(Type.String()),
    wb_user_id: Type.Optional(NullableString),
  },
  { additionalProperties: false },
);
export type CallsDeleteReq = Static<typeof CallsDeleteReqSchema>;
export interface CallsDeleteRes {
  num_deleted: number;
}

export const CallUpdateReqSchema = Type.Object(
  {
    project_id: Type.String(),
    call_id: Type.String(),
    /**
     * The only field an update may change, optional as on the service, which answers 400 when
     * it is missing ("One of [display_name] is required for call update").
     */
    display_name: Type.Optional(NullableString),
    wb_user_id: Type.Optional(NullableString),
  },
  { additionalProperties: false },
);
export type CallUpdateReq = Static<typeof CallUpdateReqSchema>;

/** `op_name` and `display_name` limits of SPEC §2.1 (longer: 400). */
export const MAX_OP_NAME_CHARS = 128;
export const MAX_DISPLAY_NAME_CHARS = 1024;

const SPAN_ID = /^[0-9a-f]{16}$/;
const TRACE_HEX_ID = /^[0-9a-f]{32}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A call id or parent id: an OTel span id (16 lowercase hex) or a canonical lowercase UUID. */
export function isCallId(value: string): boolean {
  return SPAN_ID.test(value) || UUID.test(value);
}

/** A trace id: an OTel trace id (32 lowercase hex) or a canonical lowercase UUID. */
export function isTraceId(value: string): boolean {
  return TRACE_HEX_ID.test(value) || UUID.test(value);
}
