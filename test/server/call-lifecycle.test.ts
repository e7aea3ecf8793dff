/**
 * The calls write path and what reads answer afterwards, against the hosted service's
 * semantics (wandb/weave, cited per test).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
  return (0x7100000000 + counter).toString(16).padStart(16, '0');
}
const project = (): string => `lifecycle/p${spanId()}`;
const TRACE = '0123456789abcdef0123456789abcdef';

const start = (projectId: string, id: string, extra: Record<string, unknown> = {}) => ({
  project_id: projectId,
  id,
  trace_id: TRACE,
  op_name: 'answer',
  started_at: '2026-01-02T03:04:05.000100Z',
  attributes: { env: 'test' },
  inputs: { q: 1 },
  ...extra,
});
const end = (projectId: string, id: string, extra: Record<string, unknown> = {}) => ({
  project_id: projectId,
  id,
  ended_at: '2026-01-02T03:04:06.000100Z',
  summary: {},
  output: 'ok',
  ...extra,
});
const startItem = (s: object) => ({ mode: 'start', req: { start: s } });
const endItem = (e: object) => ({ mode: 'end', req: { end: e } });

async function upsert(batch: unknown[]): Promise<void> {
  const response = await post(server.url, '/call/upsert_batch', { batch });
  expect(response.status, response.text).toBe(200);
}
async function read(projectId: string, id: string) {
  const response = await post(server.url, '/call/read', { project_id: projectId, id });
  expect(response.status, response.text).toBe(200);
  return response.body.call;
}
async function queryOne(projectId: string, id: string) {
  const response = await post(server.url, '/calls/stream_query', { project_id: projectId, filter: { call_ids: [id] } });
  expect(response.status, response.text).toBe(200);
  return JSON.parse(response.text.trim());
}

describe('call/update and a start written again', () => {
  // Service: calls_merged.display_name is argMaxState(display_name, call_parts.created_at)
  // (weave/trace_server/migrations, "Add argMax to use most recent display_name"), and ClickHouse
  // aggregate functions skip NULL arguments: a later part without a display name never erases
  // the rename. A start retried by an SDK (or sent again by an exporter after a lost answer)
  // after the user renamed the call keeps the new name.
  it('keeps a rename when the call\'s start (without a display name) is written again', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id)), endItem(end(p, id))]);
    const update = await post(server.url, '/call/update', { project_id: p, call_id: id, display_name: 'renamed' });
    expect(update.status).toBe(200);
    await upsert([startItem(start(p, id))]); // the retried start
    const call = await read(p, id);
    expect(call.display_name).toBe('renamed');
    expect(call.summary.weave.trace_name).toBe('renamed');
  });

  it('keeps a rename when start and end of the call are written again in one batch', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id)), endItem(end(p, id))]);
    await post(server.url, '/call/update', { project_id: p, call_id: id, display_name: 'renamed' });
    await upsert([startItem(start(p, id)), endItem(end(p, id))]); // a whole batch retried
    expect((await read(p, id)).display_name).toBe('renamed');
  });
});

describe('otel_dump in the read form', () => {
  // Service: clickhouse_query_layer/calls.py ch_call_dict_to_call_schema_dict:
  //   if otel_dump := ch_call_dict.get("otel_dump"): attributes["otel_span"] = dict_dump_to_dict(otel_dump)
  // ("Legacy trace servers stored all otel info in attributes, clients expect it"). Weave's own
  // OTel test: "The full OTEL span data is stored separately and reconstructed in
  // call.attributes.otel_span".
  it('answers a call\'s otel_dump as attributes.otel_span, on call/read and calls/stream_query', async () => {
    const p = project();
    const id = spanId();
    const otelDump = { name: 'chat', kind: 'CLIENT', status: { code: 'ERROR', message: 'boom' }, attributes: { a: 1 } };
    await upsert([startItem(start(p, id, { otel_dump: otelDump })), endItem(end(p, id))]);
    expect((await read(p, id)).attributes).toEqual({ env: 'test', otel_span: otelDump });
    expect((await queryOne(p, id)).attributes).toEqual({ env: 'test', otel_span: otelDump });
    // With columns: only when the answer has attributes (the dump is not read otherwise).
    const lineWith = async (columns: string[]) => {
      const response = await post(server.url, '/calls/stream_query', { project_id: p, filter: { call_ids: [id] }, columns });
      return JSON.parse(response.text.trim());
    };
    expect((await lineWith(['attributes.env'])).attributes).toEqual({ env: 'test', otel_span: otelDump });
    expect((await lineWith(['id'])).attributes).toEqual({});
  });
});

describe('empty strings', () => {
  // Service: ch_call_dict_to_call_schema_dict reads display_name through empty_str_to_none
  // (trace_server_common.py: `return val if val != "" else None`).
  it('reads an empty display name (from the start or from call/update) as null', async () => {
    const p = project();
    const a = spanId();
    await upsert([startItem(start(p, a, { display_name: '' }))]);
    expect((await read(p, a)).display_name).toBeNull();
    const b = spanId();
    await upsert([startItem(start(p, b, { display_name: 'named' }))]);
    await post(server.url, '/call/update', { project_id: p, call_id: b, display_name: '' });
    const call = await read(p, b);
    expect(call.display_name).toBeNull();
    expect(call.summary.weave.trace_name).toBe('answer');
  });

  // Service: trace_server_common.make_derived_summary_fields: `if exception: status = ERROR`
  // (an empty text is falsy), so an ended call whose exception is "" reads as success.
  it('does not read an ended call whose exception is "" as an error', async () => {
    const p = project();
    const id = spanId();
    await upsert([startItem(start(p, id)), endItem(end(p, id, { exception: '' }))]);
    expect((await read(p, id)).summary.weave.status).toBe('success');
  });
});
