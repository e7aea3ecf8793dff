/**
 * Small pieces the objects, feedback and files stores share: a cache of prepared statements for
 * queries whose SQL depends on the request, the JSON depth bound, and SQL-safe counts.
 */
import type Database from 'better-sqlite3';
import { BadRequestError } from '../errors.js';
import { MAX_JSON_DEPTH } from '../../wire/digest.js';

/**
 * Prepared statements keyed by their SQL text, for queries whose shape depends on the request
 * (filters present, sort keys). Shapes repeat, so preparing once per shape saves the parse; the
 * cache is bounded because `sort_by` lists make the number of shapes unbounded.
 */
export class StatementCache {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(
    private readonly db: Database.Database,
    private readonly maxEntries = 128,
  ) {}

  get(sql: string): Database.Statement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      if (this.statements.size >= this.maxEntries) this.statements.clear();
      this.statements.set(sql, statement);
    }
    return statement;
  }
}

/**
 * Refuse a JSON value nested deeper than MAX_JSON_DEPTH with a 400 naming `what`. SQLite's JSON
 * functions fail on documents nested past 1000 levels, and `JSON.stringify` overflows the stack
 * long before a 32 MiB body runs out: a stored document that deep would break every later query
 * of its project. Iterative, so hostile depth cannot overflow the stack here either.
 */
export function assertJsonDepth(value: unknown, what: string): void {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: current, depth } = stack.pop() as { value: unknown; depth: number };
    if (typeof current !== 'object' || current === null) continue;
    if (depth >= MAX_JSON_DEPTH) {
      throw new BadRequestError(`${what} is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    const children = Array.isArray(current) ? current : Object.values(current);
    for (const child of children) {
      if (typeof child === 'object' && child !== null) stack.push({ value: child, depth: depth + 1 });
    }
  }
}

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
