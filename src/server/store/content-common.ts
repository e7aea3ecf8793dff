/**
 * Small pieces the objects, feedback and files stores share: byte lengths and SQL-safe counts.
 */

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
