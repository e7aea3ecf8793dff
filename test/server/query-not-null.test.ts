/**
 * `$not` over a comparison whose value is NULL (a running call's latency or end time, a
 * `$convert` of a missing JSON path). The Weave UI builds its "<", "<=", "!=" and "before" filters
 * as `$not` of the opposite comparison (weave-js Browse3 filters `operationConverter`:
 * `(number): <` -> `{$not: [{$gte: [field, val]}]}`, `(number): !=` -> `{$not: [{$eq: [...]}]}`,
 * `(date): before` -> `{$not: [{$gt: [field, secs]}]}`, numbers read with `$convert` to double
 * except `summary.weave.latency_ms`).
 *
 * The hosted service compiles `$not` to ClickHouse `(NOT (x))` (weave/trace_server/calls_query_builder/
 * conditions.py `process_operation`), and ClickHouse's NOT of NULL is NULL, which HAVING drops.
 * `summary.weave.latency_ms` is NULL for a running call (`_handle_latency_ms_summary_field`:
 * `CASE WHEN ended_at IS NULL THEN NULL`), `ended_at` is NULL, and `$convert` to double of a missing
 * path is `toFloat64OrNull(JSON_VALUE(..))` = `toFloat64OrNull('')` = NULL (orm.py `clickhouse_cast`).
 * So those calls match neither the comparison nor its `$not`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countMatching, idsMatching } from '../helpers/query-expr.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
const P = 'acme/not-null';
const TRACE = 'abcdef0123456789abcdef0123456789';
const FAST = '00000000000000f1'; // ended after 50 ms, inputs.score = 3
const SLOW = '00000000000000f2'; // ended after 500 ms, no inputs.score
const RUNNING = '00000000000000f3'; // never ended, inputs.score = 3

beforeAll(async () => {
  server = await startTestServer();
  const start = (id: string, second: number, inputs: Record<string, unknown>) => ({
    mode: 'start',
    req: { start: { project_id: P, id, trace_id: TRACE, op_name: 'predict', started_at: `2026-01-02T03:04:0${second}.000000Z`, attributes: {}, inputs } },
  });
  const end = (id: string, endedAt: string) => ({ mode: 'end', req: { end: { project_id: P, id, ended_at: endedAt, summary: {} } } });
  const response = await post(server.url, '/call/upsert_batch', {
    batch: [
      start(FAST, 1, { score: 3 }),
      end(FAST, '2026-01-02T03:04:01.050000Z'),
      start(SLOW, 2, {}),
      end(SLOW, '2026-01-02T03:04:02.500000Z'),
      start(RUNNING, 3, { score: 3 }),
    ],
  });
  expect(response.status, response.text).toBe(200);
});
afterAll(async () => {
  await server.close();
});

const ids = (expr: unknown): Promise<string[]> => idsMatching(server, P, expr);
const count = (expr: unknown): Promise<number> => countMatching(server, P, expr);

const field = (path: string) => ({ $getField: path });
const literal = (value: unknown) => ({ $literal: value });
const double = (path: string) => ({ $convert: { input: field(path), to: 'double' } });

describe('$not of a comparison with a NULL value (UI "<", "!=", "before" filters)', () => {
  it('UI "latency_ms < 100" ($not $gte) leaves out running calls, whose latency is NULL', async () => {
    const expr = { $not: [{ $gte: [field('summary.weave.latency_ms'), literal(100)] }] };
    expect(await ids(expr)).toEqual([FAST]);
    expect(await count(expr)).toBe(1);
  });

  it('UI "inputs.score != 5" ($not $eq of $convert double) leaves out calls without inputs.score', async () => {
    const expr = { $not: [{ $eq: [double('inputs.score'), literal(5)] }] };
    expect(await ids(expr)).toEqual([FAST, RUNNING]);
    expect(await count(expr)).toBe(2);
  });

  it('UI "inputs.score <= 10" ($not $gt of $convert double) leaves out calls without inputs.score', async () => {
    const expr = { $not: [{ $gt: [double('inputs.score'), literal(10)] }] };
    expect(await ids(expr)).toEqual([FAST, RUNNING]);
  });

  it('UI "ended_at before <time>" ($not $gt, Unix seconds) leaves out running calls, whose ended_at is NULL', async () => {
    const expr = { $not: [{ $gt: [field('ended_at'), literal(Date.parse('2030-01-01T00:00:00Z') / 1000)] }] };
    expect(await ids(expr)).toEqual([FAST, SLOW]);
  });
});
