/** Hostile and edge-case input to /threads/stream_query. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/threads-edges';
const NARROW = { username: 'narrow', password: 'pw2' };
let server: TestServer;
let n = 0;
const nextId = () => (0x1000 + ++n).toString(16).padStart(16, '0');
const turn = (thread: string, started: string, ended: string | null, id = nextId()) => [
  { mode: 'start', req: { start: { project_id: PROJECT, id, trace_id: 'abcdef0123456789abcdef0123456789', op_name: 'op', started_at: started, attributes: {}, inputs: {}, thread_id: thread, turn_id: id } } },
  ...(ended === null ? [] : [{ mode: 'end', req: { end: { project_id: PROJECT, id, ended_at: ended, summary: {} } } }]),
];
const TIE_A = '000000000000aaa1';
const TIE_B = '000000000000aaa2';
beforeAll(async () => {
  server = await startTestServer({ users: [{ ...NARROW, entities: ['elsewhere'] }] });
  const batch = [
    ...turn('t-normal', '2026-01-01T10:00:00Z', '2026-01-01T10:00:01Z'),
    ...turn('t-normal', '2026-01-01T10:01:00Z', '2026-01-01T10:01:03Z'),
    ...turn('__proto__', '2026-01-01T09:00:00Z', '2026-01-01T09:00:02Z'),
    ...turn('constructor', '2026-01-01T09:00:00Z', '2026-01-01T09:00:02Z'),
    ...turn('ünïcødé 😀', '2026-01-01T08:00:00Z', '2026-01-01T08:00:05Z'),
    ...turn('edge', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z'),
    ...turn('negative', '2026-01-01T07:00:00Z', '2026-01-01T06:00:00Z'),
    // Two turns starting and ending at the same instant: which is first/last must not depend on the sort.
    ...turn('tie', '2026-01-01T05:00:00Z', '2026-01-01T05:00:01Z', TIE_B),
    ...turn('tie', '2026-01-01T05:00:00Z', '2026-01-01T05:00:01Z', TIE_A),
    ...turn('x'.repeat(10_000), '2026-01-01T04:00:00Z', '2026-01-01T04:00:01Z'),
  ];
  const res = await post(server.url, '/call/upsert_batch', { batch });
  expect(res.status, res.text).toBe(200);
});
afterAll(async () => server.close());
const query = async (body: Record<string, unknown>, credentials?: { username: string; password: string }) => {
  const res = await post(server.url, '/threads/stream_query', { project_id: PROJECT, ...body }, credentials);
  return { ...res, lines: res.status === 200 ? res.text.split('\n').filter(Boolean).map((line) => JSON.parse(line)) : [] };
};

describe('threads: edge cases', () => {
  it('odd thread ids and edge timestamps come back as stored', async () => {
    const res = await query({});
    expect(res.status, res.text).toBe(200);
    const ids = res.lines.map((t: { thread_id: string }) => t.thread_id);
    for (const id of ['__proto__', 'constructor', 'ünïcødé 😀', 'edge', 'negative', 'tie', 't-normal', 'x'.repeat(10_000)]) expect(ids).toContain(id);
    const edge = res.lines.find((t: { thread_id: string }) => t.thread_id === 'edge');
    expect(edge.start_time).toBe('0001-01-01T00:00:00.000000Z');
    expect(edge.last_updated).toBe('9999-12-31T23:59:59.000000Z');
    expect(Number.isFinite(edge.p50_turn_duration_ms)).toBe(true);
  });

  it('limits and offsets at and past their bounds, in both the SQL and the percentile paths', async () => {
    for (const sort_by of [undefined, [{ field: 'p50_turn_duration_ms', direction: 'desc' }]]) {
      expect((await query({ sort_by, limit: 0 })).lines).toEqual([]);
      expect((await query({ sort_by, offset: 1e308 })).lines).toEqual([]);
      expect((await query({ sort_by, limit: 1e308 })).lines.length).toBe(8);
      expect((await query({ sort_by, limit: 9007199254740993, offset: 9007199254740993 })).lines).toEqual([]);
      expect((await query({ sort_by, limit: 2, offset: 7 })).lines.length).toBe(1);
      for (const bad of [{ limit: -1 }, { offset: -1 }, { limit: 1.5 }, { limit: '1' }]) {
        expect((await query({ sort_by, ...bad })).status).toBe(422);
      }
    }
  });

  it('first_turn_id / last_turn_id of tied turns do not depend on sort_by', async () => {
    const bySql = (await query({ sort_by: [{ field: 'thread_id', direction: 'asc' }] })).lines.find((t: { thread_id: string }) => t.thread_id === 'tie');
    const byPct = (await query({ sort_by: [{ field: 'p99_turn_duration_ms', direction: 'asc' }] })).lines.find((t: { thread_id: string }) => t.thread_id === 'tie');
    expect(byPct).toEqual(bySql);
  });

  it('both paths sum up every thread the same way', async () => {
    const bySql = (await query({ sort_by: [{ field: 'thread_id', direction: 'asc' }] })).lines;
    const byPct = (await query({ sort_by: [{ field: 'p50_turn_duration_ms', direction: 'asc' }, { field: 'thread_id', direction: 'asc' }] })).lines;
    const key = (t: { thread_id: string }) => t.thread_id;
    expect([...byPct].sort((a, b) => (key(a) < key(b) ? -1 : 1))).toEqual(bySql);
  });

  it('thread_ids filter: __proto__, lone surrogate, 1000 ids, 1001 ids, empty string', async () => {
    expect((await query({ filter: { thread_ids: ['__proto__'] } })).lines.map((t: { thread_id: string }) => t.thread_id)).toEqual(['__proto__']);
    const raw = await post(server.url, '/threads/stream_query', `{"project_id":"${PROJECT}","filter":{"thread_ids":["\\ud800"]}}`);
    expect(raw.status).toBeLessThan(500);
    const many = Array.from({ length: 1000 }, (_, i) => `id-${i}`);
    many[999] = 'tie';
    expect((await query({ filter: { thread_ids: many } })).lines.length).toBe(1);
    expect((await query({ filter: { thread_ids: [...many, 'x'] } })).status).toBe(422);
    expect((await query({ filter: { thread_ids: [] } })).lines.length).toBe(8);
  });

  it('datetime filters at the edges and malformed are 4xx or work', async () => {
    for (const value of ['0001-01-01T00:00:00Z', '9999-12-31T23:59:59Z', '2026-01-01T10:00:00+14:00', '2026-01-01T10:00:00.123456789Z']) {
      const res = await query({ filter: { after_datetime: value } });
      expect(res.status, value).toBe(200);
    }
    for (const value of ['', 'yesterday', '2026-13-01T00:00:00Z', '10000-01-01T00:00:00Z', '0000-12-31T23:59:59Z', '2026-01-01T00:00:00+24:00']) {
      const res = await query({ filter: { before_datetime: value } });
      expect(res.status, value).toBe(400);
    }
    // after == before: nothing; after > before: nothing, not an error.
    expect((await query({ filter: { after_datetime: '2026-01-01T10:00:00Z', before_datetime: '2026-01-01T09:00:00Z' } })).lines).toEqual([]);
    // a turn started exactly at after_datetime is excluded (strictly after)
    expect((await query({ filter: { after_datetime: '2026-01-01T10:01:00Z', thread_ids: ['t-normal'] } })).lines).toEqual([]);
  });

  it('sort_by: unknown, duplicate, 100 keys, bad direction', async () => {
    expect((await query({ sort_by: [{ field: 'first_turn_id', direction: 'asc' }] })).status).toBe(400);
    expect((await query({ sort_by: [{ field: '__proto__', direction: 'asc' }] })).status).toBe(400);
    expect((await query({ sort_by: [{ field: 'turn_count', direction: 'sideways' }] })).status).toBe(422);
    const dup = await query({ sort_by: [{ field: 'turn_count', direction: 'asc' }, { field: 'turn_count', direction: 'desc' }] });
    expect(dup.status).toBe(200);
  });

  it('authorization: a user granted only another entity gets a 403', async () => {
    expect((await query({}, NARROW)).status).toBe(403);
    expect((await query({ sort_by: [{ field: 'p50_turn_duration_ms', direction: 'asc' }] }, NARROW)).status).toBe(403);
  });

  it('concurrent queries answer the same', async () => {
    const results = await Promise.all(Array.from({ length: 8 }, () => query({ sort_by: [{ field: 'p50_turn_duration_ms', direction: 'asc' }] })));
    for (const r of results) expect(r.lines).toEqual(results[0]!.lines);
  });
});
