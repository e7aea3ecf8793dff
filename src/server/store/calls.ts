/**
 * The calls store: every read and write of call records, on prepared statements, one
 * transaction per request. Parts merge by `(project_id, id)` with SQLite upserts, so start and
 * end may come in any order and any number of times (SPEC §2.1).
 */
import type { Readable } from 'node:stream';
import type { SqliteDatabase } from './sqlite.js';
import { BadRequestError } from '../errors.js';
import { compileQuery, compileSortTerms } from '../query/index.js';
import { quote } from '../quote.js';
import { nowInstant } from '../timestamps.js';
import { isCallId, type CallsFilter } from '../../wire/calls.js';
import { isRecord, type SortBy } from '../../wire/common.js';
import {
  CALL_FIELDS,
  LATENCY_SQL,
  STATUS_SQL,
  STORAGE_SIZE_SQL,
  VISIBLE_SQL,
} from './calls-fields.js';
import {
  ALWAYS_RETURNED,
  CALL_FIELD_NAMES,
  callToJson,
  type CallJsonOptions,
  type CallRow,
  type EndRow,
  type StartRow,
} from './calls-rows.js';
import { cursorOf, pagedText, type PageShape } from '../paged-text.js';
import { CALL_FEEDBACK_JSON_SQL } from './call-feedback.js';
import { createReaderPool, type ReaderPool } from './readers.js';
import { StatementCache } from './statement-cache.js';
import { createTokenPriceStore } from './token-prices.js';

/** One part of a call to write; rows come from `calls-rows.ts`, already checked. */
export type CallPart = { readonly kind: 'start'; readonly row: StartRow } | { readonly kind: 'end'; readonly row: EndRow };

export interface ReadOptions {
  readonly includeCosts: boolean;
  readonly includeStorageSize: boolean;
  readonly includeTotalStorageSize: boolean;
}

export interface QueryRequest extends ReadOptions {
  /** Put the call's feedback records into `summary.weave.feedback` (the hosted `include_feedback`). */
  readonly includeFeedback: boolean;
  readonly projectId: string;
  readonly filter: CallsFilter | null;
  readonly query: unknown;
  readonly sortBy: readonly SortBy[] | null;
  readonly limit: number | null;
  readonly offset: number | null;
  readonly columns: readonly string[] | null;
}

/** What selects the calls of a query: the project, the filter lists and the `$expr` query. */
export type CallSelection = Pick<QueryRequest, 'projectId' | 'filter' | 'query'>;

export interface StatsRequest extends CallSelection {
  readonly limit: number | null;
  readonly includeTotalStorageSize: boolean;
}

export interface CallsStore {
  /** Write parts in order, in one transaction. */
  writeParts(parts: readonly CallPart[]): void;
  /** The read form of one visible call as JSON text, or null. */
  readJson(projectId: string, id: string, options: ReadOptions): string | null;
  /**
   * The answer of a calls query as a stream of text: each call's JSON joined as `shape` says (one
   * per line for `calls/stream_query`, a `{"calls":[...]}` list for `calls/query`), read row by
   * row with backpressure. Request errors (bad query, unknown field) and errors reading the
   * first row throw here, before anything is sent, so they keep their status; an error after that
   * destroys the stream, and the client sees a transfer cut short rather than a short 200.
   */
  queryText(request: QueryRequest, shape: PageShape): Readable;
  /** Mark calls and all their descendants deleted; returns how many were newly marked. */
  deleteCalls(projectId: string, callIds: readonly string[]): number;
  /**
   * `calls/query_stats`: how many calls the filter and query select (at most `limit`), and with
   * `includeTotalStorageSize` the sum of their `total_storage_size_bytes` (their traces' storage,
   * counted on root calls).
   */
  queryStats(request: StatsRequest): { count: number; total_storage_size_bytes: number | null };
  /** Set a call's display name, now or (before its start part arrives) when it arrives. */
  updateDisplayName(projectId: string, id: string, displayName: string): void;
  /** Close the store's extra read connections (streams still running close theirs at the end). */
  close(): void;
}

const START_COLUMNS = [
  'project_id', 'id', 'op_name', 'display_name', 'trace_id', 'parent_id', 'thread_id', 'turn_id',
  'started_at', 'started_us', 'attributes', 'inputs', 'otel_dump', 'wb_user_id', 'wb_run_id',
  'wb_run_step', 'start_bytes',
] as const;
const END_COLUMNS = [
  'project_id', 'id', 'ended_at', 'ended_us', 'output', 'summary', 'exception', 'wb_run_step_end',
  'end_bytes', 'wb_user_id',
] as const;

/** Columns a part replaces when written again (everything but the key). */
const assignments = (columns: readonly string[]): string =>
  columns
    .filter((c) => c !== 'project_id' && c !== 'id' && c !== 'wb_user_id')
    .map((c) => (c === 'display_name' ? START_DISPLAY_NAME : `${c} = excluded.${c}`))
    .join(', ');

// A part without a display name keeps the one the call has (a start written again after
// `call/update` renamed it: the service keeps the latest name given, NULLs aside). A row without
// its start part that holds a display name got it from `call/update` (an end part carries none):
// the rename came after the call began, so the start arriving late does not undo it.
const START_DISPLAY_NAME = `display_name = CASE
  WHEN excluded.display_name IS NULL THEN calls.display_name
  WHEN calls.has_start = 0 AND calls.display_name IS NOT NULL THEN calls.display_name
  ELSE excluded.display_name END`;

// The start part's writer owns wb_user_id; an end that arrives first fills it until then.
const UPSERT_START_SQL = `
INSERT INTO calls (${START_COLUMNS.join(', ')}, has_start)
VALUES (${START_COLUMNS.map(() => '?').join(', ')}, 1)
ON CONFLICT (project_id, id) DO UPDATE SET ${assignments(START_COLUMNS)}, has_start = 1, wb_user_id = excluded.wb_user_id`;

const UPSERT_END_SQL = `
INSERT INTO calls (${END_COLUMNS.join(', ')})
VALUES (${END_COLUMNS.map(() => '?').join(', ')})
ON CONFLICT (project_id, id) DO UPDATE SET ${assignments(END_COLUMNS)}, wb_user_id = coalesce(calls.wb_user_id, excluded.wb_user_id)`;

/** End columns that follow the start's in a whole-call row (the key and wb_user_id come from the start). */
const END_ONLY_COLUMNS = END_COLUMNS.filter((c) => c !== 'project_id' && c !== 'id' && c !== 'wb_user_id');

// A start and an end of the same call in one request: one row write with the effect of the start
// upsert followed by the end upsert (the start's writer owns wb_user_id either way).
const UPSERT_WHOLE_SQL = `
INSERT INTO calls (${START_COLUMNS.join(', ')}, ${END_ONLY_COLUMNS.join(', ')}, has_start)
VALUES (${[...START_COLUMNS, ...END_ONLY_COLUMNS].map(() => '?').join(', ')}, 1)
ON CONFLICT (project_id, id) DO UPDATE SET ${assignments(START_COLUMNS)}, ${assignments(END_ONLY_COLUMNS)},
  has_start = 1, wb_user_id = excluded.wb_user_id`;

/** Where the end-only values sit in an EndRow (after project_id and id, before wb_user_id). */
const END_ONLY_FROM = 2;
const END_WRITER = 9;
// Fails to compile if END_COLUMNS (and so EndRow) moves wb_user_id away from END_WRITER.
const END_WRITER_COLUMN: (typeof END_COLUMNS)[typeof END_WRITER] = 'wb_user_id';
void END_WRITER_COLUMN;

/**
 * An integer column a client fills, read as a double past 2^53 (the service's `wb_run_step` has no
 * bound): better-sqlite3 would read it as the nearest double anyway, node:sqlite throws instead,
 * which made the call (and every query reaching it) answer 500.
 */
function safeInteger(column: string): string {
  return `(CASE WHEN abs(${column}) > ${Number.MAX_SAFE_INTEGER} THEN CAST(${column} AS REAL) ELSE ${column} END)`;
}

/**
 * What every read selects, named as `CallRow` expects. `otel_dump` (often the largest column: the
 * whole span) only when the answer has `attributes`, which carry it as `otel_span`.
 */
const callColumnsSql = (withOtelDump: boolean): string => `c.id, c.project_id, c.op_name, c.display_name, c.trace_id, c.parent_id,
  c.thread_id, c.turn_id, c.started_at, c.ended_at, c.attributes, c.inputs, c.output, c.summary,
  c.exception, ${withOtelDump ? 'c.otel_dump' : 'NULL AS otel_dump'}, c.wb_user_id, c.wb_run_id, ${safeInteger('c.wb_run_step')} AS wb_run_step,
  ${safeInteger('c.wb_run_step_end')} AS wb_run_step_end,
  ${STORAGE_SIZE_SQL} AS storage_size_bytes, ${STATUS_SQL} AS status, ${LATENCY_SQL} AS latency_ms`;
const CALL_COLUMNS_SQL = callColumnsSql(true);

/** The summed storage of a root call's whole trace; null on calls that have a parent. */
const TOTAL_STORAGE_SQL = `(CASE WHEN c.parent_id IS NULL THEN (
  SELECT sum(t.start_bytes + t.end_bytes) FROM calls t
  WHERE t.project_id = c.project_id AND t.trace_id = c.trace_id AND t.has_start = 1 AND t.deleted_at IS NULL
) END) AS total_storage_size_bytes`;

const READ_SQL = `SELECT ${CALL_COLUMNS_SQL} FROM calls c WHERE c.project_id = ? AND c.id = ? AND ${VISIBLE_SQL}`;
const READ_WITH_TOTAL_SQL = `SELECT ${CALL_COLUMNS_SQL}, ${TOTAL_STORAGE_SQL} FROM calls c
  WHERE c.project_id = ? AND c.id = ? AND ${VISIBLE_SQL}`;

// Descendants by parent_id, breadth first; UNION (not UNION ALL) stops on a cycle of bad parents.
// Counts the calls it deletes; DELETE_AHEAD_SQL then marks the ids whose start has not arrived.
// CROSS JOIN fixes the loop order (SQLite never reorders it): each level looks up the children of
// each doomed id in calls_by_parent. With a plain JOIN the planner put calls outside and scanned
// the whole project once per level (779 ms for a root with 9 children among 1 M calls).
const DELETE_SQL = `
WITH RECURSIVE doomed(id) AS (
  SELECT value FROM json_each(@ids)
  UNION
  SELECT c.id FROM doomed d CROSS JOIN calls c WHERE c.project_id = @project AND c.parent_id = d.id
)
UPDATE calls SET deleted_at = @now
WHERE project_id = @project AND id IN (SELECT id FROM doomed) AND deleted_at IS NULL AND has_start = 1`;

// Parts may arrive in any order (SPEC §2.1), and a delete or a rename may come before the start
// part it applies to (an SDK that sends starts in batches and these directly). Such an id gets a
// row with no start, which keeps the delete (a later start leaves `deleted_at` alone) or the name
// (START_DISPLAY_NAME) for when its parts arrive; until then it is not a call anywhere.
const DELETE_AHEAD_SQL = `
INSERT INTO calls (project_id, id, deleted_at) SELECT @project, value, @now FROM json_each(@ids) WHERE true
ON CONFLICT (project_id, id) DO UPDATE SET deleted_at = excluded.deleted_at WHERE calls.has_start = 0 AND calls.deleted_at IS NULL`;

const UPDATE_DISPLAY_NAME_SQL = `INSERT INTO calls (project_id, id, display_name) VALUES (?, ?, ?)
ON CONFLICT (project_id, id) DO UPDATE SET display_name = excluded.display_name`;

/** Filter lists and the column each one matches. */
const LIST_FILTERS: ReadonlyArray<[key: keyof CallsFilter, column: string]> = [
  ['call_ids', 'c.id'],
  ['trace_ids', 'c.trace_id'],
  ['parent_ids', 'c.parent_id'],
  ['thread_ids', 'c.thread_id'],
  ['turn_ids', 'c.turn_id'],
  ['wb_user_ids', 'c.wb_user_id'],
  ['wb_run_ids', 'c.wb_run_id'],
];

/** Filters on the refs (`weave:///...` text) a call's inputs or output hold, and the column searched. */
const REF_FILTERS: ReadonlyArray<[key: 'input_refs' | 'output_refs', column: string]> = [
  ['input_refs', 'c.inputs'],
  ['output_refs', 'c.output'],
];

/** Filters that name calls one by one: the rows they select are few, whatever the project's size. */
const NARROWING_FILTERS: ReadonlyArray<keyof CallsFilter> = ['call_ids', 'trace_ids', 'parent_ids'];

/**
 * A stream pushes at most this many rows (or PAGE_CHARS of text) per turn of the event loop, so
 * the writes of other requests run between pages of a large answer.
 */
const LINE_PAGE_ROWS = 500;

/**
 * Create the calls store on an open database (schema already migrated).
 *
 * @example
 * const calls = createCallsStore(db);
 * calls.writeParts([{ kind: 'start', row: toStartRow(start, 'dev', ['body', 'start']) }]);
 */
export function createCallsStore(db: SqliteDatabase, options: { readonly readers?: ReaderPool } = {}): CallsStore {
  const upsertStart = db.prepare(UPSERT_START_SQL);
  const upsertEnd = db.prepare(UPSERT_END_SQL);
  const read = db.prepare(READ_SQL);
  const readWithTotal = db.prepare(READ_WITH_TOTAL_SQL);
  const deleteTree = db.prepare(DELETE_SQL);
  const deleteAhead = db.prepare(DELETE_AHEAD_SQL);
  const deleteCalls = db.transaction((args: { project: string; ids: string; now: string }): number => {
    const deleted = deleteTree.run(args).changes;
    deleteAhead.run(args);
    return deleted;
  });
  const updateDisplayName = db.prepare(UPDATE_DISPLAY_NAME_SQL);
  const queries = new StatementCache(db);
  // The server's shared pool, or one of its own (closed with the store) when used alone.
  const readers = options.readers ?? createReaderPool(db);
  // Read on this (the writer's) connection as rows are written, also for answers streamed from a
  // reader: a project's prices are few and change rarely.
  const prices = createTokenPriceStore(db);

  const upsertWhole = db.prepare(UPSERT_WHOLE_SQL);
  const writeParts = db.transaction((parts: readonly CallPart[]) => {
    for (const { start, end } of mergeByCall(parts)) {
      if (start === undefined) upsertEnd.run(end as EndRow);
      else if (end === undefined) upsertStart.run(start);
      else upsertWhole.run(wholeRow(start, end));
    }
  });

  return {
    writeParts(parts) {
      writeParts(parts);
    },

    readJson(projectId, id, options) {
      const statement = options.includeTotalStorageSize ? readWithTotal : read;
      const row = statement.get(projectId, id) as CallRow | undefined;
      if (row === undefined) return null;
      const priceOf = options.includeCosts ? prices.priceOf(projectId) : undefined;
      return callToJson(row, { ...options, priceOf, includeFeedback: false, columns: null });
    },

    queryText(request, shape) {
      const { sql, params } = buildQuery(request);
      const options: CallJsonOptions = {
        includeCosts: request.includeCosts,
        priceOf: request.includeCosts ? prices.priceOf(request.projectId) : undefined,
        includeStorageSize: request.includeStorageSize,
        includeTotalStorageSize: request.includeTotalStorageSize,
        includeFeedback: request.includeFeedback,
        columns: selectedColumns(request.columns),
      };
      const toJson = (row: CallRow): string => callToJson(row, options);
      const pages: PageShape = { ...shape, maxTexts: LINE_PAGE_ROWS };
      const reader = readers.acquire();
      if (reader === null) {
        // In-memory database: no second connection can see it, and an open iterator would block
        // every write on this one, so the rows are read at once (memory grows with the answer).
        const rows = queries.get(sql).all(params) as CallRow[];
        return pagedText(cursorOf(rows[Symbol.iterator](), () => {}, toJson), pages);
      }
      try {
        const rows = reader.statements.get(sql).iterate(params) as IterableIterator<CallRow>;
        return pagedText(cursorOf(rows, () => readers.release(reader), toJson), pages);
      } catch (error) {
        readers.release(reader);
        throw error;
      }
    },

    queryStats(request) {
      const { sql, params } = buildStatsQuery(request);
      const row = queries.get(sql).get(params) as { count: number; total_storage_size_bytes: number | null };
      return { count: row.count, total_storage_size_bytes: request.includeTotalStorageSize ? (row.total_storage_size_bytes ?? 0) : null };
    },

    deleteCalls(projectId, callIds) {
      for (const id of callIds) {
        if (!isCallId(id)) throw new BadRequestError(`Invalid call id ${quote(id)} in call_ids`);
      }
      return deleteCalls({ project: projectId, ids: JSON.stringify(callIds), now: nowInstant().text });
    },

    updateDisplayName(projectId, id, displayName) {
      updateDisplayName.run(projectId, id, displayName);
    },

    close() {
      if (options.readers === undefined) readers.close();
    },
  };
}

/** The parts of one call a request writes: the last start and the last end it carries. */
interface CallWrite {
  start: StartRow | undefined;
  end: EndRow | undefined;
}

/**
 * The parts of a request grouped by call, in the order each call first appears. Writing each
 * call's last start and last end once has the same effect as writing every part in order: a start
 * replaces only start columns, an end only end columns, so an earlier part of the same kind is
 * overwritten and parts of different kinds commute; the rows are created in the same order; and
 * `wb_user_id` ends as the last start's writer, or (ends only) stays the first end's.
 * The exporter sends a span's start and end together, so this halves the rows written (measured:
 * one upsert per call instead of two).
 */
function mergeByCall(parts: readonly CallPart[]): Iterable<CallWrite> {
  if (parts.length === 1) {
    const only = parts[0] as CallPart;
    return [only.kind === 'start' ? { start: only.row, end: undefined } : { start: undefined, end: only.row }];
  }
  // Keyed by project, then id: an id is unique only within its project.
  const byProject = new Map<string, Map<string, CallWrite>>();
  const writes: CallWrite[] = [];
  for (const part of parts) {
    const [projectId, id] = part.row;
    let calls = byProject.get(projectId);
    if (calls === undefined) {
      calls = new Map();
      byProject.set(projectId, calls);
    }
    let write = calls.get(id);
    if (write === undefined) {
      write = { start: undefined, end: undefined };
      calls.set(id, write);
      writes.push(write);
    }
    if (part.kind === 'start') write.start = part.row;
    else write.end = write.end === undefined ? part.row : laterEnd(write.end, part.row);
  }
  return writes;
}

/**
 * A second end of the same call: its columns replace the first's, but an end never replaces
 * `wb_user_id` (only a start does), so a row they create keeps the first end's writer.
 */
function laterEnd(first: EndRow, later: EndRow): EndRow {
  const writer = first[END_WRITER];
  if (later[END_WRITER] === writer) return later;
  const row: EndRow = [...later];
  row[END_WRITER] = writer;
  return row;
}

/** Parameters of UPSERT_WHOLE_SQL: the start row, then the end's own columns. */
function wholeRow(start: StartRow, end: EndRow): unknown[] {
  const row: unknown[] = start.slice();
  for (let i = END_ONLY_FROM; i < END_WRITER; i++) row.push(end[i]);
  return row;
}

/**
 * SQL and bound parameters of a `calls/stream_query`. Field names come only from CALL_FIELDS.
 * Exported for the query-plan tests, which EXPLAIN the exact statement the store runs.
 */
export function buildQuery(request: QueryRequest): { sql: string; params: unknown[] } {
  const { where, params } = selectionOf(request);
  const filter = request.filter ?? {};

  // Sorting parameters come after the WHERE parameters, in the order the SQL text uses them.
  const order: string[] = [];
  for (const { field, direction } of request.sortBy ?? []) {
    // The hosted calls query counts a JSON null as absent when it sorts on a JSON path.
    for (const term of compileSortTerms(field, direction, CALL_FIELDS, 'absent')) {
      order.push(term.sql);
      params.push(...term.params);
    }
  }
  // No sort_by: by start time. An empty list asks for no order: the id alone (as the service).
  if (request.sortBy == null) order.push('c.started_at ASC');
  order.push('c.id ASC'); // a total order, so pages never overlap or skip
  // A filter naming calls one by one selects a handful of rows: find them by their index
  // (calls_by_id/trace/parent) and sort those. Unary `+` keeps the sort terms from matching
  // calls_by_start, which the planner otherwise walks through the whole project to avoid a sort
  // (250-570 ms with 1 M calls, against 0.2 ms by trace).
  const narrowed =
    NARROWING_FILTERS.some((key) => {
      const values = filter[key];
      return Array.isArray(values) && values.length > 0;
    }) || namesCallsOneByOne(request.query);
  const orderSql = narrowed ? order.map((term) => `+${term}`) : order;

  params.push(request.limit ?? -1, request.offset ?? 0);
  const total = request.includeTotalStorageSize ? `, ${TOTAL_STORAGE_SQL}` : '';
  const feedback = request.includeFeedback ? `, ${CALL_FEEDBACK_JSON_SQL} AS feedback` : '';
  const sql = `SELECT ${callColumnsSql(answersAttributes(request.columns))}${total}${feedback} FROM calls c WHERE ${where.join(' AND ')}
    ORDER BY ${orderSql.join(', ')} LIMIT ? OFFSET ?`;
  return { sql, params };
}

/** The WHERE terms (joined by AND) that select a query's calls, with their parameters in order. */
function selectionOf(request: CallSelection): { where: string[]; params: unknown[] } {
  const where = ['c.project_id = ?', VISIBLE_SQL];
  const params: unknown[] = [request.projectId];
  const filter = request.filter ?? {};

  const opNames = filter.op_names ?? [];
  if (opNames.length > 0) {
    const { exact, prefixes } = splitWildcards(opNames);
    const alternatives: string[] = [];
    if (exact.length > 0) {
      alternatives.push('c.op_name IN (SELECT value FROM json_each(?))');
      params.push(JSON.stringify(exact));
    }
    if (prefixes.length > 0) {
      // One parameter however many prefixes: the statement stays within SQLite's limits.
      alternatives.push('EXISTS (SELECT 1 FROM json_each(?) p WHERE substr(c.op_name, 1, length(p.value)) = p.value)');
      params.push(JSON.stringify(prefixes));
    }
    where.push(`(${alternatives.join(' OR ')})`);
  }
  for (const [key, column] of LIST_FILTERS) {
    const values = filter[key];
    if (Array.isArray(values) && values.length > 0) {
      where.push(`${column} IN (SELECT value FROM json_each(?))`);
      params.push(JSON.stringify(values));
    }
  }
  if (filter.trace_roots_only === true) where.push('c.parent_id IS NULL');
  for (const [key, column] of REF_FILTERS) {
    const refs = filter[key];
    if (Array.isArray(refs) && refs.length > 0) {
      const { exact, prefixes } = splitWildcards(refs);
      // Every text value anywhere in the JSON, as the service finds refs in inputs and output.
      where.push(`EXISTS (SELECT 1 FROM json_tree(${column}) t WHERE t.type = 'text' AND (t.atom IN (SELECT value FROM json_each(?))
        OR EXISTS (SELECT 1 FROM json_each(?) p WHERE substr(t.atom, 1, length(p.value)) = p.value)))`);
      params.push(JSON.stringify(exact), JSON.stringify(prefixes));
    }
  }
  if (request.query != null) {
    const compiled = compileQuery(request.query, CALL_FIELDS, ['body', 'query']);
    where.push(`(${compiled.sql})`);
    params.push(...compiled.params);
  }
  return { where, params };
}

/**
 * SQL and bound parameters of a `calls/query_stats`: the calls `buildQuery` would select (no
 * order needed to count them), at most `limit` of them.
 */
export function buildStatsQuery(request: StatsRequest): { sql: string; params: unknown[] } {
  const { where, params } = selectionOf(request);
  params.push(request.limit ?? -1);
  const total = request.includeTotalStorageSize ? TOTAL_STORAGE_SQL : 'NULL AS total_storage_size_bytes';
  const sql = `SELECT count(*) AS count, sum(total_storage_size_bytes) AS total_storage_size_bytes
    FROM (SELECT ${total} FROM calls c WHERE ${where.join(' AND ')} LIMIT ?)`;
  return { sql, params };
}

/** `<prefix>:*` matches every version of a ref or op (any digest), as in the hosted service. */
function splitWildcards(values: readonly string[]): { exact: string[]; prefixes: string[] } {
  const exact = values.filter((value) => !value.endsWith(':*'));
  const prefixes = values.filter((value) => value.endsWith(':*')).map((value) => value.slice(0, -1));
  return { exact, prefixes };
}

/** Fields whose equality picks out a handful of calls (each has an index after project_id). */
const NARROWING_FIELDS = new Set(['id', 'trace_id', 'parent_id']);

/**
 * Whether a `$expr` requires (at its top, or in a top-level `$and`) that `id`, `trace_id` or
 * `parent_id` equal a literal or be in a list: then, like the list filters, it selects few rows.
 */
function namesCallsOneByOne(query: unknown): boolean {
  if (!isRecord(query)) return false;
  const requiresFewRows = (operation: unknown): boolean => {
    if (!isRecord(operation)) return false;
    if (Array.isArray(operation.$and)) return operation.$and.some(requiresFewRows);
    const isNarrowingField = (operand: unknown): boolean => isRecord(operand) && NARROWING_FIELDS.has(operand.$getField as string);
    const isLiteral = (operand: unknown): boolean => isRecord(operand) && '$literal' in operand;
    const eq = operation.$eq;
    if (Array.isArray(eq) && eq.length === 2) {
      return (isNarrowingField(eq[0]) && isLiteral(eq[1])) || (isNarrowingField(eq[1]) && isLiteral(eq[0]));
    }
    const list = operation.$in;
    return Array.isArray(list) && list.length === 2 && isNarrowingField(list[0]) && Array.isArray(list[1]);
  };
  return requiresFewRows(query.$expr);
}

const READ_FORM_FIELDS = new Set<string>(CALL_FIELD_NAMES);

/** Whether a query's answer carries `attributes` (all fields, or `columns` naming them). */
function answersAttributes(columns: readonly string[] | null): boolean {
  const selected = selectedColumns(columns);
  return selected === null || selected.has('attributes');
}

/**
 * The read-form fields a `columns` list selects. An entry may be a dotted path
 * (`summary.weave.status`, `inputs.question`): it selects its top-level field.
 */
function selectedColumns(columns: readonly string[] | null): ReadonlySet<string> | null {
  if (columns == null || columns.length === 0) return null;
  const selected = new Set(ALWAYS_RETURNED);
  for (const column of columns) {
    const top = column.split('.', 1)[0] as string;
    if (!READ_FORM_FIELDS.has(top)) throw new BadRequestError(`Unknown column ${quote(column)}`);
    selected.add(top);
  }
  return selected;
}
