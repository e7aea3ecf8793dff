/**
 * `$expr` comparisons on timestamps compare instants (SPEC §2.1 accepts `Z`, offsets and naive
 * forms), not text: a literal in another zone, without microseconds, or as Unix seconds means the
 * same instant the stored canonical text does.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/times';
const TRACE = 'dddddddddddddddddddddddddddddddd';
let server: TestServer;

const STARTS = ['2026-01-01T00:00:00Z', '2026-01-01T01:30:00Z', '2026-01-01T03:00:00.250Z'];
const callId = (n: number): string => (0xabc00 + n).toString(16).padStart(16, '0');

beforeAll(async () => {
  server = await startTestServer();
  const batch = STARTS.flatMap((startedAt, n) => [
    { mode: 'start', req: { start: { project_id: PROJECT, id: callId(n), trace_id: TRACE, op_name: 'op', started_at: startedAt, attributes: {}, inputs: {} } } },
    { mode: 'end', req: { end: { project_id: PROJECT, id: callId(n), ended_at: '2026-01-01T04:00:00+01:00', summary: {} } } },
  ]);
  expect((await post(server.url, '/call/upsert_batch', { batch })).status).toBe(200);
});
afterAll(async () => {
  await server.close();
});

async function idsWhere(operator: string, field: string, literal: string | number): Promise<string[]> {
  const response = await post(server.url, '/calls/stream_query', {
    project_id: PROJECT,
    query: { $expr: { [operator]: [{ $getField: field }, { $literal: literal }] } },
  });
  expect(response.status, response.text).toBe(200);
  return response.text === '' ? [] : response.text.trim().split('\n').map((line) => JSON.parse(line).id);
}

describe('calls: started_at / ended_at against literals', () => {
  it('compares a Z literal without microseconds as the same instant', async () => {
    // As text, "2026-01-01T00:00:00.000000Z" sorts before "2026-01-01T00:00:00Z".
    expect(await idsWhere('$gte', 'started_at', '2026-01-01T00:00:00Z')).toEqual([callId(0), callId(1), callId(2)]);
    expect(await idsWhere('$eq', 'started_at', '2026-01-01T01:30:00Z')).toEqual([callId(1)]);
  });

  it('compares a literal with an offset as its UTC instant', async () => {
    // 02:00+02:00 is 00:00Z; as text it would sort after 01:30Z.
    expect(await idsWhere('$gt', 'started_at', '2026-01-01T02:00:00+02:00')).toEqual([callId(1), callId(2)]);
    // 22:00-05:00 on Dec 31 is 03:00Z on Jan 1; as text it would sort before every call.
    expect(await idsWhere('$lt', 'started_at', '2025-12-31T22:00:00-05:00')).toEqual([callId(0), callId(1)]);
    // Every end is 03:00Z (written as 04:00+01:00).
    expect(await idsWhere('$eq', 'ended_at', '2026-01-01T03:00:00Z')).toEqual([callId(0), callId(1), callId(2)]);
  });

  it('compares a number literal as Unix seconds', async () => {
    const seconds = Date.UTC(2026, 0, 1, 1, 30) / 1000;
    expect(await idsWhere('$gte', 'started_at', seconds)).toEqual([callId(1), callId(2)]);
    expect(await idsWhere('$lt', 'started_at', seconds + 5400.25)).toEqual([callId(0), callId(1)]);
  });
});

describe('calls: microsecond precision', () => {
  const project = 'acme/micros';
  // Three calls within one millisecond: compared at millisecond precision they would be equal.
  const starts = ['2026-03-01T10:00:00.123400Z', '2026-03-01T10:00:00.123456Z', '2026-03-01T10:00:00.123500Z'];

  async function idsOf(operator: string, literal: string | number): Promise<string[]> {
    const response = await post(server.url, '/calls/stream_query', {
      project_id: project,
      query: { $expr: { [operator]: [{ $getField: 'started_at' }, { $literal: literal }] } },
    });
    expect(response.status, response.text).toBe(200);
    return response.text === '' ? [] : response.text.trim().split('\n').map((line) => JSON.parse(line).id);
  }

  beforeAll(async () => {
    const batch = starts.map((startedAt, n) => ({
      mode: 'start',
      req: { start: { project_id: project, id: callId(10 + n), trace_id: TRACE, op_name: 'op', started_at: startedAt, attributes: {}, inputs: {} } },
    }));
    expect((await post(server.url, '/call/upsert_batch', { batch })).status).toBe(200);
  });

  it('tells apart instants within one millisecond, in any zone', async () => {
    expect(await idsOf('$gt', '2026-03-01T10:00:00.123456Z')).toEqual([callId(12)]);
    expect(await idsOf('$eq', '2026-03-01T11:00:00.123456+01:00')).toEqual([callId(11)]);
    expect(await idsOf('$lt', '2026-03-01T10:00:00.123457Z')).toEqual([callId(10), callId(11)]);
    expect(await idsOf('$gte', '2026-03-01T10:00:00.1235Z')).toEqual([callId(12)]);
  });

  it('reads $in lists of instants the way $eq reads each', async () => {
    const response = await post(server.url, '/calls/stream_query', {
      project_id: project,
      query: {
        $expr: {
          $in: [
            { $getField: 'started_at' },
            [{ $literal: '2026-03-01T11:00:00.123456+01:00' }, { $literal: Date.UTC(2026, 2, 1, 10) / 1000 + 0.1235 }, { $literal: 'not a time' }],
          ],
        },
      },
    });
    expect(response.status, response.text).toBe(200);
    expect(response.text.trim().split('\n').map((line) => JSON.parse(line).id)).toEqual([callId(11), callId(12)]);
  });

  it('reads every form parseTimestamp takes as an instant (a date with a zone, a comma fraction)', async () => {
    expect(await idsOf('$gt', '2026-03-01+05:00')).toEqual([callId(10), callId(11), callId(12)]);
    expect(await idsOf('$lt', '2026-03-01Z')).toEqual([]);
    expect(await idsOf('$eq', '2026-03-01T10:00:00,1235Z')).toEqual([callId(12)]);
  });

  it('reads Unix seconds to the microsecond', async () => {
    const second = Date.UTC(2026, 2, 1, 10) / 1000;
    expect(await idsOf('$lte', second + 0.123456)).toEqual([callId(10), callId(11)]);
    expect(await idsOf('$gt', second + 0.1234)).toEqual([callId(11), callId(12)]);
  });
});

describe('feedback: created_at against literals', () => {
  it('compares offset and number literals as instants', async () => {
    const created = await post(server.url, '/feedback/create', {
      project_id: PROJECT,
      weave_ref: `weave:///${PROJECT}/call/${callId(0)}`,
      feedback_type: 'note',
      payload: { note: 'a' },
    });
    expect(created.status, created.text).toBe(200);
    const at = Date.parse(created.body.created_at as string);
    const query = async (operator: string, literal: string | number) => {
      const response = await post(server.url, '/feedback/query', {
        project_id: PROJECT,
        query: { $expr: { [operator]: [{ $getField: 'created_at' }, { $literal: literal }] } },
      });
      expect(response.status, response.text).toBe(200);
      return (response.body.result as Array<{ id: string }>).map((record) => record.id);
    };
    // An hour later, written at -12:00: its text sorts before created_at, its instant after.
    const laterInMinus12 = new Date(at + 3600_000 - 12 * 3600_000).toISOString().replace('Z', '-12:00');
    expect(await query('$gt', laterInMinus12)).toEqual([]);
    expect(await query('$lt', laterInMinus12)).toEqual([created.body.id]);
    expect(await query('$gt', at / 1000 - 10)).toEqual([created.body.id]);
    expect(await query('$gt', at / 1000 + 10)).toEqual([]);
  });
});
