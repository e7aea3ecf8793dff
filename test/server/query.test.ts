import { openSqlite, type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { firstColumn, firstValue } from '../helpers/sqlite.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BadRequestError, ValidationError } from '../../src/server/errors.js';
import type { FieldTable } from '../../src/server/query/fields.js';
import {
  compileFieldJsonRef,
  compileQuery,
  compileSortTerms,
  MAX_QUERY_DEPTH,
  splitFieldPath,
  type JsonNullInSort,
} from '../../src/server/query/index.js';
import { parseNumericText, registerSqlFunctions } from '../../src/server/query/sql-functions.js';

/**
 * A calls-like table: text, number and JSON columns plus two derived fields that shadow part of
 * the `summary` JSON column, the way the calls store declares `summary.weave.*`.
 */
const FIELDS: FieldTable = {
  id: { sql: 'c.id', type: 'text' },
  op_name: { sql: 'c.op_name', type: 'text' },
  display_name: { sql: 'c.display_name', type: 'text' },
  wb_run_step: { sql: 'c.wb_run_step', type: 'number' },
  ended_at: { sql: 'c.ended_at', type: 'datetime' },
  inputs: { sql: 'c.inputs', type: 'json' },
  output: { sql: 'c.output', type: 'json' },
  attributes: { sql: 'c.attributes', type: 'json' },
  summary: { sql: 'c.summary', type: 'json' },
  'summary.weave.status': {
    sql: "CASE WHEN c.exception IS NOT NULL THEN 'error' WHEN c.ended_at IS NULL THEN 'running' ELSE 'success' END",
    type: 'text',
  },
  'summary.weave.latency_ms': {
    sql: 'CAST(round((julianday(c.ended_at) - julianday(c.started_at)) * 86400000) AS INTEGER)',
    type: 'number',
  },
};

const INJECTION = "'; DROP TABLE calls; --";

interface Row {
  id: string;
  op_name: string;
  display_name: string | null;
  started_at: string;
  ended_at: string | null;
  exception: string | null;
  wb_run_step: number | null;
  inputs: unknown;
  output: unknown;
  attributes: unknown;
  summary: unknown;
}

const ROWS: Row[] = [
  {
    id: 'c1',
    op_name: 'predict',
    display_name: 'LLM call',
    started_at: '2026-01-01T00:00:00.000000Z',
    ended_at: '2026-01-01T00:00:01.500000Z',
    exception: null,
    wb_run_step: 1,
    inputs: { x: 5, name: 'Alice', flag: true, tags: ['a', 'b'], nested: { 'a.b': 1, 'a\\b': 2 } },
    output: { choices: [{ text: 'hello' }], score: 0.9 },
    attributes: { env: 'prod', 'a.b': 'dot', 'weird "key"': 'q', 'with space': 1, 'gpt-4o': { x: 1 } },
    summary: { usage: { 'gpt-4o': { total_tokens: 150 } } },
  },
  {
    id: 'c2',
    op_name: 'predict',
    display_name: 'predict',
    started_at: '2026-01-01T00:00:00.000000Z',
    ended_at: '2026-01-01T00:00:00.250000Z',
    exception: 'boom',
    wb_run_step: 2,
    inputs: { x: '12', name: 'bob', flag: false },
    output: { choices: { '0': { text: 'obj-zero' } } },
    attributes: { env: 'dev' },
    summary: { usage: { 'gpt-4o': { total_tokens: 50 }, '0': 7 } },
  },
  {
    id: 'c3',
    op_name: 'train',
    display_name: null,
    started_at: '2026-01-01T00:00:00.000000Z',
    ended_at: null,
    exception: null,
    wb_run_step: null,
    inputs: { x: 'abc', name: '50% off_sale', flag: 1 },
    output: null,
    attributes: {},
    summary: {},
  },
  {
    id: 'c4',
    op_name: 'train',
    display_name: 'Train',
    started_at: '2026-01-01T00:00:00.000000Z',
    ended_at: '2026-01-01T00:00:02.000000Z',
    exception: null,
    wb_run_step: 10,
    inputs: { x: null, name: 'ALICE' },
    output: 'plain string',
    attributes: { env: 'dev' },
    summary: { usage: { 'gpt-4o': { total_tokens: '200' } } },
  },
  {
    id: 'c5',
    op_name: INJECTION,
    display_name: 'x',
    started_at: '2026-01-01T00:00:00.000000Z',
    ended_at: '2026-01-01T00:00:00.010000Z',
    exception: null,
    wb_run_step: 3,
    inputs: {},
    output: { choices: [] },
    attributes: { env: 'prod' },
    summary: { status_counts: { error: 1 } },
  },
];

let db: SqliteDatabase;

beforeAll(() => {
  db = openSqlite(':memory:');
  registerSqlFunctions(db);
  db.exec(`CREATE TABLE calls (
    id TEXT PRIMARY KEY, op_name TEXT NOT NULL, display_name TEXT, started_at TEXT NOT NULL,
    ended_at TEXT, exception TEXT, wb_run_step INTEGER,
    inputs TEXT NOT NULL, output TEXT, attributes TEXT NOT NULL, summary TEXT NOT NULL)`);
  const insert = db.prepare(`INSERT INTO calls VALUES (@id, @op_name, @display_name, @started_at,
    @ended_at, @exception, @wb_run_step, @inputs, @output, @attributes, @summary)`);
  for (const row of ROWS) {
    insert.run({
      ...row,
      inputs: JSON.stringify(row.inputs),
      output: JSON.stringify(row.output),
      attributes: JSON.stringify(row.attributes),
      summary: JSON.stringify(row.summary),
    });
  }
});

afterAll(() => {
  db.close();
});

/** Ids of the rows an `$expr` selects, in id order. */
function select(expr: unknown): string[] {
  const { sql, params } = compileQuery({ $expr: expr }, FIELDS);
  return firstColumn(db.prepare(`SELECT id FROM calls c WHERE ${sql} ORDER BY id`).all(...params)) as string[];
}

function tableIntact(): void {
  expect(firstValue(db.prepare('SELECT count(*) FROM calls').get())).toBe(ROWS.length);
}

const field = (path: string) => ({ $getField: path });
const lit = (value: unknown) => ({ $literal: value });
const eq = (a: unknown, b: unknown) => ({ $eq: [a, b] });

describe('operators', () => {
  it('$eq on text and number columns', () => {
    expect(select(eq(field('op_name'), lit('predict')))).toEqual(['c1', 'c2']);
    expect(select(eq(lit('train'), field('op_name')))).toEqual(['c3', 'c4']);
    expect(select(eq(field('wb_run_step'), lit(10)))).toEqual(['c4']);
  });

  it('$gt, $gte, $lt, $lte on a number column', () => {
    expect(select({ $gt: [field('wb_run_step'), lit(2)] })).toEqual(['c4', 'c5']);
    expect(select({ $gte: [field('wb_run_step'), lit(2)] })).toEqual(['c2', 'c4', 'c5']);
    expect(select({ $lt: [field('wb_run_step'), lit(3)] })).toEqual(['c1', 'c2']);
    expect(select({ $lte: [field('wb_run_step'), lit(3)] })).toEqual(['c1', 'c2', 'c5']);
  });

  it('$and, $or (including one item) and $not', () => {
    expect(select({ $and: [eq(field('op_name'), lit('predict')), { $gt: [field('wb_run_step'), lit(1)] }] })).toEqual(['c2']);
    expect(select({ $or: [eq(field('id'), lit('c1')), eq(field('id'), lit('c4'))] })).toEqual(['c1', 'c4']);
    expect(select({ $and: [eq(field('id'), lit('c3'))] })).toEqual(['c3']);
    expect(select({ $not: [eq(field('op_name'), lit('predict'))] })).toEqual(['c3', 'c4', 'c5']);
  });

  it('$not of a comparison on a missing value is unknown, and selects nothing (three-valued logic, as ClickHouse)', () => {
    expect(select(eq(field('inputs.x'), lit(5)))).toEqual(['c1']);
    // c3 ('abc') has no numeric reading, c4 holds null, c5 has no x: unknown either way.
    expect(select({ $not: [eq(field('inputs.x'), lit(5))] })).toEqual(['c2']);
    expect(select({ $not: [{ $gt: [field('wb_run_step'), lit(2)] }] })).toEqual(['c1', 'c2']);
    // false OR unknown is unknown: only a true branch decides an $or whose other branch is missing.
    expect(select({ $not: [{ $or: [eq(field('inputs.x'), lit(5)), eq(field('inputs.missing'), lit(1))] }] })).toEqual([]);
    expect(select({ $or: [eq(field('inputs.x'), lit(5)), eq(field('inputs.missing'), lit(1))] })).toEqual(['c1']);
  });

  it('reads a missing or null JSON path as the empty text, so $not of a text comparison selects it', () => {
    expect(select(eq(field('inputs.x'), lit('')))).toEqual(['c4', 'c5']);
    expect(select({ $not: [eq(field('inputs.x'), lit(''))] })).toEqual(['c1', 'c2', 'c3']);
    expect(select({ $not: [eq(field('inputs.name'), lit('bob'))] })).toEqual(['c1', 'c3', 'c4', 'c5']);
    expect(select({ $not: [{ $contains: { input: field('inputs.name'), substr: lit('li') } }] })).toEqual(['c2', 'c3', 'c4', 'c5']);
    expect(select({ $not: [{ $in: [field('inputs.name'), [lit('bob'), lit('x')]] }] })).toEqual(['c1', 'c3', 'c4', 'c5']);
    // null still means null: JSON null and missing, not the empty text.
    expect(select(eq(field('inputs.x'), lit(null)))).toEqual(['c4', 'c5']);
  });

  it('an operation used as a value compares as a boolean', () => {
    const isPredict = eq(field('op_name'), lit('predict'));
    expect(select(eq(isPredict, lit(false)))).toEqual(['c3', 'c4', 'c5']);
    expect(select(eq(isPredict, lit(true)))).toEqual(['c1', 'c2']);
    // A comparison that is NULL (missing value) is false, so it equals false.
    expect(select(eq(eq(field('inputs.x'), lit(5)), lit(false)))).toEqual(['c2', 'c3', 'c4', 'c5']);
  });

  it('$in with a list of literal operands, a list literal, and mixed types', () => {
    expect(select({ $in: [field('op_name'), [lit('train'), lit('nope')]] })).toEqual(['c3', 'c4']);
    expect(select({ $in: [field('id'), lit(['c2', 'c5'])] })).toEqual(['c2', 'c5']);
    expect(select({ $in: [field('inputs.x'), [lit(5), lit('abc')]] })).toEqual(['c1', 'c3']);
    expect(select({ $in: [field('inputs.x'), [lit(null)]] })).toEqual(['c4', 'c5']);
    expect(select({ $in: [field('inputs.flag'), [lit(false)]] })).toEqual(['c2']);
    expect(select({ $in: [field('inputs.tags'), [lit(['a', 'b'])]] })).toEqual(['c1']);
    expect(select({ $in: [field('op_name'), []] })).toEqual([]);
  });

  it('$in with field operands in the list', () => {
    expect(select({ $in: [field('display_name'), [field('op_name'), lit('x')]] })).toEqual(['c2', 'c5']);
  });

  it('$in with a list literal in the hosted SDK form ({"$literal": [{"$literal": v}]})', () => {
    expect(select({ $in: [field('id'), lit([lit('c1'), lit('c3')])] })).toEqual(['c1', 'c3']);
  });

  it('$contains: substring, case-sensitive by default', () => {
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('Alice') } })).toEqual(['c1']);
    expect(select({ $contains: { input: field('display_name'), substr: lit('ra') } })).toEqual(['c4']);
  });

  it('$contains case_insensitive', () => {
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('alice'), case_insensitive: true } })).toEqual([
      'c1',
      'c4',
    ]);
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('alice'), case_insensitive: false } })).toEqual([]);
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('ALICE'), case_insensitive: null } })).toEqual(['c4']);
  });

  it('$contains treats % and _ as plain characters', () => {
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('%'), case_insensitive: true } })).toEqual(['c3']);
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('_') } })).toEqual(['c3']);
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('50% OFF_', ), case_insensitive: true } })).toEqual(['c3']);
    expect(select({ $contains: { input: field('inputs.name'), substr: lit('a_i') } })).toEqual([]);
  });

  it('$contains on a JSON number reads its text', () => {
    expect(select({ $contains: { input: field('inputs.x'), substr: lit('2') } })).toEqual(['c2']);
  });
});

describe('types of JSON values', () => {
  it('reads a long run of digits that is no number in linear time (it runs on stored text)', () => {
    // The ambiguous form of the pattern took ~20 s for this (quadratic backtracking).
    expect(parseNumericText(`${'1'.repeat(200_000)}x`)).toBeNull();
    expect(parseNumericText(`${'1'.repeat(200_000)}.5`)).toBeGreaterThan(1e300);
  });

  it('a number literal compares numerically, numeric text included, other text never', () => {
    expect(select({ $gt: [field('inputs.x'), lit(4)] })).toEqual(['c1', 'c2']);
    expect(select({ $gt: [field('inputs.x'), lit(6)] })).toEqual(['c2']);
    expect(select(eq(field('inputs.x'), lit(12)))).toEqual(['c2']);
    // 'abc' is not 0 (SQLite's CAST would say it is).
    expect(select(eq(field('inputs.x'), lit(0)))).toEqual([]);
    expect(select({ $lt: [field('output.score'), lit(1)] })).toEqual(['c1']);
  });

  it('a text reads as a number only when the whole text is one (toFloat64OrNull), stored or literal', () => {
    const docField: FieldTable = { doc: { sql: 'x.doc', type: 'json' }, text: { sql: 'x.text', type: 'text' } };
    /** Whether `$expr` holds for one row whose `doc.v` and `text` hold `text`. */
    const holds = (text: string, expr: unknown): boolean => {
      const { sql, params } = compileQuery({ $expr: expr }, docField);
      const row = `WITH x(doc, text) AS (SELECT json_object('v', ?), ?) SELECT (${sql}) IS TRUE FROM x`;
      return firstValue(db.prepare(row).get(text, text, ...params)) === 1;
    };
    const numbers: Array<[string, number]> = [['12', 12], ['.5', 0.5], ['5.', 5], ['+7', 7], ['-1.5e-3', -0.0015], ['1E5', 100000]];
    const notNumbers = ['2024-01-05', '1.2.3', '555-1234', '+-7', '1e', '5-', ' 5', '0x10', '', 'abc', '1e+'];
    for (const input of ['doc.v', 'text']) {
      const double = { $convert: { input: field(input), to: 'double' } };
      for (const [text, value] of numbers) {
        expect(holds(text, eq(double, lit(value))), `${input} ${text}`).toBe(true);
        expect(holds(text, eq(field(input), lit(value))), `${input} ${text} = ${value}`).toBe(true);
      }
      for (const text of notNumbers) {
        expect(holds(text, eq(double, lit(null))), `${input} ${JSON.stringify(text)}`).toBe(true);
        expect(holds(text, { $and: [{ $convert: { input: field(input), to: 'bool' } }] }), `${input} ${JSON.stringify(text)} as bool`).toBe(false);
      }
    }
  });

  it('a string literal compares as text', () => {
    expect(select(eq(field('inputs.x'), lit('12')))).toEqual(['c2']);
    expect(select(eq(field('inputs.x'), lit('5')))).toEqual(['c1']);
    expect(select(eq(field('attributes.env'), lit('prod')))).toEqual(['c1', 'c5']);
    expect(select(eq(field('output'), lit('plain string')))).toEqual(['c4']);
  });

  it('booleans: true/false are not confused with text, and 1 reads as true', () => {
    expect(select(eq(field('inputs.flag'), lit(true)))).toEqual(['c1', 'c3']);
    expect(select(eq(field('inputs.flag'), lit(false)))).toEqual(['c2']);
    expect(select(eq(field('inputs.flag'), lit('true')))).toEqual(['c1']);
  });

  it('$eq null matches JSON null and missing paths; $eq with a non-null literal never matches null', () => {
    expect(select(eq(field('inputs.x'), lit(null)))).toEqual(['c4', 'c5']);
    expect(select(eq(lit(null), field('display_name')))).toEqual(['c3']);
    expect(select(eq(field('output'), lit(null)))).toEqual(['c3']);
    expect(select({ $gt: [field('inputs.x'), lit(null)] })).toEqual([]);
  });

  it('object and list literals compare as JSON', () => {
    expect(select(eq(field('inputs.tags'), lit(['a', 'b'])))).toEqual(['c1']);
    expect(select(eq(field('output.choices.0'), lit({ text: 'hello' })))).toEqual(['c1']);
    expect(select(eq(field('inputs.tags'), lit(['b', 'a'])))).toEqual([]);
  });

  it('two JSON fields compare by value', () => {
    expect(select(eq(field('inputs.name'), field('inputs.name')))).toEqual(['c1', 'c2', 'c3', 'c4']);
    expect(select(eq(field('display_name'), field('op_name')))).toEqual(['c2']);
  });
});

describe('timestamp fields', () => {
  const endedAt = field('ended_at');

  it('compare with a number literal as Unix seconds', () => {
    expect(select({ $gt: [endedAt, lit(1767225601)] })).toEqual(['c1', 'c4']);
    expect(select({ $lt: [lit(1767225600.1), endedAt] })).toEqual(['c1', 'c2', 'c4']);
  });

  it('compare with timestamp strings as instants, whatever their form', () => {
    expect(select({ $gte: [endedAt, lit('2026-01-01T00:00:01.5Z')] })).toEqual(['c1', 'c4']);
    expect(select({ $gte: [endedAt, lit('2026-01-01T00:00:01.500000Z')] })).toEqual(['c1', 'c4']);
    expect(select({ $gt: [endedAt, lit('2026-01-01T01:00:01+01:00')] })).toEqual(['c1', 'c4']);
    expect(select({ $gt: [endedAt, lit('2026-01-01 00:00:01')] })).toEqual(['c1', 'c4']);
    expect(select({ $gte: [endedAt, lit('2026-01-01')] })).toEqual(['c1', 'c2', 'c4', 'c5']);
    expect(select({ $lt: [endedAt, lit('2026-01-01')] })).toEqual([]);
    expect(select(eq(endedAt, lit('2026-01-01T00:00:02Z')))).toEqual(['c4']);
  });

  it('other strings compare as text; null and $convert work as for any field', () => {
    expect(select(eq(endedAt, lit('2026-01-01T00:00:02.000Z')))).toEqual(['c4']);
    expect(select(eq(endedAt, lit('yesterday')))).toEqual([]);
    expect(select(eq(endedAt, lit(null)))).toEqual(['c3']);
    expect(select({ $gt: [{ $convert: { input: endedAt, to: 'double' } }, lit(1767225601.9)] })).toEqual(['c4']);
    expect(select({ $contains: { input: endedAt, substr: lit('00:00:02') } })).toEqual(['c4']);
  });
});

describe('$convert', () => {
  const convert = (input: unknown, to: string) => ({ $convert: { input, to } });

  it('double', () => {
    expect(select({ $gte: [convert(field('inputs.x'), 'double'), lit(5)] })).toEqual(['c1', 'c2']);
    expect(select(eq(convert(field('display_name'), 'double'), lit(0)))).toEqual([]);
  });

  it('int: a whole number, else NULL (the service\'s toInt64OrNull; 0.9 is not 0)', () => {
    expect(select(eq(convert(field('output.score'), 'int'), lit(0)))).toEqual([]);
    expect(select(eq(convert(field('output.score'), 'int'), lit(null)))).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
    expect(select(eq(convert(field('inputs.x'), 'int'), lit(12)))).toEqual(['c2']);
    expect(select(eq(convert(field('inputs.x'), 'int'), lit(5)))).toEqual(['c1']);
    expect(select({ $gt: [convert(field('wb_run_step'), 'int'), lit(2)] })).toEqual(['c4', 'c5']);
    // An integer, as the service's toString(toInt64OrNull(...)) writes it: '5', not '5.0'.
    expect(select(eq(convert(convert(field('inputs.x'), 'int'), 'string'), lit('5')))).toEqual(['c1']);
  });

  it('string', () => {
    expect(select(eq(convert(field('wb_run_step'), 'string'), lit('10')))).toEqual(['c4']);
    expect(select(eq(convert(field('inputs.x'), 'string'), lit('5')))).toEqual(['c1']);
  });

  it('bool, also as a bare condition', () => {
    expect(select(eq(convert(field('inputs.flag'), 'bool'), lit(true)))).toEqual(['c1', 'c3']);
    expect(select({ $and: [convert(field('inputs.flag'), 'bool')] })).toEqual(['c1', 'c3']);
    // c4 and c5 have no flag: unknown, under $not too.
    expect(select({ $not: [convert(field('inputs.flag'), 'bool')] })).toEqual(['c2']);
  });

  it('exists: the path is present (even holding null)', () => {
    expect(() => select(convert(field('output.choices'), 'exists'))).toThrow(ValidationError);
    expect(select({ $and: [convert(field('output.choices'), 'exists')] })).toEqual(['c1', 'c2', 'c5']);
    expect(select(eq(convert(field('inputs.x'), 'exists'), lit(true)))).toEqual(['c1', 'c2', 'c3', 'c4']);
    expect(select(eq(convert(field('display_name'), 'exists'), lit(false)))).toEqual(['c3']);
  });
});

describe('dotted paths', () => {
  it('reach into JSON with keys containing dashes', () => {
    expect(select({ $gt: [field('summary.usage.gpt-4o.total_tokens'), lit(100)] })).toEqual(['c1', 'c4']);
    expect(select(eq(field('attributes.gpt-4o.x'), lit(1)))).toEqual(['c1']);
  });

  it('numeric parts index lists, or name object keys when the value is an object', () => {
    expect(select(eq(field('output.choices.0.text'), lit('hello')))).toEqual(['c1']);
    expect(select(eq(field('output.choices.0.text'), lit('obj-zero')))).toEqual(['c2']);
    expect(select(eq(field('summary.usage.0'), lit(7)))).toEqual(['c2']);
    expect(select(eq(field('inputs.tags.1'), lit('b')))).toEqual(['c1']);
    expect(select(eq(field('inputs.tags.2'), lit(null)))).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
  });

  it('\\. is a literal dot inside a key', () => {
    expect(select(eq(field('attributes.a\\.b'), lit('dot')))).toEqual(['c1']);
    expect(select(eq(field('inputs.nested.a\\.b'), lit(1)))).toEqual(['c1']);
    // Other backslashes are kept as they are.
    expect(select(eq(field('inputs.nested.a\\b'), lit(2)))).toEqual(['c1']);
    // Without the escape the dot splits: attributes.a.b does not exist.
    expect(select(eq(field('attributes.a.b'), lit('dot')))).toEqual([]);
  });

  it('keys with quotes and spaces', () => {
    expect(select(eq(field('attributes.weird "key"'), lit('q')))).toEqual(['c1']);
    expect(select(eq(field('attributes.with space'), lit(1)))).toEqual(['c1']);
  });

  it('derived fields shadow their JSON column; other summary paths still read the JSON', () => {
    expect(select(eq(field('summary.weave.status'), lit('error')))).toEqual(['c2']);
    expect(select(eq(field('summary.weave.status'), lit('running')))).toEqual(['c3']);
    expect(select(eq(field('summary.weave.status'), lit('success')))).toEqual(['c1', 'c4', 'c5']);
    expect(select({ $gte: [field('summary.weave.latency_ms'), lit(1500)] })).toEqual(['c1', 'c4']);
    expect(select(eq(field('summary.status_counts.error'), lit(1)))).toEqual(['c5']);
    // An escaped dot is not the derived field's name.
    expect(() => select(eq(field('summary\\.weave.status'), lit('x')))).toThrow(BadRequestError);
  });

  it('splitFieldPath keeps raw prefixes for field matching', () => {
    expect(splitFieldPath('a\\.b.c')).toEqual({ parts: ['a.b', 'c'], rawPrefixes: ['a\\.b', 'a\\.b.c'] });
    expect(splitFieldPath('x..y').parts).toEqual(['x', '', 'y']);
  });
});

describe('compileSortTerms and compileFieldJsonRef', () => {
  function orderBy(path: string, direction: 'asc' | 'desc', jsonNull: JsonNullInSort = 'absent'): string[] {
    const terms = compileSortTerms(path, direction, FIELDS, jsonNull);
    const sql = `SELECT id FROM calls c ORDER BY ${terms.map((term) => term.sql).join(', ')}, id`;
    return firstColumn(db.prepare(sql).all(...terms.flatMap((term) => term.params))) as string[];
  }

  it('sorts columns and derived fields with NULLs last in either direction', () => {
    expect(orderBy('wb_run_step', 'desc')).toEqual(['c4', 'c5', 'c2', 'c1', 'c3']);
    expect(orderBy('wb_run_step', 'asc')).toEqual(['c1', 'c2', 'c5', 'c4', 'c3']);
    expect(orderBy('summary.weave.latency_ms', 'asc')).toEqual(['c5', 'c2', 'c1', 'c4', 'c3']);
    expect(orderBy('display_name', 'asc')).toEqual(['c1', 'c4', 'c2', 'c5', 'c3']);
  });

  it('sorts JSON paths by presence, then numbers (numeric text too), then text', () => {
    // 50 and 150 are numbers, '200' is numeric text; c3 and c5 have no such path.
    expect(orderBy('summary.usage.gpt-4o.total_tokens', 'asc')).toEqual(['c2', 'c1', 'c4', 'c3', 'c5']);
    expect(orderBy('summary.usage.gpt-4o.total_tokens', 'desc')).toEqual(['c4', 'c1', 'c2', 'c3', 'c5']);
    // inputs.x: 5, '12', 'abc', null, missing. A JSON null is absent, or present as the text `null`.
    expect(orderBy('inputs.x', 'asc')).toEqual(['c1', 'c2', 'c3', 'c5', 'c4']);
    expect(orderBy('inputs.x', 'asc', 'present')).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
    expect(orderBy('inputs.x', 'desc', 'present')).toEqual(['c2', 'c1', 'c4', 'c3', 'c5']);
    // Booleans have no numeric reading: they sort as the texts `false`/`true` after the numbers.
    expect(orderBy('inputs.flag', 'asc')).toEqual(['c3', 'c2', 'c1', 'c4', 'c5']);
  });

  it('reads JSON values with their JSON type', () => {
    const ref = compileFieldJsonRef('inputs.x', FIELDS);
    const rows = db.prepare(`SELECT id, ${ref.sql} AS v FROM calls c ORDER BY id`).all(...ref.params) as Array<{ id: string; v: string | null }>;
    expect(rows.map((r) => (r.v === null ? undefined : JSON.parse(r.v)))).toEqual([5, '12', 'abc', null, undefined]);
    const whole = compileFieldJsonRef('output.choices', FIELDS);
    const first = firstValue(db.prepare(`SELECT ${whole.sql} FROM calls c WHERE id = 'c1'`).get(...whole.params)) as string;
    expect(JSON.parse(first)).toEqual([{ text: 'hello' }]);
    const text = compileFieldJsonRef('op_name', FIELDS);
    expect(JSON.parse(firstValue(db.prepare(`SELECT ${text.sql} FROM calls c WHERE id = 'c5'`).get(...text.params)) as string)).toBe(INJECTION);
  });

  it('unknown fields are a 400 naming the field', () => {
    expect(() => compileSortTerms('nope', 'asc', FIELDS, 'absent')).toThrow(new BadRequestError('Unknown field: nope'));
    expect(() => compileSortTerms('op_name.sub', 'asc', FIELDS, 'absent')).toThrow(BadRequestError);
    expect(() => compileFieldJsonRef('c.id; DROP TABLE calls', FIELDS)).toThrow(BadRequestError);
  });
});

describe('null query', () => {
  it('compiles to a condition that keeps every row', () => {
    for (const query of [null, undefined]) {
      const { sql, params } = compileQuery(query, FIELDS);
      expect(firstValue(db.prepare(`SELECT count(*) FROM calls c WHERE ${sql}`).get(...params))).toBe(ROWS.length);
    }
  });
});

/** The one detail entry of the ValidationError `fn` throws. */
function validationIssue(fn: () => unknown): { type: string; loc: Array<string | number>; msg: string; input: unknown } {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    const detail = (error as ValidationError).detail;
    expect(detail).toHaveLength(1);
    return detail[0] as never;
  }
  throw new Error('expected a ValidationError');
}

describe('grammar errors are 422 with the loc of the offending node', () => {
  const base = ['body', 'query'];
  const ok = eq(field('op_name'), lit('x'));
  const cases: Array<[string, unknown, Array<string | number>, string]> = [
    ['query not an object', 'op_name = 1', base, 'model_type'],
    ['query a list', [ok], base, 'model_type'],
    ['$expr missing', {}, [...base, '$expr'], 'missing'],
    ['extra key beside $expr', { $expr: ok, limit: 1 }, [...base, 'limit'], 'extra_forbidden'],
    ['$expr not an object', { $expr: 'x' }, [...base, '$expr'], 'model_type'],
    ['$expr a bare operand', { $expr: lit(true) }, [...base, '$expr', '$literal'], 'value_error'],
    ['unknown operator', { $expr: { $regex: [] } }, [...base, '$expr'], 'value_error'],
    ['operation with no key', { $expr: {} }, [...base, '$expr'], 'value_error'],
    ['operation with two keys', { $expr: { ...ok, $gt: [lit(1), lit(2)] } }, [...base, '$expr'], 'value_error'],
    ['$and empty', { $expr: { $and: [] } }, [...base, '$expr', '$and'], 'too_short'],
    ['$or empty', { $expr: { $or: [] } }, [...base, '$expr', '$or'], 'too_short'],
    ['$and not a list', { $expr: { $and: ok } }, [...base, '$expr', '$and'], 'list_type'],
    ['unknown operator inside $or', { $expr: { $or: [ok, { $where: 'x' }] } }, [...base, '$expr', '$or', 1], 'value_error'],
    ['$not with two operands', { $expr: { $not: [ok, ok] } }, [...base, '$expr', '$not'], 'too_long'],
    ['$not with none', { $expr: { $not: [] } }, [...base, '$expr', '$not', 0], 'missing'],
    ['$not not a list', { $expr: { $not: ok } }, [...base, '$expr', '$not'], 'tuple_type'],
    ['$eq with one operand', { $expr: { $eq: [field('id')] } }, [...base, '$expr', '$eq', 1], 'missing'],
    ['$gt with three operands', { $expr: { $gt: [lit(1), lit(2), lit(3)] } }, [...base, '$expr', '$gt'], 'too_long'],
    ['$lte operand not an object', { $expr: { $lte: [field('id'), 3] } }, [...base, '$expr', '$lte', 1], 'model_type'],
    ['$getField not a string', { $expr: { $and: [{ $eq: [{ $getField: 5 }, lit(1)] }] } }, [...base, '$expr', '$and', 0, '$eq', 0, '$getField'], 'string_type'],
    ['$in list not a list', { $expr: { $in: [field('id'), lit('c1')] } }, [...base, '$expr', '$in', 1, '$literal'], 'list_type'],
    ['$in list an operation', { $expr: { $in: [field('id'), ok] } }, [...base, '$expr', '$in', 1], 'list_type'],
    ['$in with one element', { $expr: { $in: [field('id')] } }, [...base, '$expr', '$in', 1], 'missing'],
    ['$in bad list item', { $expr: { $in: [field('id'), [lit('a'), 'b']] } }, [...base, '$expr', '$in', 1, 1], 'model_type'],
    ['$contains missing substr', { $expr: { $contains: { input: field('id') } } }, [...base, '$expr', '$contains', 'substr'], 'missing'],
    ['$contains missing input', { $expr: { $contains: { substr: lit('a') } } }, [...base, '$expr', '$contains', 'input'], 'missing'],
    ['$contains extra key', { $expr: { $contains: { input: field('id'), substr: lit('a'), regex: true } } }, [...base, '$expr', '$contains', 'regex'], 'extra_forbidden'],
    ['$contains bad flag', { $expr: { $contains: { input: field('id'), substr: lit('a'), case_insensitive: 'yes' } } }, [...base, '$expr', '$contains', 'case_insensitive'], 'bool_type'],
    ['$contains not an object', { $expr: { $contains: [field('id'), lit('a')] } }, [...base, '$expr', '$contains'], 'model_type'],
    ['$convert bad target', { $expr: { $eq: [{ $convert: { input: field('id'), to: 'float' } }, lit(1)] } }, [...base, '$expr', '$eq', 0, '$convert', 'to'], 'literal_error'],
    ['$convert missing input', { $expr: { $eq: [{ $convert: { to: 'int' } }, lit(1)] } }, [...base, '$expr', '$eq', 0, '$convert', 'input'], 'missing'],
    ['$literal of a non-JSON number', { $expr: { $eq: [field('id'), { $literal: Number.NaN }] } }, [...base, '$expr', '$eq', 1, '$literal'], 'finite_number'],
  ];

  for (const [name, query, loc, type] of cases) {
    it(name, () => {
      const issue = validationIssue(() => compileQuery(query, FIELDS));
      expect(issue.loc).toEqual(loc);
      expect(issue.type).toBe(type);
      expect(typeof issue.msg).toBe('string');
      expect(issue.msg.length).toBeGreaterThan(0);
    });
  }

  it('$convert bad target message lists the targets', () => {
    const issue = validationIssue(() => compileQuery({ $expr: { $eq: [{ $convert: { input: field('id'), to: 'float' } }, lit(1)] } }, FIELDS));
    expect(issue.msg).toBe("Input should be 'double', 'string', 'int', 'bool' or 'exists'");
    expect(issue.input).toBe('float');
  });

  it('uses the caller-given loc prefix', () => {
    const issue = validationIssue(() => compileQuery({ $expr: { $and: [] } }, FIELDS, ['body', 'filter', 'query']));
    expect(issue.loc).toEqual(['body', 'filter', 'query', '$expr', '$and']);
  });

  it('grammar errors win over unknown fields (validation happens first)', () => {
    const issue = validationIssue(() => compileQuery({ $expr: { $and: [eq(field('nope'), lit(1)), { $bad: 1 }] } }, FIELDS));
    expect(issue.loc).toEqual(['body', 'query', '$expr', '$and', 1]);
  });
});

describe('unknown fields are a 400 naming the field', () => {
  it('names the field', () => {
    expect(() => select(eq(field('nope.x'), lit(1)))).toThrow(new BadRequestError('Unknown field: nope.x'));
    expect(() => select(eq(field('op_name.x'), lit(1)))).toThrow(BadRequestError);
    expect(() => select(eq(field(''), lit(1)))).toThrow(BadRequestError);
    expect(() => select({ $in: [field('id'), [field('constructor')]] })).toThrow(BadRequestError);
    expect(() => select({ $contains: { input: field('__proto__'), substr: lit('x') } })).toThrow(BadRequestError);
  });
});

describe('hostile input', () => {
  it('SQL in field names never reaches SQL', () => {
    for (const name of ['id; DROP TABLE calls', 'id) OR (1=1', "op_name' OR '1'='1", 'c.id', '1', '*']) {
      expect(() => select(eq(field(name), lit(1)))).toThrow(BadRequestError);
    }
    tableIntact();
  });

  it('SQL in literals is a value: matches only the row holding that text', () => {
    expect(select(eq(field('op_name'), lit(INJECTION)))).toEqual(['c5']);
    expect(select(eq(field('op_name'), lit("predict' OR '1'='1")))).toEqual([]);
    expect(select({ $contains: { input: field('op_name'), substr: lit("' OR 1=1 --") } })).toEqual([]);
    expect(select({ $in: [field('id'), lit(["c1') OR 1=1 --", 'c2'])] })).toEqual(['c2']);
    expect(select(eq(field('inputs.x'), lit({ "'); DROP TABLE calls; --": 1 })))).toEqual([]);
    tableIntact();
  });

  it('SQL and JSON-path syntax in JSON path keys stay inside the key', () => {
    for (const key of [`x') OR 1=1 --`, 'x"] OR 1=1', '$', '[0]', 'a"."b', 'a\\', '\\"', '*', '#-1', 'x.', '']) {
      expect(select(eq(field(`inputs.${key}`), lit(1)))).toEqual([]);
      expect(select(eq(field(`inputs.${key}`), lit(null)))).toEqual(['c1', 'c2', 'c3', 'c4', 'c5']);
    }
    // SQLite would end the key at an escaped NUL and read `inputs.x`: refused instead.
    expect(() => select(eq(field('inputs.x\u0000y'), lit(5)))).toThrow(BadRequestError);
    tableIntact();
  });

  it(`nesting up to ${MAX_QUERY_DEPTH} levels compiles and runs; deeper is a 422`, () => {
    const nest = (levels: number): unknown => {
      let expr: unknown = eq(field('id'), lit('c1'));
      for (let i = 1; i < levels; i += 1) expr = { $not: [{ $not: [expr] }] };
      return expr;
    };
    // Each wrapping adds two levels: 31 wrappings + the $eq + its operand = 64.
    expect(select(nest(32))).toEqual(['c1']);
    const issue = validationIssue(() => compileQuery({ $expr: nest(33) }, FIELDS));
    expect(issue.type).toBe('too_deep');
  });

  it('a 100 000-level body is a 422, not a stack overflow', () => {
    let expr: unknown = lit(1);
    for (let i = 0; i < 100_000; i += 1) expr = { $and: [expr] };
    expect(validationIssue(() => compileQuery({ $expr: expr }, FIELDS)).type).toBe('too_deep');
    let literal: unknown = 1;
    for (let i = 0; i < 100_000; i += 1) literal = [literal];
    expect(validationIssue(() => compileQuery({ $expr: eq(field('inputs'), lit(literal)) }, FIELDS)).type).toBe('too_deep');
  });

  it('deep nesting of every operand kind prepares in SQLite (expression depth stays in bounds)', () => {
    // The deepest shape per level: an operation used as a value inside a comparison, on a JSON path.
    let expr: unknown = eq(field('output.choices.0.text'), lit('hello'));
    for (let depth = 2; depth < MAX_QUERY_DEPTH - 2; depth += 2) {
      expr = eq({ $convert: { input: expr, to: 'bool' } }, lit(true));
    }
    expect(select(expr)).toEqual(['c1']);
  });

  it('a $in list of 50 000 literals is one bound parameter', () => {
    const ids = Array.from({ length: 50_000 }, (_, i) => `id-${i}`).concat(['c3']);
    const { params } = compileQuery({ $expr: { $in: [field('id'), lit(ids)] } }, FIELDS);
    expect(params).toHaveLength(1);
    expect(select({ $in: [field('id'), lit(ids)] })).toEqual(['c3']);
    expect(select({ $in: [field('id'), ids.map(lit)] })).toEqual(['c3']);
  });

  it('a wide $or stays under SQLite limits (balanced, not left-deep)', () => {
    const items = Array.from({ length: 5000 }, (_, i) => eq(field('id'), lit(`k${i}`)));
    items.push(eq(field('id'), lit('c2')), eq(field('inputs.name'), lit('bob')), eq(field('id'), lit('c4')));
    expect(select({ $or: items })).toEqual(['c2', 'c4']);
    expect(select({ $and: [...items.map((item) => ({ $not: [item] })), eq(field('op_name'), lit('train'))] })).toEqual(['c3']);
  });

  it('more bound values than SQLite allows is a 422', () => {
    // A text comparison on a JSON path whose literal could be a number's text (`12n` starts with a
    // digit) binds its path three times and the literal once.
    const items = Array.from({ length: 10_000 }, (_, i) => eq(field('inputs.name'), lit(`${i}n`)));
    const issue = validationIssue(() => compileQuery({ $expr: { $or: items } }, FIELDS));
    expect(issue.type).toBe('too_large');
    expect(issue.loc).toEqual(['body', 'query', '$expr']);
  });

  it('a $convert chain that would grow the SQL geometrically is a 422', () => {
    let value: unknown = field('display_name');
    // Text read as a boolean is read twice (`true`/`false`, else as a number): 2^30 copies.
    for (let i = 0; i < 30; i += 1) value = { $convert: { input: { $convert: { input: value, to: 'string' } }, to: 'bool' } };
    expect(validationIssue(() => compileQuery({ $expr: eq(value, lit(1)) }, FIELDS)).type).toBe('too_large');
  });

  it('too many operands is a 422', () => {
    const items = Array.from({ length: 100_001 }, () => lit(true));
    expect(validationIssue(() => compileQuery({ $expr: { $and: items } }, FIELDS)).type).toBe('too_large');
  });

  it('bound values are all SQLite-bindable (no booleans, objects or undefined)', () => {
    const { params } = compileQuery(
      {
        $expr: {
          $and: [
            eq(field('inputs.flag'), lit(true)),
            eq(field('inputs.tags'), lit(['a', { b: false }])),
            { $in: [field('inputs.x'), [lit(true), lit(null), lit({ a: 1 }), lit(2)]] },
            { $contains: { input: field('inputs'), substr: lit(false), case_insensitive: true } },
          ],
        },
      },
      FIELDS,
    );
    for (const value of params) expect(value === null || ['string', 'number'].includes(typeof value)).toBe(true);
  });
});

describe('property: any JSON body', () => {
  const fieldNames = fc.constantFrom(
    'id', 'op_name', 'wb_run_step', 'inputs', 'inputs.x', 'inputs.flag', 'output.choices.0.text', 'output',
    'summary.weave.status', 'summary.weave.latency_ms', 'summary.usage.gpt-4o.total_tokens', 'attributes.a\\.b',
    'inputs.1.2.3', 'ended_at', 'nope', 'op_name.x', "x'; --",
  );
  const scalar = fc.oneof(fc.string(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.integer(), fc.boolean(), fc.constant(null));
  // Mostly well-formed trees (so SQL gets built and run), with malformed nodes mixed in at every level.
  const { operand, operation } = fc.letrec<{ operand: unknown; operation: unknown; malformed: unknown }>((tie) => ({
    operand: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      { arbitrary: fc.record({ $literal: fc.oneof(scalar, fc.array(scalar, { maxLength: 3 }), fc.jsonValue({ maxDepth: 2 })) }), weight: 4 },
      { arbitrary: fc.record({ $getField: fc.oneof({ arbitrary: fieldNames, weight: 5 }, { arbitrary: fc.string(), weight: 1 }) }), weight: 4 },
      {
        arbitrary: fc.record({ $convert: fc.record({ input: tie('operand'), to: fc.constantFrom('double', 'int', 'string', 'bool', 'exists') }) }),
        weight: 2,
      },
      { arbitrary: tie('operation'), weight: 6 },
      { arbitrary: tie('malformed'), weight: 1 },
    ),
    operation: fc.oneof(
      fc.record({ $and: fc.array(tie('operand'), { minLength: 1, maxLength: 3 }) }),
      fc.record({ $or: fc.array(tie('operand'), { minLength: 1, maxLength: 3 }) }),
      fc.record({ $not: fc.tuple(tie('operand')) }),
      fc.record({ $eq: fc.tuple(tie('operand'), tie('operand')) }),
      fc.record({ $gt: fc.tuple(tie('operand'), tie('operand')) }),
      fc.record({ $gte: fc.tuple(tie('operand'), tie('operand')) }),
      fc.record({ $lt: fc.tuple(tie('operand'), tie('operand')) }),
      fc.record({ $lte: fc.tuple(tie('operand'), tie('operand')) }),
      fc.record({ $in: fc.tuple(tie('operand'), fc.array(tie('operand'), { maxLength: 4 })) }),
      fc.record({ $in: fc.tuple(tie('operand'), fc.record({ $literal: fc.array(scalar, { maxLength: 4 }) })) }),
      fc.record({
        $contains: fc.record(
          { input: tie('operand'), substr: tie('operand'), case_insensitive: fc.oneof(fc.boolean(), fc.constant(null)) },
          { requiredKeys: ['input', 'substr'] },
        ),
      }),
    ),
    malformed: fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.record({ $and: fc.constant([]) }),
      fc.record({ $lte: fc.array(tie('operand'), { maxLength: 3 }) }),
      fc.record({ $convert: fc.record({ input: tie('operand'), to: fc.string() }) }),
      fc.record({ $contains: fc.dictionary(fc.constantFrom('input', 'substr', 'case_insensitive', 'x'), tie('operand')) }),
      fc.dictionary(fc.constantFrom('$eq', '$and', '$literal', '$getField', '$nope'), tie('operand'), { minKeys: 2 }),
    ),
  }));

  it('runs $convert to int of an integer past 2^53 through our SQL functions (node:sqlite threw a RangeError)', () => {
    // The property below found it: whole_number(whole_number(2^53)) hands node:sqlite an integer
    // argument no number holds exactly.
    const big = { $convert: { input: { $convert: { input: { $literal: 9007199254740992 }, to: 'int' } }, to: 'int' } };
    for (const expr of [{ $contains: { input: { $literal: false }, substr: big } }, { $eq: [big, { $literal: 9007199254740992 }] }]) {
      const compiled = compileQuery({ $expr: expr }, FIELDS);
      expect(() => db.prepare(`SELECT id FROM calls c WHERE ${compiled.sql}`).all(...compiled.params)).not.toThrow();
    }
  });

  it('only ValidationError or BadRequestError is thrown, and compiled SQL always prepares and runs', () => {
    const outcomes = { compiled: 0, invalid: 0, unknownField: 0 };
    fc.assert(
      fc.property(
        fc.oneof(
          { arbitrary: operation.map((expr) => ({ $expr: expr })), weight: 8 },
          { arbitrary: operand.map((expr) => ({ $expr: expr })), weight: 1 },
          { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 1 },
        ),
        (query) => {
        let compiled;
        try {
          compiled = compileQuery(query, FIELDS);
        } catch (error) {
          if (error instanceof ValidationError) outcomes.invalid += 1;
          else if (error instanceof BadRequestError) outcomes.unknownField += 1;
          else throw error;
          return;
        }
        db.prepare(`SELECT id FROM calls c WHERE ${compiled.sql}`).all(...compiled.params);
        outcomes.compiled += 1;
        },
      ),
      { numRuns: 1500 },
    );
    tableIntact();
    // The generator must exercise all three outcomes, not just bounce off validation.
    expect(outcomes.compiled).toBeGreaterThan(100);
    expect(outcomes.invalid).toBeGreaterThan(100);
    expect(outcomes.unknownField).toBeGreaterThan(10);
  });
});
