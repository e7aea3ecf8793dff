/**
 * Turns a parsed `$expr` (ast.ts) into one SQLite boolean expression with bound parameters.
 *
 * Typing follows the hosted service: the side compared with a literal is read in the literal's
 * type (a number literal compares numerically, a string literal as text, a boolean as a boolean),
 * so `{"$gt": [{"$getField": "summary.usage.x.total_tokens"}, {"$literal": 100}]}` works although
 * the value lives in JSON text. A JSON path read as text is `''` when it is missing or holds null
 * (the service reads `coalesce(nullIf(JSON_VALUE(...), 'null'), '')`), so `$eq [path, ""]` holds
 * for an absent field; other readings of a missing value are NULL. Logic is SQL's three-valued
 * logic, as ClickHouse's: a comparison with NULL is unknown, `$not` of unknown is unknown, and a
 * row whose condition is unknown is not selected (a running call, whose latency is NULL, is in
 * neither `latency_ms >= 100` nor its `$not`).
 */

import type { ComparisonOperator, ConvertTarget, LiteralValue, Operand } from './ast.js';
import { parseNumericText, unicodeLower } from './sql-functions.js';
import { instantFromSeconds, parseTimestamp } from '../timestamps.js';
import type { FieldTable } from './fields.js';
import { resolveField } from './paths.js';
import { joinBalanced, param, raw, sql, type Bindable, type SqlFragment } from './sql.js';

/**
 * What an operand evaluates to. JSON values keep their document and path so each comparison can
 * pick the reading it needs (json_type, numeric, text) without guessing at compile time.
 */
type Value =
  | { readonly kind: 'json'; readonly doc: SqlFragment; readonly path: SqlFragment }
  | { readonly kind: 'scalar'; readonly type: 'text' | 'number' | 'bool' | 'datetime'; readonly sql: SqlFragment }
  | { readonly kind: 'literal'; readonly value: LiteralValue };

const SQL_OPERATORS: Record<ComparisonOperator, string> = {
  $eq: '=',
  $gt: '>',
  $gte: '>=',
  $lt: '<',
  $lte: '<=',
};

function jsonType(v: { doc: SqlFragment; path: SqlFragment }): SqlFragment {
  return sql`json_type(${v.doc}, ${v.path})`;
}

function jsonExtract(v: { doc: SqlFragment; path: SqlFragment }): SqlFragment {
  return sql`json_extract(${v.doc}, ${v.path})`;
}

/**
 * Text read as a number only when the whole text is one (`42`, `-1.5e3`, `.5`), else NULL:
 * `number_from_text` (query/sql-functions.ts), the reading literals get too. SQLite's CAST reads
 * the longest prefix that is a number (`2024-01-05` as 2024, `abc` as 0), and a check in plain
 * SQL took nine GLOBs, each reading the value again (123 ms against 67 ms for the JavaScript
 * function over 200 k JSON texts).
 */
function numberFromText(text: SqlFragment): SqlFragment {
  return sql`number_from_text(${text})`;
}

/** A timestamp column read as Unix seconds (with milliseconds); NULL when it is not a timestamp. */
function epochSeconds(timestamp: SqlFragment): SqlFragment {
  return sql`unixepoch(${timestamp}, 'subsec')`;
}

/**
 * Canonical text (`2026-01-02T03:04:05.123456Z`) of a literal naming an instant: ISO 8601 text in
 * any zone or form `parseTimestamp` takes (digits past the microsecond dropped, as when a call is
 * written), or Unix seconds (rounded to the microsecond: a double such as 1767225600.1 is a hair
 * under its decimal). Null for anything else, and for instants outside years 0001-9999, which
 * that text cannot hold.
 */
function instantText(value: LiteralValue): string | null {
  if (typeof value === 'number') return instantFromSeconds(value)?.text ?? null;
  if (typeof value === 'string') return parseTimestamp(value)?.text ?? null;
  return null;
}

/**
 * A timestamp column and an instant literal compared as canonical text. The columns hold that
 * text (fixed width, so text order is time order), so this is exact to the microsecond (where a
 * double holds microseconds exactly: up to about year 2255), and a range on `started_at` can use
 * the `(project_id, started_at)` index instead of converting every row.
 */
function asInstantText(v: Value): SqlFragment {
  if (v.kind === 'literal') return param(instantText(v.value));
  return asText(v);
}

/**
 * The value as Unix seconds, for comparing a timestamp column with a number outside years
 * 0001-9999 (which no canonical text holds; every stored time is then before or after it).
 * Millisecond precision: SQLite's `unixepoch(..., 'subsec')` stops there.
 */
function asEpoch(v: Value): SqlFragment {
  return v.kind === 'literal' ? param(literalNumber(v.value)) : asNumber(v);
}

function literalNumber(value: LiteralValue): Bindable {
  if (typeof value === 'number') return value;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'string') return parseNumericText(value);
  return null;
}

function literalText(value: LiteralValue): Bindable {
  if (value === null) return null;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  return JSON.stringify(value);
}

function literalBool(value: LiteralValue): Bindable {
  if (value === null) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number') return value !== 0 ? 1 : 0;
  if (typeof value === 'string') {
    const lowered = value.toLowerCase();
    if (lowered === 'true') return 1;
    if (lowered === 'false') return 0;
    const number = parseNumericText(value);
    return number === null ? null : number !== 0 ? 1 : 0;
  }
  return null;
}

/** The value as a number (NULL when it is not one). */
function asNumber(v: Value): SqlFragment {
  switch (v.kind) {
    case 'literal':
      return param(literalNumber(v.value));
    case 'scalar':
      if (v.type === 'datetime') return epochSeconds(v.sql);
      return v.type === 'text' ? numberFromText(v.sql) : v.sql;
    case 'json':
      // Simple CASE: json_type is evaluated once per row.
      return sql`(CASE ${jsonType(v)} WHEN 'integer' THEN ${jsonExtract(v)} WHEN 'real' THEN ${jsonExtract(v)} WHEN 'text' THEN ${numberFromText(jsonExtract(v))} END)`;
  }
}

/**
 * The value as text: strings as they are, other JSON values as their JSON text; a JSON path that
 * is missing or holds null as `''` (as the service's JSON_VALUE reads it), a literal or column
 * null as NULL.
 */
function asText(v: Value): SqlFragment {
  switch (v.kind) {
    case 'literal':
      return param(literalText(v.value));
    case 'scalar':
      if (v.type === 'text' || v.type === 'datetime') return v.sql;
      if (v.type === 'bool') return sql`(CASE ${v.sql} WHEN 1 THEN 'true' WHEN 0 THEN 'false' END)`;
      return sql`CAST(${v.sql} AS TEXT)`;
    case 'json':
      return sql`coalesce(CASE ${jsonType(v)} WHEN 'text' THEN ${jsonExtract(v)} WHEN 'null' THEN NULL ELSE (${v.doc} -> ${v.path}) END, '')`;
  }
}

/** A JSON value's text in one read, for comparing with texts no JSON number or boolean renders as (see jsonEqualsText). */
function jsonTextOrEmpty(v: { doc: SqlFragment; path: SqlFragment }): SqlFragment {
  return sql`coalesce(${jsonExtract(v)}, '')`;
}

/**
 * The value as 1/0: JSON true/false, numbers (non-zero is true), and the texts `true`/`false`
 * or numeric text; anything else NULL. Lenient like the hosted service's bool cast.
 */
function asBool(v: Value): SqlFragment {
  switch (v.kind) {
    case 'literal':
      return param(literalBool(v.value));
    case 'scalar':
      if (v.type === 'bool') return v.sql;
      if (v.type === 'number') return sql`(${v.sql} <> 0)`;
      return boolFromText(v.sql);
    case 'json':
      return sql`(CASE ${jsonType(v)} WHEN 'true' THEN 1 WHEN 'false' THEN 0 WHEN 'integer' THEN ${jsonExtract(v)} <> 0 WHEN 'real' THEN ${jsonExtract(v)} <> 0 WHEN 'text' THEN ${boolFromText(jsonExtract(v))} END)`;
  }
}

function boolFromText(text: SqlFragment): SqlFragment {
  return sql`(CASE lower(${text}) WHEN 'true' THEN 1 WHEN 'false' THEN 0 ELSE ${numberFromText(text)} <> 0 END)`;
}

/** The value as minified JSON text, for comparing with list/object literals. */
function asJsonText(v: Value): SqlFragment {
  switch (v.kind) {
    case 'literal':
      return sql`json(${param(JSON.stringify(v.value))})`;
    case 'scalar':
      return v.type === 'bool' ? asText(v) : sql`json_quote(${v.sql})`;
    case 'json':
      return sql`(${v.doc} -> ${v.path})`;
  }
}

/** The value as SQLite reads it, for comparing two fields whose types are both unknown. */
function asNative(v: Value): SqlFragment {
  switch (v.kind) {
    case 'literal':
      return param(literalText(v.value));
    case 'scalar':
      return v.sql;
    case 'json':
      return jsonExtract(v);
  }
}

/** True when the value is present: for JSON, the path exists (even holding null), like JSON_EXISTS. */
function exists(v: Value): SqlFragment {
  switch (v.kind) {
    case 'literal':
      return raw(v.value === null ? '0' : '1');
    case 'scalar':
      return sql`(${v.sql} IS NOT NULL)`;
    case 'json':
      return sql`(${jsonType(v)} IS NOT NULL)`;
  }
}

type Reading = (v: Value) => SqlFragment;

function isTimestamp(v: Value): boolean {
  return v.kind === 'scalar' && v.type === 'datetime';
}

/** A literal a timestamp column compares with as an instant: a number, or text `parseTimestamp` takes. */
function isInstant(v: Value): v is Extract<Value, { kind: 'literal' }> {
  return v.kind === 'literal' && (typeof v.value === 'number' || (typeof v.value === 'string' && parseTimestamp(v.value) !== null));
}

function instantReading(literal: LiteralValue): Reading {
  return instantText(literal) !== null ? asInstantText : asEpoch;
}

/**
 * Which reading two values are compared in: a timestamp column against a number or timestamp
 * literal compares instants; otherwise the literal's type, else the typed side's, else native.
 */
function readingFor(a: Value, b: Value): Reading {
  if (isTimestamp(a) && isInstant(b)) return instantReading(b.value);
  if (isTimestamp(b) && isInstant(a)) return instantReading(a.value);
  for (const side of [a, b]) {
    if (side.kind !== 'literal') continue;
    const value = side.value;
    if (typeof value === 'number') return asNumber;
    if (typeof value === 'string') return asText;
    if (typeof value === 'boolean') return asBool;
    if (value !== null) return asJsonText;
  }
  for (const side of [a, b]) {
    if (side.kind !== 'scalar') continue;
    if (side.type === 'text' || side.type === 'datetime') return asText;
    return side.type === 'bool' ? asBool : asNumber;
  }
  return asNative;
}

function isNullLiteral(v: Value): boolean {
  return v.kind === 'literal' && v.value === null;
}

function compare(operator: ComparisonOperator, left: Value, right: Value): SqlFragment {
  if (operator === '$eq' && (isNullLiteral(left) || isNullLiteral(right))) {
    const other = isNullLiteral(left) ? right : left;
    // Missing and JSON null are both "null" here (json_extract gives SQL NULL for either).
    return other.kind === 'literal' ? raw(other.value === null ? '1' : '0') : sql`(${asNative(other)} IS NULL)`;
  }
  if (operator === '$eq') {
    const direct = jsonEqualsText(left, right) ?? jsonEqualsText(right, left);
    if (direct !== undefined) return direct;
  }
  const read = readingFor(left, right);
  return sql`(${read(left)} ${raw(SQL_OPERATORS[operator])} ${read(right)})`;
}

/**
 * Whether `text` could be a JSON number or boolean as SQLite renders it (canonical JSON: a number
 * starts with a digit or `-`, also for JSON5 input such as `.5` or `Infinity`). Only such a text
 * can equal a non-string JSON value read as text (`42` = `"42"`, `true` = `"true"`).
 */
function mayBeNonStringJson(text: string): boolean {
  return text === 'true' || text === 'false' || /^[-0-9]/.test(text);
}

/**
 * `$eq` of a JSON value and a string literal that no JSON number or boolean renders as (the usual
 * filter, `payload.note = "good"`) as a plain `coalesce(json_extract(...), '') = ?`. asText's CASE reads the
 * path two or three times per row (json_type, then json_extract or ->): measured over 100 k JSONB
 * payloads, 33 ms for the whole `feedback/query` statement against 25 ms (19 ms of either is
 * visiting the rows). The single read gives the same SQL value (true, false or NULL) for every
 * row: strings compare as text, objects and lists as the same minified JSON text, null and
 * missing as `''`, and numbers/booleans (read as SQL numbers) equal no such text, as under asText
 * (test/server/query-text-equality.test.ts holds the two readings together).
 */
function jsonEqualsText(json: Value, literal: Value): SqlFragment | undefined {
  if (json.kind !== 'json' || literal.kind !== 'literal') return undefined;
  const value = literal.value;
  if (typeof value !== 'string' || mayBeNonStringJson(value)) return undefined;
  return sql`(${jsonTextOrEmpty(json)} = ${param(value)})`;
}

/**
 * `$contains` with `case_insensitive`. Both sides are lower-cased by Unicode's rules
 * (`unicode_lower`, query/sql-functions.ts), except for a literal substring of ASCII characters
 * only: then SQLite's faster `lower()` (ASCII letters) folds the text, which finds the same
 * matches except where the text holds one of the two characters whose lower case is ASCII,
 * `İ` (U+0130) and the Kelvin sign (U+212A). A literal substring is lower-cased here, once.
 */
function caseInsensitiveContains(input: SqlFragment, substr: Value): SqlFragment {
  if (substr.kind === 'literal' && typeof substr.value === 'string') {
    // The substring as written decides: the Kelvin sign lower-cases to an ASCII `k`.
    const fold = /^[\x00-\x7f]*$/.test(substr.value) ? raw('lower') : raw('unicode_lower');
    return sql`(instr(${fold}(${input}), ${param(unicodeLower(substr.value))}) > 0)`;
  }
  return sql`(instr(unicode_lower(${input}), unicode_lower(${asText(substr)})) > 0)`;
}

/** Literal `$in` items of one kind travel as one JSON array parameter, however many there are. */
function inList(needle: SqlFragment, values: readonly unknown[]): SqlFragment {
  return sql`(${needle} IN (SELECT value FROM json_each(${param(JSON.stringify(values))})))`;
}

function membership(needle: Value, haystack: readonly Value[]): SqlFragment {
  const numbers: number[] = [];
  const texts: string[] = [];
  const bools: number[] = [];
  const jsonTexts: string[] = [];
  let hasNull = false;
  const others: SqlFragment[] = [];
  // A timestamp column's instants, as the canonical text it holds (`$eq` reads them the same way).
  const instants: string[] = [];
  for (const item of haystack) {
    if (item.kind !== 'literal' || (isTimestamp(needle) && isInstant(item))) {
      const instant = item.kind === 'literal' ? instantText(item.value) : null;
      if (instant !== null) instants.push(instant);
      else others.push(compare('$eq', needle, item));
      continue;
    }
    const value = item.value;
    if (value === null) hasNull = true;
    else if (typeof value === 'number') numbers.push(value);
    else if (typeof value === 'string') texts.push(value);
    else if (typeof value === 'boolean') bools.push(value ? 1 : 0);
    else jsonTexts.push(JSON.stringify(value));
  }
  const parts: SqlFragment[] = [];
  if (instants.length > 0) parts.push(inList(asText(needle), instants));
  if (numbers.length > 0) parts.push(inList(asNumber(needle), numbers));
  if (texts.length > 0) {
    // The same single read as jsonEqualsText when no listed text could be a number or boolean.
    const direct = needle.kind === 'json' && !texts.some(mayBeNonStringJson);
    parts.push(inList(direct ? jsonTextOrEmpty(needle) : asText(needle), texts));
  }
  if (bools.length > 0) parts.push(inList(asBool(needle), bools));
  if (jsonTexts.length > 0) parts.push(inList(asJsonText(needle), jsonTexts));
  if (hasNull) parts.push(compare('$eq', needle, { kind: 'literal', value: null }));
  parts.push(...others);
  return joinBalanced(parts, 'OR');
}

function convert(v: Value, to: ConvertTarget): Value {
  switch (to) {
    case 'double':
      return { kind: 'scalar', type: 'number', sql: asNumber(v) };
    case 'int':
      // `toInt64OrNull` on the service: a whole number, else NULL (`2.5` is not 2). The cast makes
      // it an SQLite INTEGER (a JavaScript function's number comes back REAL: `5.0` as text).
      return { kind: 'scalar', type: 'number', sql: sql`CAST(whole_number(${asNumber(v)}) AS INTEGER)` };
    case 'string':
      return { kind: 'scalar', type: 'text', sql: asText(v) };
    case 'bool':
      return { kind: 'scalar', type: 'bool', sql: asBool(v) };
    case 'exists':
      return { kind: 'scalar', type: 'bool', sql: exists(v) };
  }
}

/** Compiles operands against one field table. */
class Compiler {
  constructor(private readonly fields: FieldTable) {}

  /** An operand used as a filter: a boolean SQL expression (NULL is unknown: it selects nothing, and `$not` keeps it unknown). */
  condition(node: Operand): SqlFragment {
    switch (node.kind) {
      case 'and':
      case 'or':
        return joinBalanced(
          node.items.map((item) => this.condition(item)),
          node.kind === 'and' ? 'AND' : 'OR',
        );
      case 'not':
        // NOT of unknown stays unknown (the row is not selected), as in ClickHouse.
        return sql`(NOT (${this.condition(node.item)}))`;
      case 'compare':
        return compare(node.operator, this.value(node.left), this.value(node.right));
      case 'in':
        return membership(
          this.value(node.needle),
          node.haystack.map((item) => this.value(item)),
        );
      case 'contains': {
        const input = asText(this.value(node.input));
        // instr, not LIKE: `%` and `_` in the substring are plain characters with no escaping.
        if (!node.caseInsensitive) return sql`(instr(${input}, ${asText(this.value(node.substr))}) > 0)`;
        return caseInsensitiveContains(input, this.value(node.substr));
      }
      default:
        return asBool(this.value(node));
    }
  }

  value(node: Operand): Value {
    switch (node.kind) {
      case 'literal':
        return { kind: 'literal', value: node.value };
      case 'field': {
        const field = resolveField(node.path, this.fields);
        return field.kind === 'json'
          ? { kind: 'json', doc: field.doc, path: field.path }
          : { kind: 'scalar', type: field.type, sql: field.value };
      }
      case 'convert':
        return convert(this.value(node.input), node.to);
      default:
        // An operation used as a value is a 0/1 (never NULL, so `$eq [op, false]` holds when op fails).
        return { kind: 'scalar', type: 'bool', sql: sql`(${this.condition(node)} IS TRUE)` };
    }
  }
}

/** SQL boolean expression for a parsed query. Throws BadRequestError for unknown fields. */
export function compileCondition(node: Operand, fields: FieldTable): SqlFragment {
  return new Compiler(fields).condition(node);
}

/** Whether a JSON null counts as a value when sorting (the hosted service's two queries differ). */
export type JsonNullInSort = 'absent' | 'present';

/**
 * ORDER BY terms for one `sort_by` entry, as the hosted service sorts:
 *
 * - a column or derived field: its value, NULLs last in either direction (ClickHouse's default;
 *   SQLite puts them first ascending). SQLite still reads `calls_by_start` in order for
 *   `started_at ASC NULLS LAST` (it scans the non-NULL entries, then the NULL ones).
 * - a JSON path: three keys (`OrderField.as_sql` / `Select.prepare`): absent values last in
 *   either direction, then the numeric reading (`toFloat64OrNull`: JSON numbers and numeric
 *   text, `"10"` between 9 and 20) NULLs last, then the text reading (`toString(JSON_VALUE)`)
 *   in the sort's direction. A JSON null is absent for `jsonNull: 'absent'` (the calls query
 *   tests `JSONType(...) = 'Null'`) and present, reading as the text `null`, for `'present'`
 *   (the feedback query tests `JSON_EXISTS`).
 */
export function compileSortFragments(
  path: string,
  direction: 'asc' | 'desc',
  fields: FieldTable,
  jsonNull: JsonNullInSort,
): SqlFragment[] {
  const value = new Compiler(fields).value({ kind: 'field', path });
  if (value.kind !== 'json') return [sql`${asNative(value)} ${raw(direction === 'desc' ? 'DESC' : 'ASC')} NULLS LAST`];
  return jsonSortFragments(value, direction, jsonNull);
}

/** The three ORDER BY keys of a value inside a JSON document (see compileSortFragments). */
export function jsonSortFragments(
  value: { doc: SqlFragment; path: SqlFragment },
  direction: 'asc' | 'desc',
  jsonNull: JsonNullInSort,
): SqlFragment[] {
  const order = raw(direction === 'desc' ? 'DESC' : 'ASC');
  return [
    sql`${absent(value, jsonNull)} ASC`,
    sql`${asNumber({ kind: 'json', ...value })} ${order} NULLS LAST`,
    sql`${jsonValueText(value)} ${order}`,
  ];
}

/** 1 when the JSON value counts as absent for sorting, else 0 (never NULL). */
function absent(v: { doc: SqlFragment; path: SqlFragment }, jsonNull: JsonNullInSort): SqlFragment {
  return jsonNull === 'absent' ? sql`(coalesce(${jsonType(v)}, 'null') = 'null')` : sql`(${jsonType(v)} IS NULL)`;
}

/**
 * The text ClickHouse's `JSON_VALUE` gives: a string as it is, a number, boolean or null as its
 * JSON text, and `''` for objects, lists and missing paths (so those tie; the sort's last key,
 * the id or insertion order, decides between them).
 */
function jsonValueText(v: { doc: SqlFragment; path: SqlFragment }): SqlFragment {
  return sql`coalesce(CASE ${jsonType(v)} WHEN 'text' THEN ${jsonExtract(v)} WHEN 'object' THEN '' WHEN 'array' THEN '' ELSE (${v.doc} -> ${v.path}) END, '')`;
}

/** SQL expression for one field's value as JSON text (strings quoted, objects as objects). */
export function compileFieldJson(path: string, fields: FieldTable): SqlFragment {
  return asJsonText(new Compiler(fields).value({ kind: 'field', path }));
}
