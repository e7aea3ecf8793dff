/**
 * A call's feedback in calls queries, as the hosted service reads it: `include_feedback` puts the
 * records into `summary.weave.feedback`, and `feedback.[<type>].payload.<path>` (also
 * `.runnable_ref`/`.trigger_ref`) filters and sorts calls by them. Real HTTP, real SQLite file.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server.close();
});

let counter = 0;
function spanId(): string {
  counter += 1;
  return (0x3000000000 + counter).toString(16).padStart(16, '0');
}
const TRACE = 'abcdef0123456789abcdef0123456789';
/** The scorer op's ref in project `p`. */
const scorer = (p: string) => `weave:///${p}/op/scorer:abc`;

interface Seeded {
  p: string;
  /** Scored 0.9 then, later, 0.2 (its latest score is 0.2); a 👍 reaction. */
  rescored: string;
  /** Scored 0.5; a note; a scorer op's result (runnable feedback). */
  scored: string;
  /** Scored with a text "0.7", and a score of another kind. */
  textScore: string;
  /** No feedback at all. */
  none: string;
}

async function ok(path: string, body: unknown): Promise<string> {
  const response = await post(server.url, path, body);
  expect(response.status, response.text).toBe(200);
  return response.text;
}

async function seed(): Promise<Seeded> {
  counter += 1;
  const p = `acme/fb${counter}`;
  const ids = { rescored: spanId(), scored: spanId(), textScore: spanId(), none: spanId() };
  const batch = Object.values(ids).flatMap((id, index) => {
    const at = `2026-01-02T03:04:0${index}.000000Z`;
    return [
      { mode: 'start', req: { start: { project_id: p, id, trace_id: TRACE, op_name: 'answer', started_at: at, attributes: {}, inputs: {} } } },
      { mode: 'end', req: { end: { project_id: p, id, ended_at: at, summary: {} } } },
    ];
  });
  await ok('/call/upsert_batch', { batch });
  const callRef = (id: string) => `weave:///${p}/call/${id}`;
  const feedback = async (id: string, feedbackType: string, payload: unknown, extra: Record<string, unknown> = {}) =>
    ok('/feedback/create', { project_id: p, weave_ref: callRef(id), feedback_type: feedbackType, payload, ...extra });
  await feedback(ids.rescored, 'quality', { output: { score: 0.9 } });
  await feedback(ids.rescored, 'wandb.reaction.1', { emoji: '👍' });
  await feedback(ids.scored, 'quality', { output: { score: 0.5 } });
  await feedback(ids.textScore, 'quality', { output: { score: '0.7' } });
  await feedback(ids.textScore, 'other', { output: { score: 0.1 } });
  await feedback(ids.scored, 'wandb.note.1', { note: 'fine' });
  await feedback(ids.scored, 'wandb.runnable.scorer', { output: true }, { runnable_ref: scorer(p), call_ref: callRef(ids.none) });
  await feedback(ids.rescored, 'quality', { output: { score: 0.2 } });
  return { p, ...ids };
}

async function streamed(body: Record<string, unknown>): Promise<Array<Record<string, any>>> {
  const text = await ok('/calls/stream_query', body);
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, any>);
}

async function ids(body: Record<string, unknown>): Promise<string[]> {
  return (await streamed(body)).map((call) => call.id as string);
}

const field = (path: string) => ({ $getField: path });
const literal = (value: unknown) => ({ $literal: value });

let s: Seeded;
beforeAll(async () => {
  s = await seed();
});

describe('include_feedback', () => {
  it('puts each call\'s records, oldest first, into summary.weave.feedback, with the hosted fields', async () => {
    const calls = await streamed({ project_id: s.p, include_feedback: true });
    const byId = new Map(calls.map((call) => [call.id, call]));
    const rescored = byId.get(s.rescored)?.summary.weave.feedback;
    expect(rescored.map((record: any) => [record.feedback_type, record.payload])).toEqual([
      ['quality', { output: { score: 0.9 } }],
      ['wandb.reaction.1', { emoji: '👍' }],
      ['quality', { output: { score: 0.2 } }],
    ]);
    expect(Object.keys(rescored[0]).sort()).toEqual(
      ['annotation_ref', 'call_ref', 'created_at', 'creator', 'feedback_type', 'payload', 'runnable_ref', 'trigger_ref', 'wb_user_id', 'weave_ref'].sort(),
    );
    expect(rescored[0]).toMatchObject({ weave_ref: `weave:///${s.p}/call/${s.rescored}`, runnable_ref: null, wb_user_id: 'dev', creator: null });
    const scorerResult = byId.get(s.scored)?.summary.weave.feedback[2];
    expect(scorerResult).toMatchObject({ payload: { output: true }, runnable_ref: scorer(s.p), call_ref: `weave:///${s.p}/call/${s.none}` });
    expect(rescored[0].created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    expect(byId.get(s.none)?.summary.weave.feedback).toEqual([]);
    // The derived fields are still there beside it.
    expect(byId.get(s.none)?.summary.weave).toMatchObject({ status: 'success', trace_name: 'answer' });
  });

  it('leaves summary.weave.feedback out without the flag, and brings summary with it when columns leave it out', async () => {
    const [plain] = await streamed({ project_id: s.p, limit: 1 });
    expect(plain?.summary.weave).not.toHaveProperty('feedback');
    const [narrow] = await streamed({ project_id: s.p, limit: 1, columns: ['id'], include_feedback: true });
    expect(narrow?.summary.weave.feedback).toHaveLength(3); // the first call started: rescored
    const [bare] = await streamed({ project_id: s.p, limit: 1, columns: ['id'] });
    expect(bare?.summary).toBeNull();
  });

  it('is in calls/query\'s answer too, and never shows another project\'s feedback', async () => {
    const other = await seed();
    const answer = JSON.parse(await ok('/calls/query', { project_id: s.p, include_feedback: true })) as { calls: Array<Record<string, any>> };
    const refs = answer.calls.flatMap((call) => call.summary.weave.feedback.map((record: any) => record.weave_ref as string));
    expect(refs.length).toBe(8);
    expect(refs.every((ref) => ref.startsWith(`weave:///${s.p}/call/`))).toBe(true);
    expect(refs.some((ref) => ref.includes(other.p))).toBe(false);
  });
  it('is typed in the client\'s answers, filter and sort included', async () => {
    const client = createClient({ baseUrl: server.url, username: server.username, password: server.password });
    try {
      const calls = await client.callsQuery({
        project_id: s.p,
        include_feedback: true,
        query: { $expr: { $eq: [field('feedback.[wandb.reaction.1].payload.emoji'), literal('👍')] } },
        sort_by: [{ field: 'feedback.[quality].payload.output.score', direction: 'asc' }],
      });
      const reactions = calls[0]?.summary.weave.feedback?.filter((record) => record.feedback_type === 'wandb.reaction.1');
      expect(reactions?.map((record) => record.payload.emoji)).toEqual(['👍']);
    } finally {
      await client.close();
    }
  });
});

describe('feedback fields in $expr and sort_by', () => {
  it('filters on a payload path of one feedback type, reading a call\'s latest record', async () => {
    const query = { $expr: { $gt: [field('feedback.[quality].payload.output.score'), literal(0.4)] } };
    // rescored's latest score is 0.2; textScore's "0.7" reads as a number against a number.
    expect(await ids({ project_id: s.p, query })).toEqual([s.scored, s.textScore]);
  });

  it('filters on a reaction emoji (the type holds dots) and on any type with *', async () => {
    const reaction = { $expr: { $eq: [field('feedback.[wandb.reaction.1].payload.emoji'), literal('👍')] } };
    expect(await ids({ project_id: s.p, query: reaction })).toEqual([s.rescored]);
    const anyNote = { $expr: { $eq: [field('feedback.[*].payload.note'), literal('fine')] } };
    expect(await ids({ project_id: s.p, query: anyNote })).toEqual([s.scored]);
    const hasFeedback = { $expr: { $not: [{ $eq: [field('feedback.[*].payload'), literal(null)] }] } };
    expect(await ids({ project_id: s.p, query: hasFeedback })).toEqual([s.rescored, s.scored, s.textScore]);
  });

  it('reads runnable_ref, and counts calls with calls/query_stats', async () => {
    const query = { $expr: { $eq: [field('feedback.[wandb.runnable.scorer].runnable_ref'), literal(scorer(s.p))] } };
    expect(await ids({ project_id: s.p, query })).toEqual([s.scored]);
    const scoredAtAll = { $expr: { $gte: [field('feedback.[quality].payload.output.score'), literal(0)] } };
    const stats = JSON.parse(await ok('/calls/query_stats', { project_id: s.p, query: scoredAtAll })) as { count: number };
    expect(stats.count).toBe(3);
  });

  it('sorts by a feedback value, calls without one last in either direction', async () => {
    const sortBy = (direction: string) => [{ field: 'feedback.[quality].payload.output.score', direction }];
    expect(await ids({ project_id: s.p, sort_by: sortBy('desc') })).toEqual([s.textScore, s.scored, s.rescored, s.none]);
    expect(await ids({ project_id: s.p, sort_by: sortBy('asc') })).toEqual([s.rescored, s.scored, s.textScore, s.none]);
  });

  it('answers 400 naming the field for a malformed feedback path, and binds hostile types as values', async () => {
    for (const path of ['feedback', 'feedback.x', 'feedback.[].payload', 'feedback.[a]', 'feedback.[a].', 'feedback.[a].other', 'feedback.[a].runnable_ref.x',
      // Names Object.prototype has: never looked up there (its text would reach the SQL).
      'feedback.[a].constructor', 'feedback.[a].__proto__', 'feedback.[a].toString', 'feedback.[a].hasOwnProperty']) {
      const response = await post(server.url, '/calls/stream_query', { project_id: s.p, query: { $expr: { $eq: [field(path), literal(1)] } } });
      expect(response.status, path).toBe(400);
      expect(JSON.parse(response.text).reason, path).toMatch(path === 'feedback' ? /^Unknown field: feedback$/ : /feedback/);
    }
    const hostile = `x') OR 1=1; DROP TABLE calls; --`;
    const query = { $expr: { $eq: [field(`feedback.[${hostile}].payload.note`), literal('fine')] } };
    expect(await ids({ project_id: s.p, query })).toEqual([]);
    expect(await ids({ project_id: s.p })).toHaveLength(4);
    const nul = await post(server.url, '/calls/stream_query', { project_id: s.p, query: { $expr: { $eq: [field('feedback.[a].payload.x\u0000y'), literal(1)] } } });
    expect(nul.status).toBe(400);
  });
});
