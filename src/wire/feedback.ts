/**
 * Feedback records on the wire (SPEC §2.3): the bodies of `/feedback/create`, `/feedback/query`
 * and `/feedback/purge` and what they answer, and of the hosted service's `/feedback/batch/create`
 * (where the Weave SDKs send feedback) and `/feedback/replace` (where its UI edits a record).
 * Request bodies are closed, as the hosted service's models are (`extra="forbid"`): unknown keys,
 * wrong types, missing fields, bad sort directions and negative limits are a 422.
 */
import { Type, type Static } from 'typebox';
import { JsonObject, NullableCount, NullableString, QuerySchema, SortByListSchema } from './common.js';

/** The members of a new feedback record: `/feedback/create` and the start of `/feedback/replace`. */
const FEEDBACK_CREATE_PROPERTIES = {
  project_id: Type.String(),
  weave_ref: Type.String(),
  feedback_type: Type.String({ minLength: 1 }),
  payload: JsonObject,
  creator: Type.Optional(NullableString),
  id: Type.Optional(NullableString),
  annotation_ref: Type.Optional(NullableString),
  runnable_ref: Type.Optional(NullableString),
  call_ref: Type.Optional(NullableString),
  trigger_ref: Type.Optional(NullableString),
  wb_user_id: Type.Optional(NullableString),
};

/** Body of `POST /feedback/create`. */
export const FeedbackCreateReqSchema = Type.Object(FEEDBACK_CREATE_PROPERTIES, { additionalProperties: false });
export type FeedbackCreateReq = Static<typeof FeedbackCreateReqSchema>;

/** Answer of `POST /feedback/create`. */
export interface FeedbackCreateRes {
  readonly id: string;
  readonly created_at: string;
  readonly wb_user_id: string;
  readonly payload: Record<string, unknown>;
}

/**
 * Most `fields` entries a query takes: each is one result column, and SQLite refuses result
 * sets of 2000 columns.
 */
export const MAX_FEEDBACK_FIELDS = 500;

/** Body of `POST /feedback/query`. */
export const FeedbackQueryReqSchema = Type.Object(
  {
    project_id: Type.String(),
    fields: Type.Optional(Type.Union([Type.Array(Type.String(), { maxItems: MAX_FEEDBACK_FIELDS }), Type.Null()])),
    query: Type.Optional(Type.Union([QuerySchema, Type.Null()])),
    sort_by: Type.Optional(SortByListSchema),
    limit: Type.Optional(NullableCount),
    offset: Type.Optional(NullableCount),
  },
  { additionalProperties: false },
);
export type FeedbackQueryReq = Static<typeof FeedbackQueryReqSchema>;

/** A feedback record as stored and read back (every record field). */
export interface Feedback {
  readonly id: string;
  readonly project_id: string;
  readonly weave_ref: string;
  readonly feedback_type: string;
  readonly payload: Record<string, unknown>;
  readonly creator: string | null;
  readonly created_at: string;
  readonly wb_user_id: string;
  readonly annotation_ref: string | null;
  readonly runnable_ref: string | null;
  readonly call_ref: string | null;
  readonly trigger_ref: string | null;
}

/** The record fields, in the order results list them. */
export const FEEDBACK_RECORD_FIELDS = [
  'id',
  'project_id',
  'weave_ref',
  'feedback_type',
  'payload',
  'creator',
  'created_at',
  'wb_user_id',
  'annotation_ref',
  'runnable_ref',
  'call_ref',
  'trigger_ref',
] as const satisfies ReadonlyArray<keyof Feedback>;

/**
 * Answer of `POST /feedback/query`: whole records without `fields`, otherwise one object per
 * record keyed by each requested field string.
 */
export interface FeedbackQueryRes {
  readonly result: Array<Record<string, unknown>>;
}

/** Body of `POST /feedback/purge`: `query` selects records by id only. */
export const FeedbackPurgeReqSchema = Type.Object(
  { project_id: Type.String(), query: QuerySchema },
  { additionalProperties: false },
);
export type FeedbackPurgeReq = Static<typeof FeedbackPurgeReqSchema>;

/** Answer of `POST /feedback/purge` (empty, as the hosted service answers). */
export type FeedbackPurgeRes = Record<string, never>;

/**
 * Most records in one `/feedback/batch/create` (the service sets no count; the SDKs batch by
 * bytes). Each record may be checked against an annotation spec, so a batch is bounded in count
 * as well as in the time its checks take (see the store).
 */
export const MAX_FEEDBACK_BATCH = 1000;

/** Body of `POST /feedback/batch/create`: records of any projects the caller may write to. */
export const FeedbackCreateBatchReqSchema = Type.Object(
  { batch: Type.Array(FeedbackCreateReqSchema, { maxItems: MAX_FEEDBACK_BATCH }) },
  { additionalProperties: false },
);
export type FeedbackCreateBatchReq = Static<typeof FeedbackCreateBatchReqSchema>;

/** Answer of `POST /feedback/batch/create`: one entry per record, in order. */
export interface FeedbackCreateBatchRes {
  readonly res: FeedbackCreateRes[];
}

/**
 * Body of `POST /feedback/replace`: a new record (with its own id, or a new one) that takes the
 * place of record `feedback_id`.
 */
export const FeedbackReplaceReqSchema = Type.Object(
  { ...FEEDBACK_CREATE_PROPERTIES, feedback_id: Type.String({ minLength: 1 }) },
  { additionalProperties: false },
);
export type FeedbackReplaceReq = Static<typeof FeedbackReplaceReqSchema>;

/** Answer of `POST /feedback/replace`: the new record's parts, as `/feedback/create` answers. */
export type FeedbackReplaceRes = FeedbackCreateRes;
