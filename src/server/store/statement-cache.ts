/**
 * Prepared statements keyed by their SQL text, shared by every store whose queries depend on the
 * request (filters present, sort keys).
 */
import type { SqliteDatabase, SqliteStatement } from './sqlite.js';

/**
 * Shapes repeat, so preparing once per shape saves the parse; the cache is bounded because
 * `sort_by` lists make the number of shapes unbounded.
 *
 * @example
 * const queries = new StatementCache(db);
 * queries.get('SELECT 1 AS one').get(); // { one: 1 }
 */
export class StatementCache {
  private readonly statements = new Map<string, SqliteStatement>();

  constructor(
    private readonly db: SqliteDatabase,
    private readonly maxEntries = 128,
  ) {}

  /** The statement for `sql`, prepared on first use. */
  get(sql: string): SqliteStatement {
    let statement = this.statements.get(sql);
    if (statement === undefined) {
      statement = this.db.prepare(sql);
      if (this.statements.size >= this.maxEntries) this.statements.clear();
      this.statements.set(sql, statement);
    }
    return statement;
  }
}
