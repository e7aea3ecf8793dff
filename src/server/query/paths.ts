/**
 * Dotted field paths (`summary.usage.gpt-4o.total_tokens`, `output.choices.0.text`,
 * `attributes.a\.b`) resolved against a FieldTable: which known field they start with, and the
 * JSON path (a bound parameter, never SQL text) for the rest.
 */

import { BadRequestError } from '../errors.js';
import { clip, quote } from '../quote.js';
import type { FieldFamily, FieldSpec, FieldTable, ResolvedField } from './fields.js';
import { param, raw, sql, type SqlFragment } from './sql.js';

/**
 * Numeric parts that get the "list index, or else object key" treatment. Each one doubles the
 * alternatives tried per row, so past this many the remaining numeric parts are list indexes only
 * (which is all the hosted service supports).
 */
const MAX_AMBIGUOUS_INDEXES = 2;

/** Array indexes we accept in a path; longer digit runs are object keys only. */
const INDEX_PATTERN = /^(?:0|[1-9][0-9]{0,8})$/;

/**
 * Splits a dotted path at dots not preceded by a backslash; `\.` inside a part is a literal dot.
 * Other backslashes stay as they are (the hosted service's `split_escaped_field_path` rule).
 * Also returns, for each split, the raw text before it, so field names are matched against what
 * the user wrote (`summary\.weave` is not the field `summary.weave`).
 */
export function splitFieldPath(path: string): { parts: string[]; rawPrefixes: string[] } {
  const parts: string[] = [];
  const rawPrefixes: string[] = [];
  let current = '';
  for (let i = 0; i < path.length; i += 1) {
    const ch = path[i] as string;
    if (ch === '\\' && path[i + 1] === '.') {
      current += '.';
      i += 1;
    } else if (ch === '.') {
      parts.push(current);
      rawPrefixes.push(path.slice(0, i));
      current = '';
    } else {
      current += ch;
    }
  }
  parts.push(current);
  rawPrefixes.push(path);
  return { parts, rawPrefixes };
}

/** A `$`-rooted SQLite JSON path step for one object key. JSON string quoting covers `"`, `\` and control characters. */
function keyStep(key: string): string {
  return `.${JSON.stringify(key)}`;
}

/**
 * The JSON path for `parts` (already split, `\.` unescaped) inside `doc`, as an SQL fragment;
 * `fieldPath` is the whole path the query named, for the error.
 * Without numeric parts it is one bound string. A numeric part may be a list index or an object
 * key (`summary.usage.0`); for the first MAX_AMBIGUOUS_INDEXES of them every combination is tried
 * in turn and the first that exists in the row's document wins (at most 4 alternatives, each a
 * bound string). Throws BadRequestError for a key holding U+0000 (SQLite ends a JSON path key
 * at an escaped NUL, so `a\u0000b` would silently read key `a`).
 *
 * @example jsonPathOf(raw('f.payload'), ['output', 'score'], 'payload.output.score')  // '$."output"."score"'
 */
export function jsonPathOf(doc: SqlFragment, parts: readonly string[], fieldPath: string): SqlFragment {
  if (parts.some((part) => part.includes('\u0000'))) {
    throw new BadRequestError(`Invalid field: ${quote(fieldPath)} (a NUL character in a key)`);
  }
  let variants: string[] = ['$'];
  let ambiguous = 0;
  for (const part of parts) {
    if (INDEX_PATTERN.test(part)) {
      if (ambiguous < MAX_AMBIGUOUS_INDEXES) {
        ambiguous += 1;
        variants = variants.flatMap((v) => [`${v}[${part}]`, v + keyStep(part)]);
      } else {
        variants = variants.map((v) => `${v}[${part}]`);
      }
    } else {
      variants = variants.map((v) => v + keyStep(part));
    }
  }
  const [first, ...rest] = variants as [string, ...string[]];
  if (rest.length === 0) return param(first);
  // Each alternative is tried with json_type (NULL when the path does not exist); when none
  // exists the first (all-index) path is used and yields NULL like any missing path.
  const branches = rest.map((v) => sql` WHEN json_type(${doc}, ${param(v)}) IS NOT NULL THEN ${param(v)}`);
  return sql`(CASE WHEN json_type(${doc}, ${param(first)}) IS NOT NULL THEN ${param(first)}${branches.reduce(
    (acc, b) => sql`${acc}${b}`,
    raw(''),
  )} ELSE ${param(first)} END)`;
}

/** Longest FieldTable name that is a prefix of `path` ending at a (non-escaped) dot or at the end. */
function longestField(
  path: string,
  fields: FieldTable,
): { spec: FieldSpec | FieldFamily; name: string; rest: string[] } | undefined {
  const { parts, rawPrefixes } = splitFieldPath(path);
  for (let i = rawPrefixes.length - 1; i >= 0; i -= 1) {
    const name = rawPrefixes[i] as string;
    if (Object.prototype.hasOwnProperty.call(fields, name)) {
      return { spec: fields[name] as FieldSpec | FieldFamily, name, rest: parts.slice(i + 1) };
    }
  }
  return undefined;
}

/**
 * Resolves a dotted path to SQL, or throws a 400 naming the field. A path that continues past a
 * scalar column (`op_name.x`) is unknown too.
 *
 * @example resolveField('inputs.messages.0.content', { inputs: { sql: 'c.inputs', type: 'json' } })
 */
export function resolveField(path: string, fields: FieldTable): ResolvedField {
  const found = longestField(path, fields);
  if (found === undefined) throw new BadRequestError(`Unknown field: ${clip(path)}`);
  const { spec, name, rest } = found;
  if (spec.type === 'family') {
    // The family reads the raw text after its name: its own syntax may hold dots.
    if (rest.length === 0) throw new BadRequestError(`Unknown field: ${clip(path)}`);
    return spec.resolve(path.slice(name.length + 1), path);
  }
  if (spec.type !== 'json' && rest.length > 0) throw new BadRequestError(`Unknown field: ${clip(path)}`);
  // Parenthesised so a derived expression (`a || b`) binds as one operand wherever it lands.
  const column = raw(`(${spec.sql})`);
  if (spec.type !== 'json') return { kind: 'scalar', type: spec.type, value: column };
  return { kind: 'json', doc: column, path: jsonPathOf(column, rest, path) };
}
