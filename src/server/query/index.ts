/**
 * The `$expr` query language of SPEC §2.4 compiled to parameterised SQLite SQL, shared by
 * `calls/stream_query` and `feedback/query` (and `sort_by`/`fields` paths). User text only ever
 * reaches SQLite as bound parameters; field names are looked up in the caller's FieldTable.
 */

import { ValidationError } from '../errors.js';
import { compileCondition, compileFieldJson, compileFieldValue } from './compile.js';
import type { FieldTable } from './fields.js';
import { parseQuery } from './parse.js';
import { MAX_SQL_CHARS, SqlTooLargeError } from './sql.js';

export type { FieldSpec, FieldTable } from './fields.js';
export { MAX_QUERY_DEPTH, MAX_QUERY_NODES } from './parse.js';
export { splitFieldPath } from './paths.js';

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
 * SQL expression reading one dotted field (for `sort_by`): a column, a derived field, or a value
 * inside a JSON column (`json_extract`, so JSON numbers sort as numbers). Throws `BadRequestError`
 * for an unknown field.
 *
 * @example
 * const key = compileFieldRef('summary.usage.gpt-4o.total_tokens', fields);
 * // key.sql = 'json_extract((c.summary), ?)', key.params = ['$."usage"."gpt-4o"."total_tokens"']
 * db.prepare(`SELECT * FROM calls c ORDER BY ${key.sql} DESC`).all(...key.params);
 */
export function compileFieldRef(path: string, fields: FieldTable): CompiledSql {
  const compiled = compileFieldValue(path, fields);
  return { sql: compiled.sql, params: [...compiled.params] };
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
