/**
 * `$eq` of a JSON path with the empty string. The hosted service reads a JSON path with
 * ClickHouse `JSON_VALUE`, which gives '' (never NULL) for a missing path; its newest builder even
 * reads `coalesce(nullIf(JSON_VALUE(doc, path), 'null'), '')` (wandb/weave
 * tests/trace_server/test_calls_query_builder.py `test_calls_query_filter_by_empty_string`). So
 * `$eq [path, ""]` holds for a missing path, and `$not` of it does not.
 *
 * Clients rely on it:
 * - the Weave UI's "is empty" / "is not empty" filters are `{$eq: [field, {$literal: ''}]}` and
 *   its `$not` (weave-js Browse3 filters `operationConverter`, `(any): isEmpty`/`isNotEmpty`);
 * - the Python SDK's `get_calls(scored_by=[name])` is `exists_expr` =
 *   `{"$not": [{"$eq": [{"$getField": "feedback.[wandb.runnable.<name>].payload.output"}, {"$literal": ""}]}]}`
 *   and the service's own test expects it to select only the scored calls, with the same count
 *   from `calls/query_stats` (wandb/weave tests/trace scorer query test, `test_scorer_query`).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countMatching, idsMatching } from '../helpers/query-expr.js';
import { post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
const P = 'acme/empty-text';
const TRACE = 'abcdef0123456789abcdef0123456789';
const WITH_TAG = '00000000000000e1'; // inputs.tag = "red"
const EMPTY_TAG = '00000000000000e2'; // inputs.tag = ""
const NO_TAG = '00000000000000e3'; // no inputs.tag
const SCORER = `weave:///${P}/object/judge:abc`; // a Scorer object (an op would need call_ref)

async function ok(path: string, body: unknown): Promise<void> {
  const response = await post(server.url, path, body);
  expect(response.status, response.text).toBe(200);
}

beforeAll(async () => {
  server = await startTestServer();
  const call = (id: string, second: number, inputs: Record<string, unknown>) => {
    const at = `2026-01-02T03:04:0${second}.000000Z`;
    return [
      { mode: 'start', req: { start: { project_id: P, id, trace_id: TRACE, op_name: 'predict', started_at: at, attributes: {}, inputs } } },
      { mode: 'end', req: { end: { project_id: P, id, ended_at: at, summary: {} } } },
    ];
  };
  await ok('/call/upsert_batch', {
    batch: [...call(WITH_TAG, 1, { tag: 'red', flag: true }), ...call(EMPTY_TAG, 2, { tag: '', flag: false }), ...call(NO_TAG, 3, {})],
  });
  // A scorer ran on WITH_TAG only.
  await ok('/feedback/create', {
    project_id: P,
    weave_ref: `weave:///${P}/call/${WITH_TAG}`,
    feedback_type: 'wandb.runnable.judge',
    payload: { output: true },
    runnable_ref: SCORER,
  });
});
afterAll(async () => {
  await server.close();
});

const ids = (expr: unknown): Promise<string[]> => idsMatching(server, P, expr);
const count = (expr: unknown): Promise<number> => countMatching(server, P, expr);

const isEmpty = (path: string) => ({ $eq: [{ $getField: path }, { $literal: '' }] });

describe('$eq with "" on a JSON path (UI is empty / is not empty, SDK scored_by)', () => {
  it('UI "inputs.tag is empty" matches the empty string and the missing path', async () => {
    expect(await ids(isEmpty('inputs.tag'))).toEqual([EMPTY_TAG, NO_TAG]);
  });

  it('UI "inputs.tag is not empty" matches only calls holding a non-empty tag', async () => {
    expect(await ids({ $not: [isEmpty('inputs.tag')] })).toEqual([WITH_TAG]);
  });

  it('SDK get_calls(scored_by=["judge"]) (exists_expr on the feedback payload) selects only the scored call', async () => {
    const expr = { $not: [isEmpty('feedback.[wandb.runnable.judge].payload.output')] };
    expect(await ids(expr)).toEqual([WITH_TAG]);
    expect(await count(expr)).toBe(1);
  });

  // The UI's "(bool): is" sends the text `${value}` (operationConverter); JSON_VALUE(true) is 'true'.
  it('UI "inputs.flag is true" (a "true" text literal) matches JSON true only', async () => {
    expect(await ids({ $eq: [{ $getField: 'inputs.flag' }, { $literal: 'true' }] })).toEqual([WITH_TAG]);
    expect(await ids({ $eq: [{ $getField: 'inputs.flag' }, { $literal: 'false' }] })).toEqual([EMPTY_TAG]);
  });
});
