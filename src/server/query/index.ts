/**
 * The `$expr` query language of SPEC §2.4 compiled to parameterised SQLite SQL, shared by
 * `calls/stream_query` and `feedback/query` (and `sort_by`/`fields` paths). User text only ever
 * reaches SQLite as bound parameters; field names are looked up in the caller's FieldTable.
 */

import { ValidationError } from '../errors.js';
import { compileCondition, compileFieldJson, compileSortFragments, jsonSortFragments, type JsonNullInSort } from './compile.js';
import { jsonPathOf } from './paths.js';
import { raw } from './sql.js';
import type { FieldTable } from './fields.js';
import { parseQuery } from './parse.js';
import { MAX_SQL_CHARS, SqlTooLargeError } from './sql.js';

export type { FieldFamily, FieldSpec, FieldTable, ResolvedField } from './fields.js';
export type { JsonNullInSort } from './compile.js';
export { MAX_QUERY_DEPTH, MAX_QUERY_NODES } from './parse.js';
export { jsonPathOf, splitFieldPath } from './paths.js';
export { param, raw, sql, type SqlFragment } from './sql.js';

/**
 * Most parameters one compiled query may bind. SQLite allows 32766 per statement; the rest is
 * left for the caller's own (project id, limit, filters).
 */
export const MAX_QUERY_PARAMS = 30_000;

/** A compiled SQL expression and the values for its `?` placeholders, in order. */
export interface CompiledSql {
  sql: string;
  params: unknown[];
}

/**
 * Compiles the body field `query` (`{"$expr": Operation}`) into an SQL boolean expression to AND
 * into a WHERE clause. `null`/`undefined` (no query) compiles to `1` (every row).
 *
 * Throws `ValidationError` (422, `loc` = `[...loc, "$expr", ...]`) when the structure breaks the
 * grammar or the size limits, and `BadRequestError` (400, "Unknown field: <path>") for a field that
 * is not in `fields`.
 *
 * @example
 * const { sql, params } = compileQuery(
 *   { $expr: { $gt: [{ $getField: 'summary.usage.gpt-4o.total_tokens' }, { $literal: 100 }] } },
 *   { summary: { sql: 'c.summary', type: 'json' } },
 * );
 * db.prepare(`SELECT id FROM calls c WHERE ${sql}`).all(...params);
 */
export function compileQuery(
  query: unknown,
  fields: FieldTable,
  loc: Array<string | number> = ['body', 'query'],
): CompiledSql {
  if (query === null || query === undefined) return { sql: '1', params: [] };
  const ast = parseQuery(query, loc);
  const tooLarge = (): ValidationError =>
    new ValidationError([
      {
        type: 'too_large',
        loc: [...loc, '$expr'],
        msg: `Query is too large to run: it needs more than ${MAX_QUERY_PARAMS} bound values or ${MAX_SQL_CHARS} characters of SQL`,
        input: null,
      },
    ]);
  let compiled;
  try {
    compiled = compileCondition(ast, fields);
  } catch (error) {
    if (error instanceof SqlTooLargeError) throw tooLarge();
    throw error;
  }
  if (compiled.params.length > MAX_QUERY_PARAMS) throw tooLarge();
  return { sql: compiled.sql, params: [...compiled.params] };
}

/**
 * ORDER BY terms (each with its parameters) for one `sort_by` entry, sorted as the hosted service
 * sorts: a column or derived field by its value with NULLs last in either direction; a dotted
 * path into a JSON column by three keys, absent values last, then the numeric reading (JSON
 * numbers and numeric text together), then the text (see `compileSortFragments` in compile.ts).
 * `jsonNull` says whether a JSON null is absent (calls) or a value (feedback). Throws
 * `BadRequestError` for an unknown field.
 *
 * @example
 * const terms = compileSortTerms('summary.usage.gpt-4o.total_tokens', 'desc', fields, 'absent');
 * const orderBy = terms.map((term) => term.sql).join(', ');
 * db.prepare(`SELECT * FROM calls c ORDER BY ${orderBy}`).all(...terms.flatMap((term) => term.params));
 */
export function compileSortTerms(
  path: string,
  direction: 'asc' | 'desc',
  fields: FieldTable,
  jsonNull: JsonNullInSort,
): CompiledSql[] {
  return compileSortFragments(path, direction, fields, jsonNull).map((term) => ({ sql: term.sql, params: [...term.params] }));
}

/**
 * ORDER BY terms sorting on the value at `parts` inside the JSON document `docSql` (trusted SQL:
 * a column), by the same three keys as a JSON path in {@link compileSortTerms}: a table's rows
 * (`table/query` `sort_by`), which have no field names of their own. `fieldPath` is what the
 * request named, for errors.
 *
 * @example compileDocumentSortTerms('r.val', ['score'], 'score', 'desc', 'absent')
 */
export function compileDocumentSortTerms(
  docSql: string,
  parts: readonly string[],
  fieldPath: string,
  direction: 'asc' | 'desc',
  jsonNull: JsonNullInSort,
): CompiledSql[] {
  const doc = raw(docSql);
  return jsonSortFragments({ doc, path: jsonPathOf(doc, parts, fieldPath) }, direction, jsonNull).map((term) => ({
    sql: term.sql,
    params: [...term.params],
  }));
}

/**
 * SQL expression giving one dotted field's value as JSON text (NULL when the path is missing), for
 * projections that must keep the JSON type (`feedback/query` `fields`: a number stays a number,
 * an object an object). Parse the result with `JSON.parse`. Throws `BadRequestError` for an
 * unknown field.
 */
export function compileFieldJsonRef(path: string, fields: FieldTable): CompiledSql {
  const compiled = compileFieldJson(path, fields);
  return { sql: compiled.sql, params: [...compiled.params] };
}
