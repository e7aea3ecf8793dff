/**
 * Threads on the wire: the body of the hosted service's `/threads/stream_query` and the lines it
 * answers. A thread is the calls that share a `thread_id`, summed up over its turns (the calls
 * whose `turn_id` is their own id: what `withThread` marks). Request bodies are closed, as the
 * service's models are: unknown keys, wrong types and missing fields are a 422.
 */
import { Type, type Static } from 'typebox';
import { NullableCount, NullableString, SortByListSchema } from './common.js';

/** Most `thread_ids` one query names. */
export const MAX_THREAD_IDS = 1000;

/** `filter` of a threads query: turns started after / before an instant, and some threads only. */
export const ThreadsQueryFilterSchema = Type.Object(
  {
    after_datetime: Type.Optional(NullableString),
    before_datetime: Type.Optional(NullableString),
    thread_ids: Type.Optional(Type.Union([Type.Array(Type.String(), { maxItems: MAX_THREAD_IDS }), Type.Null()])),
  },
  { additionalProperties: false },
);

/** Body of `POST /threads/stream_query`. */
export const ThreadsQueryReqSchema = Type.Object(
  {
    project_id: Type.String(),
    filter: Type.Optional(Type.Union([ThreadsQueryFilterSchema, Type.Null()])),
    limit: Type.Optional(NullableCount),
    offset: Type.Optional(NullableCount),
    sort_by: Type.Optional(SortByListSchema),
  },
  { additionalProperties: false },
);
export type ThreadsQueryReq = Static<typeof ThreadsQueryReqSchema>;

/** One line of `/threads/stream_query`: a thread summed up over its turns. */
export interface Thread {
  readonly thread_id: string;
  /** Turns in the thread. */
  readonly turn_count: number;
  /** Earliest start of a turn. */
  readonly start_time: string;
  /** Latest end of a turn. */
  readonly last_updated: string;
  /** The turn that started first. */
  readonly first_turn_id: string | null;
  /** The turn that ended last. */
  readonly last_turn_id: string | null;
  /** Median and 99th percentile of the ended turns' durations, in ms. */
  readonly p50_turn_duration_ms: number | null;
  readonly p99_turn_duration_ms: number | null;
}

/** What `sort_by` may name, in the order a thread's members are written. */
export const THREAD_SORT_FIELDS = [
  'thread_id',
  'turn_count',
  'start_time',
  'last_updated',
  'p50_turn_duration_ms',
  'p99_turn_duration_ms',
] as const satisfies ReadonlyArray<keyof Thread>;
