/**
 * The calls store: every read and write of call records, on prepared statements, one
 * transaction per request. Parts merge by `(project_id, id)` with SQLite upserts, so start and
 * end may come in any order and any number of times (SPEC §2.1).
 */
import type Database from 'better-sqlite3';
import { BadRequestError, NotFoundError } from '../errors.js';
import { compileFieldRef, compileQuery } from '../query/index.js';
import { quote } from '../quote.js';
import { nowInstant } from '../timestamps.js';
import { isCallId, type CallsFilter, type SortBy } from '../../wire/calls.js';
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

/** One part of a call to write; rows come from `calls-rows.ts`, already checked. */
export type CallPart = { readonly kind: 'start'; readonly row: StartRow } | { readonly kind: 'end'; readonly row: EndRow };

export interface ReadOptions {
  readonly includeCosts: boolean;
  readonly includeStorageSize: boolean;
  readonly includeTotalStorageSize: boolean;
}

export interface QueryRequest extends ReadOptions {
  readonly projectId: string;
  readonly filter: CallsFilter | null;
  readonly query: unknown;
  readonly sortBy: readonly SortBy[] | null;
  readonly limit: number | null;
  readonly offset: number | null;
  readonly columns: readonly string[] | null;
}

export interface CallsStore {
  /** Write parts in order, in one transaction. */
  writeParts(parts: readonly CallPart[]): void;
  /** The read form of one visible call as JSON text, or null. */
  readJson(projectId: string, id: string, options: ReadOptions): string | null;
  /** Lines of JSON text (one call each) for a `calls/stream_query`. */
  queryJson(request: QueryRequest): string[];
  /** Mark calls and all their descendants deleted; returns how many were newly marked. */
  deleteCalls(projectId: string, callIds: readonly string[]): number;
  /** Set a visible call's display name; throws NotFoundError when there is no such call. */
  updateDisplayName(projectId: string, id: string, displayName: string): void;
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
  columns.filter((c) => c !== 'project_id' && c !== 'id' && c !== 'wb_user_id').map((c) => `${c} = excluded.${c}`).join(', ');

// The start part's writer owns wb_user_id; an end that arrives first fills it until then.
const UPSERT_START_SQL = `
INSERT INTO calls (${START_COLUMNS.join(', ')}, has_start)
VALUES (${START_COLUMNS.map(() => '?').join(', ')}, 1)
ON CONFLICT (project_id, id) DO UPDATE SET ${assignments(START_COLUMNS)}, has_start = 1, wb_user_id = excluded.wb_user_id`;

const UPSERT_END_SQL = `
INSERT INTO calls (${END_COLUMNS.join(', ')})
VALUES (${END_COLUMNS.map(() => '?').join(', ')})
ON CONFLICT (project_id, id) DO UPDATE SET ${assignments(END_COLUMNS)}, wb_user_id = coalesce(calls.wb_user_id, excluded.wb_user_id)`;

/** What every read selects, named as `CallRow` expects. */
const CALL_COLUMNS_SQL = `c.id, c.project_id, c.op_name, c.display_name, c.trace_id, c.parent_id,
  c.thread_id, c.turn_id, c.started_at, c.ended_at, c.attributes, c.inputs, c.output, c.summary,
  c.exception, c.wb_user_id, c.wb_run_id, c.wb_run_step, c.wb_run_step_end,
  ${STORAGE_SIZE_SQL} AS storage_size_bytes, ${STATUS_SQL} AS status, ${LATENCY_SQL} AS latency_ms`;

/** The summed storage of a root call's whole trace; null on calls that have a parent. */
const TOTAL_STORAGE_SQL = `(CASE WHEN c.parent_id IS NULL THEN (
  SELECT sum(t.start_bytes + t.end_bytes) FROM calls t
  WHERE t.project_id = c.project_id AND t.trace_id = c.trace_id AND t.has_start = 1 AND t.deleted_at IS NULL
) END) AS total_storage_size_bytes`;

const READ_SQL = `SELECT ${CALL_COLUMNS_SQL} FROM calls c WHERE c.project_id = ? AND c.id = ? AND ${VISIBLE_SQL}`;
const READ_WITH_TOTAL_SQL = `SELECT ${CALL_COLUMNS_SQL}, ${TOTAL_STORAGE_SQL} FROM calls c
  WHERE c.project_id = ? AND c.id = ? AND ${VISIBLE_SQL}`;

// Descendants by parent_id, breadth first; UNION (not UNION ALL) stops on a cycle of bad parents.
const DELETE_SQL = `
WITH RECURSIVE doomed(id) AS (
  SELECT value FROM json_each(@ids)
  UNION
  SELECT c.id FROM calls c JOIN doomed d ON c.project_id = @project AND c.parent_id = d.id
)
UPDATE calls SET deleted_at = @now
WHERE project_id = @project AND id IN (SELECT id FROM doomed) AND deleted_at IS NULL AND has_start = 1`;

const UPDATE_DISPLAY_NAME_SQL = `UPDATE calls AS c SET display_name = ? WHERE c.project_id = ? AND c.id = ? AND ${VISIBLE_SQL}`;

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

/** Dynamic query statements kept prepared, by SQL text: clients repeat the same query shapes. */
const QUERY_CACHE_SIZE = 64;

/**
 * Create the calls store on an open database (schema already migrated).
 *
 * @example
 * const calls = createCallsStore(db);
 * calls.writeParts([{ kind: 'start', row: toStartRow(start, 'dev', ['body', 'start']) }]);
 */
export function createCallsStore(db: Database.Database): CallsStore {
  const upsertStart = db.prepare(UPSERT_START_SQL);
  const upsertEnd = db.prepare(UPSERT_END_SQL);
  const read = db.prepare(READ_SQL);
  const readWithTotal = db.prepare(READ_WITH_TOTAL_SQL);
  const deleteTree = db.prepare(DELETE_SQL);
  const updateDisplayName = db.prepare(UPDATE_DISPLAY_NAME_SQL);
  const queryCache = new Map<string, Database.Statement>();

  const writeParts = db.transaction((parts: readonly CallPart[]) => {
    for (const part of parts) {
      if (part.kind === 'start') upsertStart.run(part.row);
      else upsertEnd.run(part.row);
    }
  });

  function prepareQuery(sql: string): Database.Statement {
    let statement = queryCache.get(sql);
    if (statement === undefined) {
      statement = db.prepare(sql);
      if (queryCache.size >= QUERY_CACHE_SIZE) queryCache.delete(queryCache.keys().next().value as string);
      queryCache.set(sql, statement);
    }
    return statement;
  }

  return {
    writeParts(parts) {
      writeParts(parts);
    },

    readJson(projectId, id, options) {
      const statement = options.includeTotalStorageSize ? readWithTotal : read;
      const row = statement.get(projectId, id) as CallRow | undefined;
      if (row === undefined) return null;
      return callToJson(row, { ...options, columns: null });
    },

    queryJson(request) {
      const { sql, params } = buildQuery(request);
      const rows = prepareQuery(sql).all(params) as CallRow[];
      const options: CallJsonOptions = {
        includeCosts: request.includeCosts,
        includeStorageSize: request.includeStorageSize,
        includeTotalStorageSize: request.includeTotalStorageSize,
        columns: selectedColumns(request.columns),
      };
      return rows.map((row) => callToJson(row, options));
    },

    deleteCalls(projectId, callIds) {
      for (const id of callIds) {
        if (!isCallId(id)) throw new BadRequestError(`Invalid call id ${quote(id)} in call_ids`);
      }
      return deleteTree.run({ project: projectId, ids: JSON.stringify(callIds), now: nowInstant().text }).changes;
    },

    updateDisplayName(projectId, id, displayName) {
      if (updateDisplayName.run(displayName, projectId, id).changes === 0) {
        throw new NotFoundError(`Call ${quote(id)} not found in project ${quote(projectId)}`);
      }
    },
  };
}

/** SQL and bound parameters of a `calls/stream_query`. Field names come only from CALL_FIELDS. */
function buildQuery(request: QueryRequest): { sql: string; params: unknown[] } {
  const where = ['c.project_id = ?', VISIBLE_SQL];
  const params: unknown[] = [request.projectId];
  const filter = request.filter ?? {};

  const opNames = filter.op_names ?? [];
  if (opNames.length > 0) {
    // `<ref prefix>:*` matches every version of an op (any digest), as in the hosted service.
    const exact = opNames.filter((name) => !name.endsWith(':*'));
    const prefixes = opNames.filter((name) => name.endsWith(':*')).map((name) => name.slice(0, -1));
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
  if (request.query != null) {
    const compiled = compileQuery(request.query, CALL_FIELDS, ['body', 'query']);
    where.push(`(${compiled.sql})`);
    params.push(...compiled.params);
  }

  // Sorting parameters come after the WHERE parameters, in the order the SQL text uses them.
  const order: string[] = [];
  for (const { field, direction } of request.sortBy ?? []) {
    const ref = compileFieldRef(field, CALL_FIELDS);
    order.push(`${ref.sql} ${direction === 'desc' ? 'DESC' : 'ASC'}`);
    params.push(...ref.params);
  }
  if (order.length === 0) order.push('c.started_at ASC');
  order.push('c.id ASC'); // a total order, so pages never overlap or skip

  params.push(request.limit ?? -1, request.offset ?? 0);
  const total = request.includeTotalStorageSize ? `, ${TOTAL_STORAGE_SQL}` : '';
  const sql = `SELECT ${CALL_COLUMNS_SQL}${total} FROM calls c WHERE ${where.join(' AND ')}
    ORDER BY ${order.join(', ')} LIMIT ? OFFSET ?`;
  return { sql, params };
}

const READ_FORM_FIELDS = new Set<string>(CALL_FIELD_NAMES);

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
