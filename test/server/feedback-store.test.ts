import { type SqliteDatabase } from '../../src/server/store/sqlite.js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BadRequestError, ValidationError } from '../../src/server/errors.js';
import { openDatabase } from '../../src/server/store/db.js';
import { MAX_PAYLOAD_BYTES, createFeedbackStore, isSingleEmoji, type FeedbackStore } from '../../src/server/store/feedback.js';
import type { FeedbackCreateReq, FeedbackCreateRes, FeedbackQueryReq } from '../../src/wire/feedback.js';

const PROJECT = 'acme/demo';
const CALL_REF = 'weave:///acme/demo/call/0123456789abcdef';

describe('isSingleEmoji', () => {
  it('accepts one emoji of every shape', () => {
    for (const emoji of ['👍', '❤️', '❤', '👍🏽', '🇫🇷', '1️⃣', '#️⃣', '👩‍❤️‍💋‍👨', '🏳️‍🌈', '🧑🏻‍🤝‍🧑🏼', '👨‍🦰', '🏴󠁧󠁢󠁥󠁮󠁧󠁿', '🏃‍♂️', '©️']) {
      expect(isSingleEmoji(emoji), emoji).toBe(true);
    }
  });

  it('refuses text, several emoji and pieces of emoji', () => {
    for (const text of ['', 'a', ':)', '👍👍', '👍 ', ' 👍', '🇫', '🇫🇷🇩🇪', '🏽', '\u200d', 'é', '1', 'a\u200d👍', '👍\u0301x', '👍'.repeat(40), '\u{1FFFD}', '👍🏻🏻']) {
      expect(isSingleEmoji(text), JSON.stringify(text)).toBe(false);
    }
  });
});

describe('feedback store', () => {
  let db: SqliteDatabase;
  let feedback: FeedbackStore;

  beforeEach(() => {
    db = openDatabase(':memory:');
    feedback = createFeedbackStore(db);
  });
  afterEach(() => db.close());

  const count = () => (db.prepare('SELECT COUNT(*) AS n FROM feedback').get() as { n: number }).n;
  // The store answers JSON text (payloads as stored); these read it back.
  const create = (overrides: Partial<FeedbackCreateReq> = {}, user = 'dev') =>
    JSON.parse(
      feedback.create({ project_id: PROJECT, weave_ref: CALL_REF, feedback_type: 'note', payload: { note: 'hi' }, ...overrides }, user),
    ) as FeedbackCreateRes;
  const records = (request: FeedbackQueryReq) => feedback.query(request).map((text) => JSON.parse(text) as Record<string, unknown>);

  it('creates a record and answers id, created_at, wb_user_id and payload', () => {
    const res = create({ payload: { note: 'hi', score: 3 } });
    expect(res.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(res.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(res).toMatchObject({ wb_user_id: 'dev', payload: { note: 'hi', score: 3 } });
    expect(records({ project_id: PROJECT })).toEqual([
      {
        id: res.id,
        project_id: PROJECT,
        weave_ref: CALL_REF,
        feedback_type: 'note',
        payload: { note: 'hi', score: 3 },
        creator: null,
        created_at: res.created_at,
        wb_user_id: 'dev',
        annotation_ref: null,
        runnable_ref: null,
        call_ref: null,
        trigger_ref: null,
      },
    ]);
  });

  it('treats a re-sent id with the same content as a retry, and other content as a conflict', () => {
    const first = create({ id: 'fb-1' });
    expect(create({ id: 'fb-1' })).toEqual(first);
    expect(() => create({ id: 'fb-1', payload: { note: 'changed' } })).toThrow(BadRequestError);
    expect(count()).toBe(1);
    expect(create({ id: 'fb-1', project_id: 'acme/other', weave_ref: 'weave:///acme/other/call/x' }).id).toBe('fb-1');
  });

  it('refuses refs outside the project and malformed refs', () => {
    for (const weave_ref of [
      'weave:///acme/other/call/x',
      'weave:///evil/demo/call/x',
      'weave:///acme/demo',
      'weave:///acme/demo/',
      'weave://acme/demo/call/x',
      'http://acme/demo/call/x',
      "weave:///acme/demo' OR 1=1/call/x",
    ]) {
      expect(() => create({ weave_ref }), weave_ref).toThrow(BadRequestError);
    }
    expect(() => create({ call_ref: 'weave:///acme/other/call/x' })).toThrow(/call_ref .* points outside project/);
    expect(() => create({ weave_ref: 'weave:///acme/demo/call' })).toThrow(/must be weave:\/\/\/<entity>/);
    expect(create({ weave_ref: 'weave:///acme/demo/object/cfg:abc' }).id).toBeTruthy();
    expect(count()).toBe(1);
  });

  it('limits payloads to 1 MiB of JSON as Python writes it (`", "`, `": "`, non-ASCII escaped) and bounded depth', () => {
    const fits = 'x'.repeat(MAX_PAYLOAD_BYTES - '{"t": ""}'.length);
    expect(create({ payload: { t: fits } }).id).toBeTruthy();
    expect(() => create({ payload: { t: `${fits}x` } })).toThrow(/larger than/);
    // Each "é" is `\u00e9` there: six characters.
    expect(() => create({ payload: { t: 'é'.repeat(MAX_PAYLOAD_BYTES / 6) } })).toThrow(/larger than/);
    let deep: unknown = {};
    for (let i = 0; i < 100_000; i++) deep = { d: deep };
    expect(() => create({ payload: deep as Record<string, unknown> })).toThrow(/nested deeper/);
    expect(count()).toBe(1);
  });

  it('checks reaction payloads', () => {
    expect(create({ feedback_type: 'wandb.reaction.1', payload: { emoji: '👍🏽' } }).payload).toEqual({ emoji: '👍🏽' });
    for (const payload of [{ emoji: 'yes' }, { emoji: '👍👍' }, { emoji: 1 }, {}, { emoji: '👍', extra: 1 }]) {
      expect(() => create({ feedback_type: 'wandb.reaction.1', payload })).toThrow(BadRequestError);
    }
    expect(count()).toBe(1);
  });

  describe('query', () => {
    beforeEach(() => {
      create({ id: 'a', payload: { note: 'first', score: 2, nested: { ok: true, list: [1, 'two'] } } });
      create({ id: 'b', payload: { note: 'second', score: 10 }, feedback_type: 'score' }, 'other');
      create({ id: 'c', payload: { score: 1.5 }, creator: 'me' });
      create({ id: 'x', project_id: 'acme/other', weave_ref: 'weave:///acme/other/call/x' });
    });
    const ids = (rows: Array<Record<string, unknown>>) => rows.map((row) => row.id);

    it('lists a project in insertion order', () => {
      expect(ids(records({ project_id: PROJECT }))).toEqual(['a', 'b', 'c']);
    });

    it('selects fields and payload paths keyed by the entry, keeping JSON types', () => {
      const rows = records({
        project_id: PROJECT,
        fields: ['id', 'payload.score', 'payload.nested', 'payload.nested.ok', 'payload.nested.list.1', 'creator', 'payload.missing'],
      });
      expect(rows).toEqual([
        { id: 'a', 'payload.score': 2, 'payload.nested': { ok: true, list: [1, 'two'] }, 'payload.nested.ok': true, 'payload.nested.list.1': 'two', creator: null, 'payload.missing': null },
        { id: 'b', 'payload.score': 10, 'payload.nested': null, 'payload.nested.ok': null, 'payload.nested.list.1': null, creator: null, 'payload.missing': null },
        { id: 'c', 'payload.score': 1.5, 'payload.nested': null, 'payload.nested.ok': null, 'payload.nested.list.1': null, creator: 'me', 'payload.missing': null },
      ]);
      expect(records({ project_id: PROJECT, fields: ['payload'] })[0]).toEqual({
        payload: { note: 'first', score: 2, nested: { ok: true, list: [1, 'two'] } },
      });
      expect(records({ project_id: PROJECT, fields: [] })).toEqual([{}, {}, {}]);
    });

    it('refuses unknown fields by name', () => {
      for (const field of ['nope', 'id.x', 'payloadx', 'val', "id FROM feedback; --"]) {
        expect(() => records({ project_id: PROJECT, fields: [field] })).toThrow(BadRequestError);
        expect(() => records({ project_id: PROJECT, fields: [field] })).toThrow(field);
      }
    });

    it('filters with $expr, including payload paths', () => {
      const query = (expr: unknown) => ids(records({ project_id: PROJECT, query: { $expr: expr } }));
      expect(query({ $gt: [{ $getField: 'payload.score' }, { $literal: 1.9 }] })).toEqual(['a', 'b']);
      expect(query({ $eq: [{ $getField: 'wb_user_id' }, { $literal: 'other' }] })).toEqual(['b']);
      expect(query({ $contains: { input: { $getField: 'payload.note' }, substr: { $literal: 'SEC' }, case_insensitive: true } })).toEqual(['b']);
      expect(query({ $eq: [{ $getField: 'id' }, { $literal: "a' OR '1'='1" }] })).toEqual([]);
      expect(() => query({ $eq: [{ $getField: 'secret' }, { $literal: 1 }] })).toThrow(BadRequestError);
      expect(() => query({ $nope: [] })).toThrow(ValidationError);
    });

    it('matches a payload path against a string literal exactly, whatever the stored JSON type', () => {
      create({ id: 'd', payload: { note: 10, tag: 'x"\\\u{1F600}\n' } });
      create({ id: 'e', payload: { note: { first: true }, tag: null } });
      create({ id: 'f', payload: { note: 'first' } }, 'dev');
      const query = (expr: unknown) => ids(records({ project_id: PROJECT, query: { $expr: expr } }));
      const note = { $getField: 'payload.note' };
      expect(query({ $eq: [note, { $literal: 'first' }] })).toEqual(['a', 'f']);
      expect(query({ $eq: [{ $literal: 'first' }, note] })).toEqual(['a', 'f']);
      // A text a number or an object renders as still matches it, as text (SPEC §2.4).
      expect(query({ $eq: [note, { $literal: '10' }] })).toEqual(['d']);
      expect(query({ $eq: [note, { $literal: '{"first":true}' }] })).toEqual(['e']);
      expect(query({ $eq: [{ $getField: 'payload.tag' }, { $literal: 'x"\\\u{1F600}\n' }] })).toEqual(['d']);
      expect(query({ $not: [{ $eq: [note, { $literal: 'first' }] }] })).toEqual(['b', 'c', 'd', 'e']);
      expect(query({ $in: [note, [{ $literal: 'second' }, { $literal: 'first' }]] })).toEqual(['a', 'b', 'f']);
      expect(query({ $in: [note, [{ $literal: 'second' }, { $literal: '10' }]] })).toEqual(['b', 'd']);
      // The record of the same note in another project stays out.
      create({ id: 'y', project_id: 'acme/other', weave_ref: 'weave:///acme/other/call/y', payload: { note: 'first' } });
      expect(query({ $eq: [note, { $literal: 'first' }] })).toEqual(['a', 'f']);
    });

    it('sorts on record fields and payload paths, then pages', () => {
      const sorted = (sort_by: Array<{ field: string; direction: 'asc' | 'desc' }>, extra = {}) =>
        ids(records({ project_id: PROJECT, sort_by, ...extra }));
      expect(sorted([{ field: 'payload.score', direction: 'desc' }])).toEqual(['b', 'a', 'c']);
      expect(sorted([{ field: 'payload.score', direction: 'asc' }])).toEqual(['c', 'a', 'b']);
      expect(sorted([{ field: 'feedback_type', direction: 'desc' }, { field: 'id', direction: 'desc' }])).toEqual(['b', 'c', 'a']);
      expect(sorted([{ field: 'payload.score', direction: 'asc' }], { limit: 1, offset: 1 })).toEqual(['a']);
      expect(sorted([], { limit: null, offset: 2 })).toEqual(['c']);
      expect(() => sorted([{ field: 'nope', direction: 'asc' }])).toThrow(BadRequestError);
    });

    it('purges by id, one or several, in the project only', () => {
      const eq = (id: string) => ({ $eq: [{ $getField: 'id' }, { $literal: id }] });
      expect(feedback.purge(PROJECT, { $expr: eq('a') })).toBe(1);
      expect(feedback.purge(PROJECT, { $expr: { $or: [eq('b'), { $eq: [{ $literal: 'c' }, { $getField: 'id' }] }, eq('x')] } })).toBe(2);
      expect(count()).toBe(1);
      expect(ids(records({ project_id: 'acme/other' }))).toEqual(['x']);
    });

    it('refuses purge queries of any other shape: a 422 when they break the $expr grammar, else a 400', () => {
      for (const expr of [
        { $or: [] },
        { $eq: [{ $getField: 'id' }] },
        { $eq: [{ $getField: 'id' }, { $literal: 'a' }], $or: [] },
        null,
        'id',
      ]) {
        expect(() => feedback.purge(PROJECT, { $expr: expr }), JSON.stringify(expr)).toThrow(ValidationError);
      }
      for (const expr of [
        { $gt: [{ $getField: 'id' }, { $literal: 'a' }] },
        { $eq: [{ $getField: 'creator' }, { $literal: 'me' }] },
        { $eq: [{ $getField: 'id' }, { $literal: 1 }] },
        { $and: [{ $eq: [{ $getField: 'id' }, { $literal: 'a' }] }] },
        // The service's feedback purge takes no "$in" (its token price purge does).
        { $in: [{ $getField: 'id' }, [{ $literal: 'a' }]] },
        { $or: [{ $eq: [{ $getField: 'id' }, { $literal: 'a' }] }, { $not: [{ $eq: [{ $getField: 'id' }, { $literal: 'b' }] }] }] },
      ]) {
        expect(() => feedback.purge(PROJECT, { $expr: expr }), JSON.stringify(expr)).toThrow(BadRequestError);
      }
      expect(count()).toBe(4);
    });
  });
});
