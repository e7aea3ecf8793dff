/**
 * SQL functions of our own, registered on every connection that runs compiled queries (the main
 * one and the stream readers): the query compiler (`query/compile.ts`) and the stores' field
 * tables may use them.
 */
import type { SqliteDatabase } from '../store/sqlite.js';

/**
 * - `unicode_lower(text)`: {@link unicodeLower} of the text (SQLite's own `lower()` folds ASCII
 *   letters only, so `$contains` with `case_insensitive` would not find `école` in `ÉCOLE`). The
 *   compiler passes it text or NULL only; anything else comes back as JavaScript read it. A
 *   JavaScript call per row costs ~0.2 µs more than `lower()` (measured over 300 k rows), which is
 *   why the compiler keeps `lower()` where it gives the same answer.
 * - `number_from_text(text)`: {@link parseNumericText} of the text; NULL for anything else.
 * - `op_name_of_ref(op_name)`: {@link opNameOfRef}.
 * - `whole_number(number)`: the number when it is a whole one (`3`, `3.0`), else NULL (`2.5`,
 *   text, NULL): `$convert` to `int`, as the hosted service's `toInt64OrNull` reads a value.
 */
export function registerSqlFunctions(db: SqliteDatabase): void {
  db.function('unicode_lower', { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? unicodeLower(value) : value,
  );
  db.function('number_from_text', { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? parseNumericText(value) : null,
  );
  db.function('op_name_of_ref', { deterministic: true }, (value: unknown) =>
    typeof value === 'string' ? opNameOfRef(value) : value,
  );
  db.function('whole_number', { deterministic: true }, (value: unknown) =>
    (typeof value === 'number' && Number.isInteger(value)) || typeof value === 'bigint' ? value : null,
  );
}

/**
 * Text lower-cased for case-insensitive matching: Unicode's lower case, with the final sigma `ς`
 * read as `σ`. `toLowerCase` picks the form by position (`ΟΔΟΣ` -> `οδος`, `ΟΔΟΣΑ` -> `οδοσα`),
 * so without this a substring ending in `Σ` would not match the text it is part of.
 */
export function unicodeLower(text: string): string {
  const lower = text.toLowerCase();
  return lower.includes('ς') ? lower.replaceAll('ς', 'σ') : lower;
}

/**
 * A whole text that is a decimal number: sign, digits with at most one dot, optional exponent.
 * Written so that a run of digits can match one way only (`[0-9]+(?:\.[0-9]*)?`, not
 * `[0-9]+\.?[0-9]*`): this runs on stored text, and the ambiguous form backtracked quadratically
 * on a long run of digits that ends in something else (0.8 s for 40 000 digits, measured).
 */
const NUMERIC_TEXT = /^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$/;

/**
 * The number a text reads as when the whole text is one (`42`, `-1.5e3`, `.5`, `+7`), else null
 * (`2024-01-05`, `1.2.3`, `1e`, ` 5`), as ClickHouse's `toFloat64OrNull` reads the text the
 * hosted service extracts from JSON. Query literals and stored text both read this way, so
 * `"12"` in a document equals the literal `12` and `"2024-01-05"` equals no number.
 *
 * @example parseNumericText('1.5e3') // 1500
 */
export function parseNumericText(text: string): number | null {
  return NUMERIC_TEXT.test(text) ? Number(text) : null;
}

/** `weave:///<entity>/<project>/<kind>/<name>:<version>...`: the name is the first part before a `:`. */
const REF_NAME = /^weave:\/\/\/(?:[^/:]*\/)*([^/:]*):/;

/**
 * The name an op ref names (`weave:///acme/demo/op/predict:3fa9` -> `predict`), the op name
 * `summary.weave.trace_name` shows; any other op name as it is. The hosted service extracts it
 * the same way (the part between the last `/` and the first `:` of the ref's path); it would show
 * an empty name for a ref without a version, which reads here as the op name itself.
 *
 * @example opNameOfRef('weave:///acme/demo/op/predict:3fa9') // 'predict'
 */
export function opNameOfRef(opName: string): string {
  const match = REF_NAME.exec(opName);
  return match === null ? opName : (match[1] as string);
}
