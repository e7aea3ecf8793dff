/**
 * `$eq`/`$in` of a JSON path and a string literal compiles to a single
 * `coalesce(json_extract(...), '') = ?` when no JSON number or boolean can render as the literal
 * (compile.ts, jsonEqualsText). These tests hold that form to the general text reading of SPEC §2.4
 * (strings as they are, other JSON values as their JSON text, null and missing as `''`, as the
 * service's JSON_VALUE reads them) row by row, with the payload stored as JSONB (what
 * the stores write) and as JSON text (what a database filled by other tools may hold).
 */
import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FieldTable } from '../../src/server/query/fields.js';
import { compileQuery } from '../../src/server/query/index.js';

const FIELDS: FieldTable = { payload: { sql: 'doc', type: 'json' } };

/** The general text reading of a JSON value, written out: the semantics the short form must keep. */
const readAsText = (path: string): string =>
  `coalesce(CASE json_type(doc, '${path}') WHEN 'text' THEN json_extract(doc, '${path}') WHEN 'null' THEN NULL ELSE (doc -> '${path}') END, '')`;

/** Query paths and the SQLite JSON paths they read (fixed, so they can be spliced into the reference). */
const PATHS: ReadonlyArray<readonly [string, string]> = [
  ['payload.note', '$.note'],
  ['payload.list.1', '$.list[1]'],
  ['payload', '$'],
];

let db: SqliteDatabase;
beforeAll(() => {
  db = openSqlite(':memory:');
  db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, doc BLOB NOT NULL)');
});
afterAll(() => db.close());

/** One row per storage form of `doc`; answers how the compiled and the reference SQL judged each. */
function judge(doc: unknown, query: unknown, reference: string, referenceParams: unknown[]): Array<[unknown, unknown]> {
  const compiled = compileQuery({ $expr: query }, FIELDS);
  const text = JSON.stringify(doc);
  db.exec('DELETE FROM t');
  db.prepare('INSERT INTO t (doc) VALUES (?), (jsonb(?))').run(text, text);
  const rows = db
    .prepare(`SELECT (${compiled.sql}) AS compiled, (${reference}) AS reference FROM t ORDER BY id`)
    .all(...compiled.params, ...referenceParams) as Array<{ compiled: unknown; reference: unknown }>;
  return rows.map((row) => [row.compiled, row.reference]);
}

/** Literal texts that a JSON number, boolean, object or list could render as, and plain ones. */
const tricky = fc.constantFrom('42', '-1', '1.5', '1e3', '0', 'true', 'false', 'null', '{"a":1}', '[1,2]', '[]', '{}', '', ' ', '"', '\\', 'a"b', 'x\u0000y', '\u{1F600}', 'é', 'e\u0301', '.5', 'Infinity', 'NaN', '+1', '0x1F');
const anyText = fc.oneof(fc.string({ unit: 'binary' }), fc.string({ unit: 'grapheme' }), tricky);

/** A payload whose `note`, `list[1]` and whole value are random JSON (strings with escapes, numbers, nesting). */
const payloadArb = fc.oneof(
  fc.record({
    note: fc.oneof(fc.jsonValue({ maxDepth: 2 }), anyText, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean()),
    list: fc.array(fc.oneof(fc.jsonValue({ maxDepth: 1 }), anyText), { maxLength: 3 }),
  }),
  fc.jsonValue({ maxDepth: 2 }),
);

/** Literals worth comparing with `doc`: its own values (as text and as JSON text) and random ones. */
function literalsFor(doc: unknown): fc.Arbitrary<string> {
  const values: unknown[] = [doc];
  if (doc !== null && typeof doc === 'object' && !Array.isArray(doc)) {
    const record = doc as Record<string, unknown>;
    values.push(record.note);
    if (Array.isArray(record.list)) values.push(...record.list);
  }
  const own = values.flatMap((value) => (typeof value === 'string' ? [value] : value === undefined ? [] : [JSON.stringify(value)]));
  return own.length > 0 ? fc.oneof(fc.constantFrom(...own), anyText) : anyText;
}

const caseArb = payloadArb.chain((doc) =>
  fc.record({ doc: fc.constant(doc), literal: literalsFor(doc), path: fc.constantFrom(...PATHS), others: fc.array(anyText, { maxLength: 3 }) }),
);

describe('JSON path compared with a string literal', () => {
  it('$eq gives the general text reading on every row, either operand order, JSONB or text storage', () => {
    fc.assert(
      fc.property(caseArb, fc.boolean(), ({ doc, literal, path: [field, jsonPath] }, swap) => {
        const operands = [{ $getField: field }, { $literal: literal }];
        const query = { $eq: swap ? operands.reverse() : operands };
        for (const [compiled, reference] of judge(doc, query, `${readAsText(jsonPath)} = ?`, [literal])) {
          expect(compiled).toBe(reference);
        }
      }),
      { numRuns: 600 },
    );
  });

  it('$not $eq negates the general reading (missing and null are the empty text, never unknown)', () => {
    fc.assert(
      fc.property(caseArb, ({ doc, literal, path: [field, jsonPath] }) => {
        const query = { $not: [{ $eq: [{ $getField: field }, { $literal: literal }] }] };
        for (const [compiled, reference] of judge(doc, query, `(NOT (${readAsText(jsonPath)} = ?))`, [literal])) {
          expect(compiled).toBe(reference);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('$in with string literals gives the general text reading on every row', () => {
    fc.assert(
      fc.property(caseArb, ({ doc, literal, path: [field, jsonPath], others }) => {
        const texts = [literal, ...others];
        const query = { $in: [{ $getField: field }, texts.map((text) => ({ $literal: text }))] };
        const reference = `(${readAsText(jsonPath)} IN (SELECT value FROM json_each(?)))`;
        for (const [compiled, expected] of judge(doc, query, reference, [JSON.stringify(texts)])) {
          expect(compiled).toBe(expected);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('number-like texts keep matching numbers and booleans read as text', () => {
    const doc = { note: 42, list: [true, 1.5] };
    const matches = (field: string, literal: string) =>
      judge(doc, { $eq: [{ $getField: field }, { $literal: literal }] }, '1', []).map(([compiled]) => compiled);
    expect(matches('payload.note', '42')).toEqual([1, 1]);
    expect(matches('payload.list.0', 'true')).toEqual([1, 1]);
    expect(matches('payload.list.1', '1.5')).toEqual([1, 1]);
    expect(matches('payload.note', 'forty-two')).toEqual([0, 0]);
  });

  it('a plain string literal compiles to one read of the path', () => {
    const compiled = compileQuery({ $expr: { $eq: [{ $getField: 'payload.note' }, { $literal: 'note-5' }] } }, FIELDS);
    expect(compiled.sql.match(/json_/g)).toHaveLength(1);
    expect(compiled.params).toEqual(['$."note"', 'note-5']);
  });
});
