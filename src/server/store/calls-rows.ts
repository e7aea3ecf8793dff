/**
 * Between the wire and the `calls` table: checking and normalizing the parts a client sends
 * (ids, name lengths, timestamps; SPEC §2.1) into bound-parameter rows, and writing stored rows
 * back out as the read form's JSON text.
 */
import { computeCosts, type PriceOf } from '../costs.js';
import { traceName } from './calls-fields.js';
import { BadRequestError, ValidationError } from '../errors.js';
import { uuidv7 } from '../ids.js';
import { stringifyWithinDepth } from '../json-depth.js';
import { quote } from '../quote.js';
import { parseTimestamp, type Instant } from '../timestamps.js';
import {
  isCallId,
  isTraceId,
  MAX_DISPLAY_NAME_CHARS,
  MAX_OP_NAME_CHARS,
  type AlwaysReturnedCallField,
  type Call,
  type CompletedCall,
  type EndedCall,
  type StartedCall,
} from '../../wire/calls.js';
import { MAX_JSON_DEPTH } from '../../wire/digest.js';
import { VerbatimJson } from '../verbatim-json.js';

/** Where in the request body a part sits, as a 422 `loc` (`['body', 'batch', 3, 'req', 'start']`). */
export type Loc = ReadonlyArray<string | number>;

/**
 * A part as a route hands it over: its free-form JSON fields parsed, or read verbatim from the
 * body (verbatim-body.ts), already in the form their stored text takes.
 */
type WithVerbatim<Part, Fields extends keyof Part> = Omit<Part, Fields> & { [F in Fields]: Part[F] | VerbatimJson };
export type StartInput = WithVerbatim<StartedCall, 'attributes' | 'inputs' | 'otel_dump'>;
export type EndInput = WithVerbatim<EndedCall, 'output' | 'summary'>;

/** Columns of a start part, in the order of the store's start statement. */
export type StartRow = [
  projectId: string,
  id: string,
  opName: string,
  displayName: string | null,
  traceId: string,
  parentId: string | null,
  threadId: string | null,
  turnId: string | null,
  startedAt: string,
  startedUs: number,
  attributes: string,
  inputs: string,
  otelDump: string | null,
  wbUserId: string,
  wbRunId: string | null,
  wbRunStep: number | null,
  startBytes: number,
];

/** Columns of an end part, in the order of the store's end statement. */
export type EndRow = [
  projectId: string,
  id: string,
  endedAt: string,
  endedUs: number,
  output: string | null,
  summary: string,
  exception: string | null,
  wbRunStepEnd: number | null,
  endBytes: number,
  wbUserId: string,
];

/**
 * Check a start part and turn it into a row. Generates `id`/`trace_id` (UUIDv7) when absent;
 * `wb_user_id` is always the writer's name, whatever the part says.
 */
export function toStartRow(start: StartInput, username: string, loc: Loc): StartRow {
  checkNameLength(start.op_name, 'op_name', MAX_OP_NAME_CHARS, loc);
  const displayName = start.display_name ?? null;
  if (displayName !== null) checkNameLength(displayName, 'display_name', MAX_DISPLAY_NAME_CHARS, loc);
  const id = start.id ?? uuidv7();
  checkId(id, isCallId, 'id', loc);
  const traceId = start.trace_id ?? uuidv7();
  checkId(traceId, isTraceId, 'trace_id', loc);
  const parentId = start.parent_id ?? null;
  if (parentId !== null) checkId(parentId, isCallId, 'parent_id', loc);
  const started = parseTimestampAt(start.started_at, loc, 'started_at');
  const attributes = toJsonText(start.attributes, loc, 'attributes');
  const inputs = toJsonText(start.inputs, loc, 'inputs');
  const otelDump = start.otel_dump == null ? null : toJsonText(start.otel_dump, loc, 'otel_dump');
  return [
    start.project_id,
    id,
    start.op_name,
    displayName,
    traceId,
    parentId,
    start.thread_id ?? null,
    start.turn_id ?? null,
    started.text,
    started.micros,
    attributes,
    inputs,
    otelDump,
    username,
    start.wb_run_id ?? null,
    start.wb_run_step ?? null,
    Buffer.byteLength(attributes) + Buffer.byteLength(inputs),
  ];
}

/** Check an end part and turn it into a row. A `weave` key in `summary` is dropped: it is derived. */
export function toEndRow(end: EndInput | CompletedCall, username: string, loc: Loc): EndRow {
  checkId(end.id, isCallId, 'id', loc);
  const ended = parseTimestampAt(end.ended_at, loc, 'ended_at');
  const output = end.output === undefined || end.output === null ? null : toJsonText(end.output, loc, 'output');
  const summary = toJsonText(withoutDerived(end.summary ?? {}), loc, 'summary');
  return [
    end.project_id,
    end.id,
    ended.text,
    ended.micros,
    output,
    summary,
    end.exception ?? null,
    end.wb_run_step_end ?? null,
    (output === null ? 0 : Buffer.byteLength(output)) + Buffer.byteLength(summary),
    username,
  ];
}

/** A completed call (complete mode) is a start part and an end part written at once. */
export function toCompleteRows(call: CompletedCall, username: string, loc: Loc): [StartRow, EndRow] {
  // id and trace_id are required here (the schema says so); the start checks their shapes.
  return [toStartRow(call, username, loc), toEndRow(call, username, loc)];
}

function withoutDerived(summary: Record<string, unknown> | VerbatimJson): Record<string, unknown> | VerbatimJson {
  if (summary instanceof VerbatimJson) {
    // Only a text naming "weave" somewhere can hold the key; those few are parsed to drop it.
    return summary.text.includes('"weave"') ? withoutDerived(JSON.parse(summary.text) as Record<string, unknown>) : summary;
  }
  if (!Object.hasOwn(summary, 'weave')) return summary;
  const { weave: _derived, ...stored } = summary;
  return stored;
}

function checkId(value: string, isValid: (value: string) => boolean, field: string, loc: Loc): void {
  if (!isValid(value)) {
    const expected = field === 'trace_id' ? '32 lowercase hex characters' : '16 lowercase hex characters';
    throw new BadRequestError(
      `Invalid ${field} ${quote(value)} at ${describeLoc(loc)}: expected ${expected} or a lowercase UUID`,
    );
  }
}

/**
 * A name longer than `max` characters is a 400 naming where it sits (`loc` is where the field's
 * parent sits). Lengths count characters (code points), as the hosted service's Python does.
 */
export function checkNameLength(value: string, field: string, max: number, loc: Loc): void {
  // UTF-16 length is at least the code point count: only long strings need the exact count.
  if (value.length > max && [...value].length > max) {
    throw new BadRequestError(`${describeLoc([...loc, field])} is longer than ${max} characters`);
  }
}

/**
 * A string that is not an ISO 8601 time is a schema error (pydantic's datetime parsing) at
 * `[...loc, field]` (built only then: this runs twice per call of every batch).
 */
export function parseTimestampAt(value: string, loc: Loc, field: string): Instant {
  const instant = parseTimestamp(value);
  if (instant === null) {
    throw new ValidationError([
      {
        type: 'datetime_from_date_parsing',
        loc: [...loc, field],
        msg: 'Input should be a valid datetime (ISO 8601, years 0001-9999)',
        input: value.length > 100 ? `${value.slice(0, 100)}…` : value,
      },
    ]);
  }
  return instant;
}

/**
 * JSON text of a value from the request (`field` of the part at `loc`): the text itself when it
 * was read verbatim, else the parsed value stringified. A value nested deeper than
 * MAX_JSON_DEPTH is the client's 400: SQLite's JSON functions cannot read a document nested past
 * 1000 levels, and every query of the project reads `summary` (the derived status) and may read
 * the other JSON columns. A parsed value must be stringified anyway, and the depth check rides
 * on that rather than walking every value a second time.
 */
export function toJsonText(value: unknown, loc: Loc, field: string): string {
  // Read verbatim: canonical (what JSON.stringify would write) and far shallower than the bound.
  if (value instanceof VerbatimJson) return value.text;
  const text = stringifyWithinDepth(value);
  if (text === null) {
    throw new BadRequestError(`Value at ${describeLoc([...loc, field])} is nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  return text;
}

/** `['body', 'batch', 3, 'req', 'start']` -> `batch[3].req.start`. */
export function describeLoc(loc: Loc): string {
  let text = '';
  for (const part of loc.slice(1)) {
    text += typeof part === 'number' ? `[${part}]` : text === '' ? part : `.${part}`;
  }
  return text === '' ? 'body' : text;
}

/** Read-form fields stored as JSON text, which a read splices in without parsing. */
type JsonTextFields = 'attributes' | 'inputs' | 'output' | 'summary';

/**
 * A call row as the store's reads select it (`CALL_COLUMNS_SQL`): the read form's scalar fields as
 * they are, its JSON fields as stored text, and the derived values `summary.weave` is built from.
 */
export type CallRow = Omit<Call, JsonTextFields | 'deleted_at' | 'storage_size_bytes' | 'total_storage_size_bytes'> & {
  attributes: string;
  inputs: string;
  output: string | null;
  summary: string | null;
  /** The span as received (SPEC §3), JSON text; answered as `attributes.otel_span`. */
  otel_dump: string | null;
  storage_size_bytes: number;
  status: string;
  latency_ms: number | null;
  total_storage_size_bytes?: number | null;
  /** `summary.weave.feedback` as JSON text, when the query asked for it (`include_feedback`). */
  feedback?: string;
};

/** Which optional parts a read writes. */
export interface CallJsonOptions {
  readonly includeCosts: boolean;
  /** The prices `summary.weave.costs` uses (the project's own before the list prices). */
  readonly priceOf?: PriceOf;
  readonly includeStorageSize: boolean;
  /** The row carries `total_storage_size_bytes` (root calls only; null on others). */
  readonly includeTotalStorageSize: boolean;
  /** The row carries `feedback`, for `summary.weave.feedback`. */
  readonly includeFeedback: boolean;
  /** Only these read-form fields (null: all). */
  readonly columns: ReadonlySet<string> | null;
}

/** Read-form fields, in the order they are written. */
export const CALL_FIELD_NAMES = [
  'id',
  'project_id',
  'op_name',
  'display_name',
  'trace_id',
  'parent_id',
  'thread_id',
  'turn_id',
  'started_at',
  'ended_at',
  'deleted_at',
  'attributes',
  'inputs',
  'output',
  'summary',
  'exception',
  'wb_user_id',
  'wb_run_id',
  'wb_run_step',
  'wb_run_step_end',
  'storage_size_bytes',
  'total_storage_size_bytes',
] as const;

/**
 * Fields every read carries with their values, whatever `columns` asks for (as the hosted
 * service does; the others it names hold defaults); the client's types (`CallWithColumns`)
 * name the same ones.
 */
export const ALWAYS_RETURNED: ReadonlySet<string> = new Set<AlwaysReturnedCallField>(['id', 'project_id', 'op_name', 'trace_id', 'started_at']);

/**
 * The read form of a call as JSON text. The stored JSON columns are spliced in as they are (they
 * are JSON.stringify output already), so a read parses only `summary`, to add the derived
 * `summary.weave`; large inputs and outputs are never parsed and re-serialized.
 *
 * Every field is written, also those `columns` leaves out, as the service's answer does (each
 * line is a whole `CallSchema`): those hold their defaults, `{}` for `attributes` and `inputs`
 * and null for the rest. The Python SDK reads every line as a `CallSchema`, in which
 * `attributes` and `inputs` are required.
 */
export function callToJson(row: CallRow, options: CallJsonOptions): string {
  const wanted = (field: string): boolean => options.columns === null || options.columns.has(field);
  const parts: string[] = [];
  const put = (field: string, json: string, unselected = 'null'): void => {
    parts.push(`"${field}":${wanted(field) ? json : unselected}`);
  };
  const str = (value: string | null): string => (value === null ? 'null' : JSON.stringify(value));
  const num = (value: number | null | undefined): string => (value == null ? 'null' : String(value));
  put('id', str(row.id));
  put('project_id', str(row.project_id));
  put('op_name', str(row.op_name));
  // An empty name is none, as the service reads it (`empty_str_to_none`).
  put('display_name', str(row.display_name === '' ? null : row.display_name));
  put('trace_id', str(row.trace_id));
  put('parent_id', str(row.parent_id));
  put('thread_id', str(row.thread_id));
  put('turn_id', str(row.turn_id));
  put('started_at', str(row.started_at));
  put('ended_at', str(row.ended_at));
  put('deleted_at', 'null'); // deleted calls are never returned
  put('attributes', withOtelSpan(row.attributes, row.otel_dump), '{}');
  put('inputs', row.inputs, '{}');
  put('output', row.output ?? 'null');
  // As in the hosted service, feedback brings `summary` even when `columns` leaves it out.
  parts.push(`"summary":${wanted('summary') || options.includeFeedback ? summaryJson(row, options) : 'null'}`);
  put('exception', str(row.exception));
  put('wb_user_id', str(row.wb_user_id));
  put('wb_run_id', str(row.wb_run_id));
  put('wb_run_step', num(row.wb_run_step));
  put('wb_run_step_end', num(row.wb_run_step_end));
  put('storage_size_bytes', options.includeStorageSize ? num(row.storage_size_bytes) : 'null');
  put('total_storage_size_bytes', options.includeTotalStorageSize ? num(row.total_storage_size_bytes) : 'null');
  return `{${parts.join(',')}}`;
}

/**
 * The stored attributes with the call's `otel_dump` as `otel_span`, as the service answers them
 * ("clients expect it": its UI and SDKs read an OTel call's span there). Spliced into the text:
 * stored JSON texts have no whitespace, so `{}` is the empty object, and an `otel_span` the
 * attributes held already is overridden (a JSON reader keeps the last of repeated keys).
 */
function withOtelSpan(attributes: string, otelDump: string | null): string {
  if (otelDump === null) return attributes;
  return attributes === '{}' ? `{"otel_span":${otelDump}}` : `${attributes.slice(0, -1)},"otel_span":${otelDump}}`;
}

function summaryJson(row: CallRow, options: CallJsonOptions): string {
  const stored = row.summary === null ? {} : (JSON.parse(row.summary) as Record<string, unknown>);
  const weave: Record<string, unknown> = { status: row.status };
  if (row.latency_ms !== null) weave.latency_ms = row.latency_ms;
  weave.trace_name = traceName(row.display_name, row.op_name);
  if (options.includeCosts) weave.costs = computeCosts(stored.usage, options.priceOf, row.started_at);
  if (options.includeFeedback) weave.feedback = JSON.parse(row.feedback ?? '[]') as unknown;
  return JSON.stringify({ ...stored, weave });
}
