/**
 * Small pieces the objects, feedback, token price and files stores share: byte lengths, SQL-safe
 * counts, and the tail of a project's list query.
 */
import type { Query, SortBy } from '../../wire/common.js';
import type { FieldTable } from '../query/fields.js';
import { compileQuery, compileSortTerms } from '../query/index.js';

/** UTF-8 byte length of a text (what `size_bytes` and payload limits measure). */
export function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * A `limit`/`offset` as SQLite accepts it: `null` (no limit) becomes -1 for LIMIT, and values
 * past 2^53 (still "integers" to the schema, e.g. 1e300) are clamped, because SQLite refuses a
 * REAL it cannot turn into a 64-bit integer with "datatype mismatch".
 */
export function sqlCount(value: number | null | undefined, whenAbsent: number): number {
  if (value === null || value === undefined) return whenAbsent;
  return Math.min(value, Number.MAX_SAFE_INTEGER);
}

/** What a project's list query (`feedback/query`, `cost/query`) selects by and pages with. */
export interface ListQuery {
  readonly project_id: string;
  readonly query?: Query | null;
  readonly sort_by?: readonly SortBy[] | null;
  readonly limit?: number | null;
  readonly offset?: number | null;
}

/**
 * `WHERE ... ORDER BY ... LIMIT ? OFFSET ?` of a list query on a table with a `project_id` column,
 * its bound values appended to `params`: the project, `query` compiled against `fields`, `sort_by`
 * (a JSON null counts as present, as the service tests it with JSON_EXISTS), then insertion order
 * (the default, and the tie-breaker after any sort keys).
 */
export function listQueryTail(request: ListQuery, fields: FieldTable, params: unknown[]): string {
  const where = ['project_id = ?'];
  params.push(request.project_id);
  if (request.query !== undefined && request.query !== null) {
    const compiled = compileQuery(request.query, fields, ['body', 'query']);
    where.push(`(${compiled.sql})`);
    params.push(...compiled.params);
  }
  const order: string[] = [];
  for (const sort of request.sort_by ?? []) {
    for (const term of compileSortTerms(sort.field, sort.direction, fields, 'present')) {
      order.push(term.sql);
      params.push(...term.params);
    }
  }
  order.push('rowid ASC');
  params.push(sqlCount(request.limit, -1), sqlCount(request.offset, 0));
  return `WHERE ${where.join(' AND ')} ORDER BY ${order.join(', ')} LIMIT ? OFFSET ?`;
}
