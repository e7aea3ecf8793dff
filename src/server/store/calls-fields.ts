/**
 * The SQL of a call's fields, shared by the store's reads and the query compiler's field table,
 * so the derived values a query filters on are exactly the ones a read returns.
 */
import type { FieldTable } from '../query/fields.js';
import { CALL_FEEDBACK_FIELDS } from './call-feedback.js';
import { opNameOfRef } from '../query/sql-functions.js';

/**
 * Whether `summary.status_counts.error` counts errors, read as the hosted SQL reads it: as an
 * integer (`toInt64OrNull` of the value's text), so a JSON integer or a text that is a whole
 * integer (`"3"`, `"+3"`) above 0; `"0"`, `true`, `2.5` and `"abc"` count none. Only text
 * values (rare) read the path more than twice.
 */
const HAS_ERROR_COUNT_SQL = `CASE json_type(c.summary, '$.status_counts.error')
    WHEN 'integer' THEN json_extract(c.summary, '$.status_counts.error') > 0
    WHEN 'text' THEN json_extract(c.summary, '$.status_counts.error') GLOB '*[1-9]*'
      AND (CASE WHEN json_extract(c.summary, '$.status_counts.error') GLOB '+*'
        THEN substr(json_extract(c.summary, '$.status_counts.error'), 2)
        ELSE json_extract(c.summary, '$.status_counts.error') END) NOT GLOB '*[^0-9]*'
  END`;

/**
 * `summary.weave.status` (SPEC §2.1): error, else running, else descendant_error, else success.
 * Every read and every query of a project evaluates it on every row, so a summary SQLite cannot
 * parse (the write path refuses such values; a file written by other means may hold one) reads
 * as having no error counts instead of failing all of them with "malformed JSON".
 */
export const STATUS_SQL = `(CASE
  WHEN c.exception IS NOT NULL AND c.exception <> '' THEN 'error'
  WHEN c.ended_at IS NULL THEN 'running'
  WHEN CASE WHEN json_valid(c.summary) THEN ${HAS_ERROR_COUNT_SQL} END THEN 'descendant_error'
  ELSE 'success' END)`;

/**
 * `summary.weave.latency_ms`: whole milliseconds between start and end, rounded down as the
 * service's floor division of a timedelta does (an end 1.5 ms before its start, clocks of two
 * hosts apart, is -2). SQLite's integer division truncates toward zero, so a negative remainder
 * takes one more off.
 */
export const LATENCY_SQL = '((c.ended_us - c.started_us) / 1000 - ((c.ended_us - c.started_us) % 1000 < 0))';

/**
 * `summary.weave.trace_name` (SPEC §2.1): the display name, else the op name. As in the hosted
 * service, an empty display name counts as none, and the op name of an op ref
 * (`weave:///<entity>/<project>/op/<name>:<digest>`) is the `<name>` it names (`opNameOfRef`,
 * an SQL function: query/sql-functions.ts; the GLOB spares plain op names that JavaScript call).
 * A read computes it with {@link traceName}, a query with this; calls.test.ts checks that the two
 * agree.
 */
export const TRACE_NAME_SQL = `(CASE WHEN c.display_name <> '' THEN c.display_name
  WHEN c.op_name GLOB 'weave:///*' THEN op_name_of_ref(c.op_name) ELSE c.op_name END)`;

/** {@link TRACE_NAME_SQL} for a read, which has the row's names at hand. */
export function traceName(displayName: string | null, opName: string): string {
  return displayName !== null && displayName !== '' ? displayName : opNameOfRef(opName);
}

/** Stored bytes of one call's JSON (attributes + inputs + output + summary). */
export const STORAGE_SIZE_SQL = '(c.start_bytes + c.end_bytes)';

/** Rows that are calls: their start part has arrived and they are not deleted. */
export const VISIBLE_SQL = 'c.has_start = 1 AND c.deleted_at IS NULL';

/** Every field a calls query (`$expr`, `sort_by`) may name. */
export const CALL_FIELDS: FieldTable = {
  id: { sql: 'c.id', type: 'text' },
  project_id: { sql: 'c.project_id', type: 'text' },
  op_name: { sql: 'c.op_name', type: 'text' },
  display_name: { sql: 'c.display_name', type: 'text' },
  trace_id: { sql: 'c.trace_id', type: 'text' },
  parent_id: { sql: 'c.parent_id', type: 'text' },
  thread_id: { sql: 'c.thread_id', type: 'text' },
  turn_id: { sql: 'c.turn_id', type: 'text' },
  started_at: { sql: 'c.started_at', type: 'datetime' },
  ended_at: { sql: 'c.ended_at', type: 'datetime' },
  // A read-form field the hosted service lets queries name; NULL on every call a query sees.
  deleted_at: { sql: 'c.deleted_at', type: 'datetime' },
  exception: { sql: 'c.exception', type: 'text' },
  wb_user_id: { sql: 'c.wb_user_id', type: 'text' },
  wb_run_id: { sql: 'c.wb_run_id', type: 'text' },
  wb_run_step: { sql: 'c.wb_run_step', type: 'number' },
  wb_run_step_end: { sql: 'c.wb_run_step_end', type: 'number' },
  attributes: { sql: 'c.attributes', type: 'json' },
  inputs: { sql: 'c.inputs', type: 'json' },
  output: { sql: 'c.output', type: 'json' },
  summary: { sql: 'c.summary', type: 'json' },
  otel_dump: { sql: 'c.otel_dump', type: 'json' },
  storage_size_bytes: { sql: STORAGE_SIZE_SQL, type: 'number' },
  'summary.weave.status': { sql: STATUS_SQL, type: 'text' },
  'summary.weave.latency_ms': { sql: LATENCY_SQL, type: 'number' },
  'summary.weave.trace_name': { sql: TRACE_NAME_SQL, type: 'text' },
  feedback: CALL_FEEDBACK_FIELDS,
};
