/**
 * Finished span -> call items (SPEC §3): the start part and end part for `call/upsert_batch`, or
 * one completed call for `calls/complete`. Pure functions that never throw: a span that cannot be
 * mapped whole is still mapped as far as it goes, with what failed noted in
 * `attributes._callbridge_mapping_error`.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { CompletedCall, EndItem, EndedCall, StartItem, StartedCall } from '../wire/calls.js';
import { extractCallContent, type CallContent } from './content.js';
import { toOpName } from './names.js';
import { buildOtelDump, exceptionText } from './otel-dump.js';
import { fromReadableSpan, isReadableSpan, salvageReadableSpan, withLowercaseIds, type HrTime, type SpanInput } from './span-input.js';
import { hrTimeToIso } from './timestamps.js';
import { unflattenAttributes, type AttributeTree } from './unflatten.js';

/** The attribute that carries what went wrong when a span could not be mapped whole. */
export const MAPPING_ERROR_ATTRIBUTE = '_callbridge_mapping_error';

/** Written for a span time that cannot be read, so the call is still accepted. */
const EPOCH = '1970-01-01T00:00:00.000000Z';
const EMPTY_TREE: AttributeTree = { root: {}, hasFlatKeys: false };

/** The two parts of one call. */
export interface CallParts {
  readonly start: StartedCall;
  readonly end: EndedCall;
}

/**
 * Maps a finished span to the start and end parts of its call.
 *
 * @example
 * const { start, end } = toCallParts(readableSpan, 'acme/demo');
 * start.id === readableSpan.spanContext().spanId; // true
 */
export function toCallParts(span: SpanInput | ReadableSpan, projectId: string): CallParts {
  const notes: string[] = [];
  const input = withLowercaseIds(asSpanInput(span, notes));
  const id = text(input.spanId);
  const startedAt = formatTime(input.startTime, 'start time', notes);
  // An end that cannot be written ends the call where it started, not before (the epoch).
  const endedAt = formatTime(input.endTime, 'end time', notes, startedAt);

  let opName: string;
  try {
    opName = toOpName(text(input.name));
  } catch (error) {
    notes.push(`op_name: ${describe(error)}`);
    opName = 'span';
  }

  let tree = EMPTY_TREE;
  try {
    tree = unflattenAttributes(input.attributes);
    if (tree.notes !== undefined) notes.push(...tree.notes);
  } catch (error) {
    notes.push(`attributes: ${describe(error)}`);
  }

  let content: CallContent;
  try {
    content = extractCallContent(tree, projectId);
  } catch (error) {
    notes.push(`content: ${describe(error)}`);
    content = emptyContent(tree);
  }

  let otelDump: Record<string, unknown> | undefined;
  try {
    otelDump = buildOtelDump(input, tree, startedAt, endedAt, notes);
  } catch (error) {
    notes.push(`otel_dump: ${describe(error)}`);
  }

  let exception: string | undefined;
  try {
    exception = exceptionText(input);
  } catch (error) {
    notes.push(`exception: ${describe(error)}`);
    exception = 'error';
  }

  let attributes = content.attributes;
  if (notes.length > 0) {
    // A copy: in the fallback case `attributes` is the tree that `otel_dump` also holds.
    attributes = { ...attributes, [MAPPING_ERROR_ATTRIBUTE]: notes.join('; ') };
  }

  const start: StartedCall = {
    project_id: projectId,
    id,
    trace_id: text(input.traceId),
    parent_id: input.parentSpanId ? text(input.parentSpanId) : null,
    op_name: opName,
    started_at: startedAt,
    attributes,
    inputs: content.inputs,
  };
  if (otelDump !== undefined) start.otel_dump = otelDump;
  if (content.displayName !== undefined) start.display_name = content.displayName;
  if (content.threadId !== undefined) {
    start.thread_id = content.threadId;
    if (content.isTurn) start.turn_id = id;
  }
  if (content.wbRunId !== undefined) start.wb_run_id = content.wbRunId;
  if (content.wbRunStep !== undefined) start.wb_run_step = content.wbRunStep;

  const end: EndedCall = {
    project_id: projectId,
    id,
    ended_at: endedAt,
    output: content.output,
    summary: content.usage === undefined ? {} : { usage: content.usage },
  };
  if (exception !== undefined) end.exception = exception;
  if (content.wbRunStepEnd !== undefined) end.wb_run_step_end = content.wbRunStepEnd;
  return { start, end };
}

/**
 * Maps a finished span to its two `call/upsert_batch` items, start first (SPEC §3).
 *
 * @example
 * const body = { batch: spans.flatMap((span) => toUpsertItems(span, 'acme/demo')) };
 */
export function toUpsertItems(span: SpanInput | ReadableSpan, projectId: string): [StartItem, EndItem] {
  const { start, end } = toCallParts(span, projectId);
  return [
    { mode: 'start', req: { start } },
    { mode: 'end', req: { end } },
  ];
}

/**
 * Maps a finished span to one completed call for `/v2/{entity}/{project}/calls/complete`
 * (complete-mode projects): the start part's fields plus the end part's.
 *
 * @example
 * const body = { batch: spans.map((span) => toCompletedCall(span, 'acme/demo')) };
 */
export function toCompletedCall(span: SpanInput | ReadableSpan, projectId: string): CompletedCall {
  const { start, end } = toCallParts(span, projectId);
  const call: CompletedCall = {
    ...start,
    id: end.id,
    trace_id: start.trace_id ?? '',
    ended_at: end.ended_at,
    output: end.output,
    summary: end.summary,
  };
  if (end.exception !== undefined) call.exception = end.exception;
  if (end.wb_run_step_end !== undefined) call.wb_run_step_end = end.wb_run_step_end;
  return call;
}

function asSpanInput(span: SpanInput | ReadableSpan, notes: string[]): SpanInput {
  if (!isReadableSpan(span)) {
    if (span.readNotes !== undefined) notes.push(...span.readNotes);
    return span;
  }
  return readSpan(span, notes);
}

/**
 * The neutral view of an SDK span; when its adapter throws, what can be salvaged, with the error
 * in `notes` (SPEC §3: a span that cannot be read whole is still sent).
 */
export function readSpan(span: ReadableSpan, notes: string[]): SpanInput {
  try {
    return fromReadableSpan(span);
  } catch (error) {
    notes.push(`span: ${describe(error)}`);
    return salvageReadableSpan(span);
  }
}

function formatTime(time: HrTime, label: string, notes: string[], fallback = EPOCH): string {
  try {
    return hrTimeToIso(time);
  } catch (error) {
    notes.push(`${label}: ${describe(error)}`);
    return fallback;
  }
}

function emptyContent(tree: AttributeTree): CallContent {
  return {
    inputs: {},
    output: null,
    attributes: tree.root,
    usage: undefined,
    displayName: undefined,
    threadId: undefined,
    isTurn: false,
    wbRunId: undefined,
    wbRunStep: undefined,
    wbRunStepEnd: undefined,
  };
}

/** Ids and names as text, whatever a hand-built or decoded span put there. */
function text(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return describe(value);
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  // String() itself can throw (a hostile toString, a null-prototype object).
  try {
    return String(error);
  } catch {
    return 'unknown error';
  }
}
