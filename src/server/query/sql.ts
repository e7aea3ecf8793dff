/**
 * A tiny builder for parameterised SQL fragments: text that only ever holds trusted SQL written
 * in this folder (or a FieldSpec's `sql`), with every value carried beside it in `params`, in the
 * order of its `?` placeholders.
 */

/** A piece of SQL and the values bound to its `?` placeholders, in order. */
export interface SqlFragment {
  readonly sql: string;
  readonly params: readonly unknown[];
}

/** A value SQLite can bind (better-sqlite3 rejects booleans and objects, node:sqlite undefined). */
export type Bindable = string | number | bigint | null;

/**
 * Largest SQL text and parameter count a fragment may grow to. Some readings repeat their input
 * (a text read as a boolean is read twice: `true`/`false`, else as a number), so a chain of
 * `$convert`s grows the SQL geometrically; checking at every step stops that long before memory
 * is at risk. 2 MB of SQL still prepares in milliseconds.
 */
export const MAX_SQL_CHARS = 2_000_000;
export const MAX_SQL_PARAMS = 100_000;

/** Thrown while building when a fragment passes MAX_SQL_CHARS or MAX_SQL_PARAMS. */
export class SqlTooLargeError extends Error {
  constructor() {
    super('Compiled SQL is too large');
    this.name = 'SqlTooLargeError';
  }
}

function checked(fragment: SqlFragment): SqlFragment {
  if (fragment.sql.length > MAX_SQL_CHARS || fragment.params.length > MAX_SQL_PARAMS) {
    throw new SqlTooLargeError();
  }
  return fragment;
}

/** One bound parameter. */
export function param(value: Bindable): SqlFragment {
  return { sql: '?', params: [value] };
}

/** Trusted SQL text with no parameters (never user input). */
export function raw(sql: string): SqlFragment {
  return { sql, params: [] };
}

/**
 * Template tag joining trusted SQL text with fragments: `sql\`json_type(${doc}, ${path})\``.
 * Interpolations must be fragments, so a plain string can never be spliced in by accident.
 */
export function sql(strings: TemplateStringsArray, ...parts: readonly SqlFragment[]): SqlFragment {
  let text = strings[0] ?? '';
  const params: unknown[] = [];
  parts.forEach((part, i) => {
    text += part.sql + (strings[i + 1] ?? '');
    // A loop, not push(...spread): spreading a huge list as call arguments overflows the stack.
    for (const value of part.params) params.push(value);
  });
  return checked({ sql: text, params });
}

/**
 * Joins fragments with a boolean operator as a balanced tree of parentheses. SQLite limits the
 * depth of an expression tree (1000 by default); a flat `a OR b OR c ...` parses left-deep, so a
 * long `$or` would hit that limit, while a balanced split keeps the depth logarithmic.
 */
export function joinBalanced(parts: readonly SqlFragment[], operator: 'AND' | 'OR'): SqlFragment {
  if (parts.length === 0) return raw(operator === 'AND' ? '1' : '0');
  if (parts.length === 1) return parts[0] as SqlFragment;
  const middle = Math.ceil(parts.length / 2);
  const left = joinBalanced(parts.slice(0, middle), operator);
  const right = joinBalanced(parts.slice(middle), operator);
  return checked({ sql: `(${left.sql} ${operator} ${right.sql})`, params: [...left.params, ...right.params] });
}
