/**
 * Feedback over real sockets (SPEC §2.3, §2.4; where SPEC is silent, the hosted service's
 * weave/trace_server/feedback.py): payloads kept, answered and measured as the service keeps them
 * (Python's `json.dumps` of the payload as sent: `1.0` a float, big integers exact, keys in their
 * order, 1 MiB of that text), reactions that are one emoji, purge by id only, query fields, sorts
 * and paging, Unicode, and concurrent creates of one id.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PAYLOAD_BYTES } from '../../src/server/store/feedback.js';
import { defaultSqliteDriver, openSqlite } from '../../src/server/store/sqlite.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

/** The SQLite driver the test server runs on (node:sqlite on Node 24). */
const DRIVER = defaultSqliteDriver();

const PROJECT = 'acme/feedback-edges';
const CALL_REF = `weave:///${PROJECT}/call/0123456789abcdef`;

let server: TestServer;
const call = (path: string, body: unknown) => post(server.url, path, body);
const create = (body: Record<string, unknown>) =>
  call('/feedback/create', { project_id: PROJECT, weave_ref: CALL_REF, feedback_type: 'note', payload: { note: 'n' }, ...body });
const byId = (id: string) => ({ $eq: [{ $getField: 'id' }, { $literal: id }] });
const feedbackCount = (projectId: string): number => {
  const db = openSqlite(server.dbPath, { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) AS n FROM feedback WHERE project_id = ?').get(projectId) as { n: number }).n;
  } finally {
    db.close();
  }
};
/** Answer text without the spaces Python's separators put in (the payloads here hold no text with spaces). */
const compact = (text: string) => text.replace(/ /g, '');

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server.close());

describe('feedback/create: payload numbers', () => {
  it('refuses a payload number JSON cannot hold (1e400) instead of storing null, as obj/create and table/create do', async () => {
    const project = 'acme/inf';
    const body = `{"project_id":"${project}","weave_ref":"weave:///${project}/call/1","feedback_type":"t","payload":{"score":1e400}}`;
    const res = await call('/feedback/create', body);
    // obj/create answers this value with 400 "Number out of range"; feedback silently kept null.
    expect(res.status, res.text).toBe(400);
    expect(feedbackCount(project)).toBe(0);
    const obj = await call('/obj/create', `{"obj":{"project_id":"${project}","object_id":"o","val":{"score":1e400}}}`);
    expect(obj.status).toBe(400);
  });

  it('keeps big integers and floats of a payload as sent (as obj/read does)', async () => {
    const project = 'acme/bignum';
    const body = `{"project_id":"${project}","weave_ref":"weave:///${project}/call/1","feedback_type":"t","id":"n1","payload":{"big":12345678901234567890,"f":1.0}}`;
    const created = await call('/feedback/create', body);
    expect(created.status).toBe(200);
    expect(created.text).toContain('12345678901234567890');
    const read = await call('/feedback/query', { project_id: project });
    expect(read.text).toContain('"big":12345678901234567890');
    expect(read.text).toMatch(/"f":\s?1\.0/);
  });

  it('keeps the keys in the order sent (a repeated key: its last value, where it first stood) through create, batch, replace and query', async () => {
    const project = 'acme/key-order';
    const record = (id: string, payload: string) => `{"project_id":"${project}","weave_ref":"weave:///${project}/call/1","feedback_type":"t","id":"${id}","payload":${payload}}`;
    const created = await call('/feedback/create', record('k', '{"b":1,"2":{"z":1,"y":2},"a":1e2,"b":3}'));
    expect(created.status, created.text).toBe(200);
    expect(compact(created.text)).toContain('"payload":{"b":3,"2":{"z":1,"y":2},"a":100.0}}');
    const batch = await call('/feedback/batch/create', `{"batch":[${record('b1', '{"f":1.0}')},${record('b2', '{"n":-12345678901234567890}')}]}`);
    expect(batch.status, batch.text).toBe(200);
    expect(compact(batch.text)).toMatch(/"payload":\{"f":1\.0\}.*"payload":\{"n":-12345678901234567890\}/);
    const replaced = await call('/feedback/replace', `{"feedback_id":"b1",${record('b3', '{"g":2.50}').slice(1)}`);
    expect(replaced.status, replaced.text).toBe(200);
    expect(compact(replaced.text)).toContain('"payload":{"g":2.5}');
    const records = await call('/feedback/query', { project_id: project, fields: ['id', 'payload'] });
    expect(records.text).toBe(
      '{"result":[{"id":"k","payload":{"b":3,"2":{"z":1,"y":2},"a":100.0}},{"id":"b2","payload":{"n":-12345678901234567890}},{"id":"b3","payload":{"g":2.5}}]}',
    );
    // A field named twice is answered once, where it was first named.
    const fields = await call('/feedback/query', { project_id: project, fields: ['payload.a', 'id', 'payload.a'], limit: 1 });
    expect(fields.text).toBe('{"result":[{"payload.a":100.0,"id":"k"}]}');
  });
});


describe('feedback/create: a retried id', () => {
  it('is the same record when its payload has the same content (keys in any order), a conflict when a number differs past 2^53', async () => {
    const project = 'acme/retried';
    const body = (payload: string) =>
      `{"project_id":"${project}","weave_ref":"weave:///${project}/call/1","feedback_type":"t","id":"r1","payload":${payload}}`;
    const first = await call('/feedback/create', body('{"big":12345678901234567890,"note":"n"}'));
    expect(first.status, first.text).toBe(200);
    const again = await call('/feedback/create', body('{"note":"n","big":12345678901234567890}'));
    expect(again.status, again.text).toBe(200);
    expect(again.body.created_at).toBe(first.body.created_at);
    // The same double once parsed, another number as written: not the record stored.
    const other = await call('/feedback/create', body('{"big":12345678901234567891,"note":"n"}'));
    expect(other.status, other.text).toBe(400);
    expect(feedbackCount(project)).toBe(1);
    const stored = await call('/feedback/query', { project_id: project });
    expect(stored.text).toContain('12345678901234567890');
  });
});

describe('feedback/create: reactions', () => {
  it('refuses reaction "emoji" that are no emoji: unassigned pictographic code points, stacked skin tones', async () => {
    // U+1FFFD and U+1FC00 are unassigned (Extended_Pictographic reserves them); the hosted
    // service's emoji.emoji_count() finds 0 in them, and 2 in a thumb with two skin tones.
    const statuses: number[] = [];
    for (const emoji of ['\u{1FFFD}', '\u{1FC00}', '👍🏻🏻']) statuses.push((await create({ feedback_type: 'wandb.reaction.1', payload: { emoji } })).status);
    expect(statuses).toEqual([400, 400, 400]);
  });

  it('takes one emoji of the usual shapes and refuses text, pieces and pairs', async () => {
    for (const emoji of ['👍', '👍🏽', '❤️', '🇯🇵', '1️⃣', '👨‍👩‍👧', '🏳️‍🌈', '🏴󠁧󠁢󠁳󠁣󠁴󠁿']) {
      const res = await create({ feedback_type: 'wandb.reaction.1', payload: { emoji } });
      expect(res.status, `${emoji}: ${res.text}`).toBe(200);
      expect(res.body.payload.emoji).toBe(emoji);
    }
    for (const payload of [{ emoji: 'x' }, { emoji: '👍 ' }, { emoji: '🇦' }, { emoji: '' }, { emoji: 1 }, {}, { emoji: '👍', extra: 1 }]) {
      expect((await create({ feedback_type: 'wandb.reaction.1', payload })).status, JSON.stringify(payload)).toBe(400);
    }
  });
});

describe('feedback/create: payload size as the hosted service measures it', () => {
  it('refuses a payload whose JSON text, as the service writes it (ASCII-escaped), is over 1 MiB', async () => {
    // json.dumps writes each "é" as \u00e9 (6 characters): 200 000 of them are 1.2 MB of JSON text
    // there, which feedback.py's process_feedback_payload refuses; UTF-8 here counts 400 kB.
    const res = await create({ feedback_type: 't', payload: { note: 'é'.repeat(200_000) } });
    expect(res.status).toBe(400);
    expect(res.body.reason).toMatch(/larger than 1048576 characters of JSON/);
    // At the limit exactly (`{"note": "..."}`, with Python's separators): taken.
    const fits = 'x'.repeat(MAX_PAYLOAD_BYTES - '{"note": ""}'.length);
    expect((await create({ feedback_type: 't', payload: { note: fits } })).status).toBe(200);
    expect((await create({ feedback_type: 't', payload: { note: `${fits}x` } })).status).toBe(400);
  });
});

describe('feedback/purge', () => {
  it('answers a purge query that breaks the $expr grammar with a 422 naming its loc (SPEC §2.4), deleting nothing', async () => {
    const project = 'acme/purge-grammar';
    await call('/feedback/create', { project_id: project, weave_ref: `weave:///${project}/call/1`, feedback_type: 't', id: 'keep', payload: {} });
    const answers = [];
    for (const expr of [
      { $eq: [{ $getField: 'id' }] },
      { $eq: [{ $getField: 'id' }, { $literal: 'keep' }, { $literal: 'x' }] },
      { $bogus: [] },
      // An operand has exactly one key (SPEC §2.4).
      { $eq: [{ $getField: 'id' }, { $literal: 'keep', extra: 1 }] },
      { $or: [] },
    ]) {
      answers.push(await call('/feedback/purge', { project_id: project, query: { $expr: expr } }));
    }
    expect(answers.map((res) => res.status)).toEqual([422, 422, 422, 422, 422]);
    for (const res of answers) expect(res.body.detail[0].loc.slice(0, 2)).toEqual(['body', 'query']);
    expect(feedbackCount(project)).toBe(1);
  });

  it('deletes by one id or an $or of ids (either operand order), refusing every other well-formed query with a 400', async () => {
    const project = 'acme/purge-shapes';
    const ref = `weave:///${project}/call/1`;
    for (const id of ['a', 'b', 'c', 'd', 'e']) {
      expect((await call('/feedback/create', { project_id: project, weave_ref: ref, feedback_type: 't', id, payload: {} })).status).toBe(200);
    }
    const purge = (expr: unknown) => call('/feedback/purge', { project_id: project, query: { $expr: expr } });
    for (const expr of [
      { $eq: [{ $getField: 'id' }, { $literal: 5 }] },
      { $in: [{ $getField: 'id' }, [{ $literal: 'a' }]] },
      { $or: [{ $or: [byId('a')] }] },
      { $and: [byId('a')] },
      { $not: [byId('a')] },
      { $or: [byId('a'), { $eq: [{ $getField: 'feedback_type' }, { $literal: 't' }] }] },
      { $eq: [{ $getField: 'weave_ref' }, { $literal: ref }] },
    ]) {
      expect((await purge(expr)).status, JSON.stringify(expr)).toBe(400);
    }
    expect(feedbackCount(project)).toBe(5);
    expect(await purge(byId('a'))).toMatchObject({ status: 200, body: {} });
    expect((await purge({ $eq: [{ $literal: 'b' }, { $getField: 'id' }] })).status).toBe(200);
    expect((await purge({ $or: [byId('c'), byId('d'), byId('no-such')] })).status).toBe(200);
    // Another project's record of the same id stays.
    expect((await call('/feedback/purge', { project_id: 'acme/elsewhere', query: { $expr: byId('e') } })).status).toBe(200);
    const left = await call('/feedback/query', { project_id: project, fields: ['id'] });
    expect(left.body.result).toEqual([{ id: 'e' }]);
  });
});

describe('feedback/query edges', () => {
  const project = 'acme/query-edges';
  const ref = `weave:///${project}/call/0123456789abcdef`;
  beforeAll(async () => {
    const records: Array<[string, unknown]> = [
      ['a', { v: 10, s: 'b', n: null, o: { x: 1 }, 'k.d': 1, arr: [5, 6], m: { '0': 'key zero' } }],
      ['b', { v: 9, s: 'a', t: true }],
      ['c', { v: '10', s: 'B' }],
      ['d', { v: 'x' }],
      ['e', {}],
      ['f', { v: -1.5e300 }],
    ];
    for (const [id, payload] of records) {
      const res = await call('/feedback/create', { project_id: project, weave_ref: ref, feedback_type: 't', id, payload });
      expect(res.status).toBe(200);
    }
  });
  const q = (body: Record<string, unknown>) => call('/feedback/query', { project_id: project, ...body });
  const ids = (res: { body: { result: Array<{ id: string }> } }) => res.body.result.map((row) => row.id);

  it('answers fields keyed by the entry string, keeping JSON types; missing paths are null', async () => {
    const res = await q({ fields: ['id', 'payload.k\\.d', 'payload.arr.1', 'payload.m.0', 'payload.n', 'payload.t', 'payload.o', 'payload', 'created_at'], limit: 2 });
    expect(res.status).toBe(200);
    const [a, b] = res.body.result;
    expect(a).toMatchObject({ id: 'a', 'payload.k\\.d': 1, 'payload.arr.1': 6, 'payload.m.0': 'key zero', 'payload.n': null, 'payload.t': null, 'payload.o': { x: 1 } });
    expect(b).toMatchObject({ id: 'b', 'payload.k\\.d': null, 'payload.arr.1': null, 'payload.t': true, 'payload': { v: 9, s: 'a', t: true } });
    expect(typeof a.created_at).toBe('string');
    expect(Object.keys(a)).toHaveLength(9);
  });

  it('sorts a payload path by numeric reading (numbers and numeric text together), then text, absent last in both directions', async () => {
    expect(ids(await q({ fields: ['id'], sort_by: [{ field: 'payload.v', direction: 'asc' }] }))).toEqual(['f', 'b', 'a', 'c', 'd', 'e']);
    expect(ids(await q({ fields: ['id'], sort_by: [{ field: 'payload.v', direction: 'desc' }] }))).toEqual(['a', 'c', 'b', 'f', 'd', 'e']);
    expect(ids(await q({ fields: ['id'], sort_by: [{ field: 'created_at', direction: 'desc' }] }))).toEqual(['f', 'e', 'd', 'c', 'b', 'a']);
  });

  it('compares payload numbers numerically and $contains case-insensitively', async () => {
    expect(ids(await q({ fields: ['id'], query: { $expr: { $eq: [{ $getField: 'payload.v' }, { $literal: 10 }] } } }))).toEqual(['a', 'c']);
    expect(ids(await q({ fields: ['id'], query: { $expr: { $in: [{ $getField: 'payload.v' }, [{ $literal: 9 }, { $literal: 'x' }]] } } }))).toEqual(['b', 'd']);
    expect(ids(await q({ fields: ['id'], query: { $expr: { $contains: { input: { $getField: 'payload.s' }, substr: { $literal: 'b' }, case_insensitive: true } } } }))).toEqual(['a', 'c']);
    expect(ids(await q({ fields: ['id'], query: { $expr: { $eq: [{ $getField: 'payload.o' }, { $literal: { x: 1 } }] } } }))).toEqual(['a']);
  });

  it('pages with limit 0, offset only, -0 and counts past 2^63', async () => {
    expect((await q({ limit: 0 })).body).toEqual({ result: [] });
    expect(ids(await q({ fields: ['id'], offset: 4 }))).toEqual(['e', 'f']);
    expect((await call('/feedback/query', `{"project_id":"${project}","fields":["id"],"limit":-0}`)).body).toEqual({ result: [] });
    expect((await call('/feedback/query', `{"project_id":"${project}","fields":["id"],"limit":2.0}`)).body.result).toHaveLength(2);
    const huge = await call('/feedback/query', `{"project_id":"${project}","fields":["id"],"limit":18446744073709551616,"offset":9223372036854775808}`);
    expect(huge).toMatchObject({ status: 200, body: { result: [] } });
    for (const bad of [{ limit: 1.5 }, { limit: '1' }, { offset: -1 }]) expect((await q(bad)).status, JSON.stringify(bad)).toBe(422);
  });

  it('answers 400 naming a path that continues past a scalar column', async () => {
    const res = await q({ fields: ['id.x'] });
    expect(res.status).toBe(400);
    expect(res.body.reason).toContain('id.x');
  });
});

describe('feedback: Unicode and concurrency', () => {
  it('keeps NUL characters and lone surrogates in ids and payloads through create, query, $eq and purge', async () => {
    const project = 'acme/unicode';
    const ref = `weave:///${project}/call/1`;
    const payload = { s: 'x\u0000y', lone: '\ud800', astral: '😀é' };
    expect((await call('/feedback/create', { project_id: project, weave_ref: ref, feedback_type: 't', id: 'a\u0000b', payload })).status).toBe(200);
    expect((await call('/feedback/create', { project_id: project, weave_ref: ref, feedback_type: 't', id: 'a', payload: {} })).status).toBe(200);
    const eq = (field: string, literal: string) =>
      call('/feedback/query', { project_id: project, fields: ['id'], query: { $expr: { $eq: [{ $getField: field }, { $literal: literal }] } } });
    expect((await eq('id', 'a\u0000b')).body.result).toEqual([{ id: 'a\u0000b' }]);
    expect((await eq('payload.s', 'x\u0000y')).body.result).toEqual([{ id: 'a\u0000b' }]);
    // node:sqlite (Node 24) binds a lone surrogate as U+FFFD, which the stored escape never equals
    // (README); better-sqlite3 binds the bytes SQLite's JSON functions decode the escape to.
    expect((await eq('payload.lone', '\ud800')).body.result).toEqual(DRIVER === 'node:sqlite' ? [] : [{ id: 'a\u0000b' }]);
    const fields = await call('/feedback/query', { project_id: project, fields: ['payload.s', 'payload.lone', 'payload.astral'], limit: 1 });
    expect(fields.body.result).toEqual([{ 'payload.s': 'x\u0000y', 'payload.lone': '\ud800', 'payload.astral': '😀é' }]);
    expect((await call('/feedback/purge', { project_id: project, query: { $expr: byId('a\u0000b') } })).status).toBe(200);
    expect((await call('/feedback/query', { project_id: project, fields: ['id'] })).body.result).toEqual([{ id: 'a' }]);
  });

  it('concurrent creates of one id: the same content is one record, other content a 400 (never a 500)', async () => {
    const project = 'acme/concurrent';
    const ref = `weave:///${project}/call/1`;
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => call('/feedback/create', { project_id: project, weave_ref: ref, feedback_type: 't', id: 'same', payload: { i: i % 2 } })),
    );
    const first = answers[0]!;
    answers.forEach((res, i) => expect(res.status, res.text).toBe(i % 2 === 0 ? 200 : 400));
    for (const res of answers.filter((r) => r.status === 200)) expect(res.body).toEqual(first.body);
    const batches = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        call('/feedback/batch/create', {
          batch: [
            { project_id: project, weave_ref: ref, feedback_type: 't', id: `b${i}`, payload: {} },
            { project_id: project, weave_ref: ref, feedback_type: 't', id: 'shared', payload: { i } },
          ],
        }),
      ),
    );
    expect(batches.map((r) => r.status)).toEqual([200, ...Array(19).fill(400)]);
    // A refused batch stores none of its records.
    expect(feedbackCount(project)).toBe(3);
  });
});
