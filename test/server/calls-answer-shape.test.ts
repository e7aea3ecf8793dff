/**
 * The shape and order of `calls/stream_query` answers, against the hosted service
 * (wandb/weave weave/trace_server/clickhouse_trace_server_batched.py `calls_query_stream`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
const P = 'acme/answer-shape';
const TRACE = 'abcdef0123456789abcdef0123456789';
// Ids in the opposite order of their start times.
const LATE = '00000000000000a1'; // started 03:04:09
const EARLY = '00000000000000a2'; // started 03:04:01
// Ended 1.5 ms before it started (clock skew between the hosts of its start and its end).
const SKEWED = '00000000000000a3';

beforeAll(async () => {
  server = await startTestServer();
  const call = (id: string, startedAt: string, endedAt: string) => [
    { mode: 'start', req: { start: { project_id: P, id, trace_id: TRACE, op_name: 'predict', started_at: startedAt, attributes: { env: 'prod' }, inputs: { q: 'hi' } } } },
    { mode: 'end', req: { end: { project_id: P, id, ended_at: endedAt, output: 'ok', summary: {} } } },
  ];
  const response = await post(server.url, '/call/upsert_batch', {
    batch: [
      ...call(LATE, '2026-01-02T03:04:09.000000Z', '2026-01-02T03:04:09.010000Z'),
      ...call(EARLY, '2026-01-02T03:04:01.000000Z', '2026-01-02T03:04:01.010000Z'),
      ...call(SKEWED, '2026-01-02T03:04:05.000000Z', '2026-01-02T03:04:04.998500Z'),
    ],
  });
  expect(response.status, response.text).toBe(200);
});
afterAll(async () => {
  await server.close();
});

async function lines(body: Record<string, unknown>): Promise<Array<Record<string, any>>> {
  const response = await post(server.url, '/calls/stream_query', { project_id: P, ...body });
  expect(response.status, response.text).toBe(200);
  return response.text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, any>);
}

describe('columns', () => {
  // The service builds every line as `tsi.CallSchema.model_validate(_ch_call_dict_to_call_schema_dict(row))`:
  // unselected columns come back at their defaults (`attributes`/`inputs` from `get("attributes_dump", "{}")`,
  // the others None), never absent. CallSchema (trace_server_interface.py) declares `attributes: dict`
  // and `inputs: dict` without defaults, so a Python client validating a line without them fails.
  it('every line still carries every Call field (attributes and inputs as objects) when columns names a few', async () => {
    const [first] = await lines({ columns: ['id', 'op_name'], limit: 1 });
    expect(first).toBeDefined();
    for (const key of ['attributes', 'inputs', 'output', 'summary', 'ended_at', 'exception', 'display_name', 'parent_id', 'wb_user_id', 'wb_run_id', 'deleted_at']) {
      expect(first, `key ${key}`).toHaveProperty(key);
    }
    expect(typeof first?.attributes).toBe('object');
    expect(typeof first?.inputs).toBe('object');
  });
});

describe('sort_by', () => {
  // calls_query_stream: "Sort with empty list results in no sorting": `sort_by: []` adds only the
  // `id asc` tie-break; only a missing/null sort_by gets the default `started_at asc, id asc`.
  it('an empty sort_by list orders by id alone, not by started_at', async () => {
    expect((await lines({ sort_by: [] })).map((call) => call.id)).toEqual([LATE, EARLY, SKEWED]);
  });
});

describe('summary.weave.latency_ms', () => {
  // make_derived_summary_fields (weave/trace_server/trace_server_common.py):
  // (days * 86400 + seconds) * 1000 + microseconds // 1000 of the timedelta: floor division,
  // so -1.5 ms is -2 (timedelta(-1500 us) = -1 day + 86399 s + 998500 us).
  it('rounds a negative duration down, as Python floors the timedelta', async () => {
    const [skewed] = (await lines({ filter: { call_ids: [SKEWED] } }));
    expect(skewed?.summary.weave.latency_ms).toBe(-2);
  });
});
