/**
 * Reading SQLite rows in tests the same way under either driver (store/sqlite.ts): the first
 * column of each row, and a row's values in column order.
 */

/** The first column of every row (better-sqlite3's `.pluck().all()`). */
export function firstColumn(rows: readonly unknown[]): unknown[] {
  return rows.map(firstValue);
}

/** The first column of one row, or undefined for no row (`.pluck().get()`). */
export function firstValue(row: unknown): unknown {
  return row === undefined ? undefined : Object.values(row as Record<string, unknown>)[0];
}
