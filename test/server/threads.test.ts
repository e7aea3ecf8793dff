/**
 * `threads/stream_query`: a project's threads summed up over their turns (calls whose `turn_id` is
 * their own id), as the hosted service sums them. Real HTTP, real SQLite file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { register } from '../../src/exporter/register.js';
import { trace, withThread } from '../../src/trace/index.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/threads';
const NARROW = { username: 'narrow', password: 'pw2' };

/** Call ids (16 hex digits, as span ids) by the names the test uses. */
const ID: Record<string, string> = Object.fromEntries(
  ['t1', 'nested', 't2', 't3', 't4', 't5', 't6', 't7', 'x'].map((name, index) => [name, (0xc0 + index).toString(16).padStart(16, '0')]),
);

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ users: [{ ...NARROW, entities: ['elsewhere'] }] });
  const call = (name: string, thread: string | null, turn: string, started: string, ended?: string) => [
    {
      mode: 'start',
      req: { start: { project_id: PROJECT, id: ID[name], trace_id: 'abcdef0123456789abcdef0123456789', op_name: 'op', started_at: started, attributes: {}, inputs: {}, thread_id: thread, turn_id: ID[turn] } },
    },
    ...(ended === undefined ? [] : [{ mode: 'end', req: { end: { project_id: PROJECT, id: ID[name], ended_at: ended, summary: {} } } }]),
  ];
  const batch = [
    // Thread "a": two ended turns (1500 ms and 250 ms) and a call nested in the first.
    ...call('t1', 'a', 't1', '2026-01-01T10:00:00Z', '2026-01-01T10:00:01.500Z'),
    ...call('nested', 'a', 't1', '2026-01-01T10:00:00.100Z', '2026-01-01T10:00:09Z'),
    ...call('t2', 'a', 't2', '2026-01-01T10:01:00Z', '2026-01-01T10:01:00.250Z'),
    // Thread "b": a turn still running, and an ended one.
    ...call('t3', 'b', 't3', '2026-01-01T09:00:00Z'),
    ...call('t4', 'b', 't4', '2026-01-01T09:05:00Z', '2026-01-01T09:05:02Z'),
    // Thread "c": no turn has ended; an empty thread id; a turn deleted below.
    ...call('t5', 'c', 't5', '2026-01-01T08:00:00Z'),
    ...call('t6', '', 't6', '2026-01-01T08:00:00Z', '2026-01-01T08:00:01Z'),
    ...call('t7', 'd', 't7', '2026-01-01T07:00:00Z', '2026-01-01T07:00:01Z'),
    // Not a turn: its turn_id is another call's.
    ...call('x', 'e', 't1', '2026-01-01T07:00:00Z', '2026-01-01T07:00:01Z'),
  ];
  const written = await post(server.url, '/call/upsert_batch', { batch });
  expect(written.status, written.text).toBe(200);
  expect((await post(server.url, '/calls/delete', { project_id: PROJECT, call_ids: [ID.t7] })).status).toBe(200);
});
afterAll(async () => server.close());

const query = async (body: Record<string, unknown>) => {
  const res = await post(server.url, '/threads/stream_query', { project_id: PROJECT, ...body });
  return { status: res.status, body: res.body, lines: res.status === 200 ? res.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line)) : [] };
};

const THREAD_A = {
  thread_id: 'a',
  turn_count: 2,
  start_time: '2026-01-01T10:00:00.000000Z',
  last_updated: '2026-01-01T10:01:00.250000Z',
  first_turn_id: ID.t1,
  last_turn_id: ID.t2,
  p50_turn_duration_ms: 875,
  p99_turn_duration_ms: 1487.5,
};
const THREAD_B = {
  thread_id: 'b',
  turn_count: 2,
  start_time: '2026-01-01T09:00:00.000000Z',
  last_updated: '2026-01-01T09:05:02.000000Z',
  first_turn_id: ID.t3,
  last_turn_id: ID.t4,
  p50_turn_duration_ms: 2000,
  p99_turn_duration_ms: 2000,
};

describe('threads/stream_query', () => {
  it('sums each thread up over its turns, the latest activity first, as JSON lines', async () => {
    const res = await post(server.url, '/threads/stream_query', { project_id: PROJECT });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/jsonl/);
    expect(res.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line))).toEqual([THREAD_A, THREAD_B]);
  });

  it('sorts, pages and filters', async () => {
    expect((await query({ sort_by: [{ field: 'start_time', direction: 'asc' }] })).lines.map((t) => t.thread_id)).toEqual(['b', 'a']);
    expect((await query({ sort_by: [{ field: 'turn_count', direction: 'desc' }] })).lines.map((t) => t.thread_id)).toEqual(['a', 'b']);
    expect((await query({ sort_by: [{ field: 'p50_turn_duration_ms', direction: 'desc' }] })).lines.map((t) => t.thread_id)).toEqual(['b', 'a']);
    expect((await query({ limit: 1, offset: 1 })).lines).toEqual([THREAD_B]);
    expect((await query({ filter: { thread_ids: ['b', 'zzz'] } })).lines).toEqual([THREAD_B]);
    // Turns started after 09:30: thread "b" has none.
    expect((await query({ filter: { after_datetime: '2026-01-01T09:30:00Z' } })).lines.map((t) => t.thread_id)).toEqual(['a']);
    const before = await query({ filter: { before_datetime: '2026-01-01T10:00:30+00:00' } });
    expect(before.lines).toEqual([{ ...THREAD_A, turn_count: 1, last_updated: '2026-01-01T10:00:01.500000Z', last_turn_id: ID.t1, p50_turn_duration_ms: 1500, p99_turn_duration_ms: 1500 }, THREAD_B]);
    // As on the service: an empty list filters nothing, and an empty thread id is read when named.
    expect((await query({ filter: { thread_ids: [] } })).lines).toEqual([THREAD_A, THREAD_B]);
    expect((await query({ filter: { thread_ids: [''] } })).lines.map((t) => [t.thread_id, t.turn_count])).toEqual([['', 1]]);
    // A sort by a percentile sums every thread up first; ties fall to thread_id.
    expect((await query({ sort_by: [{ field: 'p99_turn_duration_ms', direction: 'asc' }], limit: 1 })).lines).toEqual([THREAD_A]);
  });

  it('answers 400, 403 and 422 for bad input', async () => {
    expect((await query({ sort_by: [{ field: 'op_name', direction: 'asc' }] })).status).toBe(400);
    expect((await query({ filter: { after_datetime: 'yesterday' } })).body).toMatchObject({ reason: expect.stringMatching(/filter.after_datetime must be an ISO 8601 date-time/) });
    for (const body of [{ filter: { thread: 'a' } }, { limit: -1 }, { extra: 1 }, { filter: { thread_ids: 'a' } }, { sort_by: [{ field: 'thread_id', direction: 'up' }] }]) {
      expect((await query(body)).status, JSON.stringify(body)).toBe(422);
    }
    expect((await post(server.url, '/threads/stream_query', { project_id: PROJECT }, NARROW)).status).toBe(403);
    expect((await query({ project_id: 'acme/empty' })).lines).toEqual([]);
  });

  it('sums up the turns withThread() makes', async () => {
    const project = 'acme/threads-traced';
    const tracing = register({ baseUrl: server.url, projectId: project, username: 'dev', password: 'pw', deliveryThread: 'main', flushOnExit: false });
    try {
      const step = trace(async function step(n: number) {
        return n;
      });
      const reply = trace(async function reply(message: string) {
        await step(1);
        return message.toUpperCase();
      });
      await withThread('conversation-1', () => reply('hi'));
      await withThread('conversation-1', () => reply('again'));
      await withThread('conversation-2', () => reply('other'));
      await tracing.forceFlush();
    } finally {
      await tracing.shutdown();
    }
    const res = await post(server.url, '/threads/stream_query', { project_id: project, sort_by: [{ field: 'thread_id', direction: 'asc' }] });
    const threads = res.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line));
    expect(threads.map((thread) => [thread.thread_id, thread.turn_count])).toEqual([
      ['conversation-1', 2],
      ['conversation-2', 1],
    ]);
  });

  it('is read by the client as it streams', async () => {
    const client = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
    try {
      const threads = [];
      for await (const thread of client.threadsStreamQuery({ project_id: PROJECT, filter: { thread_ids: ['a'] } })) threads.push(thread);
      expect(threads).toEqual([THREAD_A]);
    } finally {
      await client.close();
    }
  });
});
