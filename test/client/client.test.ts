import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it, vi } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import {
  AuthError,
  CallbridgeError,
  CallbridgeHttpError,
  NetworkError,
  NotFoundError,
  RequestRejectedError,
  ServerError,
  TimeoutError,
  UnexpectedResponseError,
} from '../../src/errors.js';
import type { Call, UpsertItem } from '../../src/wire/calls.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startScriptedServer } from './scripted-server.js';

const project = 'acme/demo';
let server: TestServer;
let client: CallbridgeClient;
let spanCounter = 0;

beforeAll(async () => {
  server = await startTestServer({ users: [{ username: 'outsider', password: 'pw2', entities: ['other'] }] });
  client = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
});

afterAll(async () => {
  await client.close();
  await server.close();
});

afterEach(() => {
  vi.unstubAllEnvs();
});

function nextSpanId(): string {
  spanCounter += 1;
  return spanCounter.toString(16).padStart(16, '0');
}

const traceId = 'ab'.repeat(16);

function startItem(id: string, opName = 'op.test', extra: Record<string, unknown> = {}): UpsertItem {
  return {
    mode: 'start',
    req: {
      start: {
        project_id: project,
        id,
        trace_id: traceId,
        op_name: opName,
        started_at: '2026-01-02T03:04:05.000000Z',
        attributes: {},
        inputs: { question: 'why?' },
        ...extra,
      },
    },
  };
}

function endItem(id: string): UpsertItem {
  return {
    mode: 'end',
    req: { end: { project_id: project, id, ended_at: '2026-01-02T03:04:06.500000Z', summary: {}, output: 'because' } },
  };
}

async function expectRejection<T extends Error>(promise: Promise<unknown>, type: new (...args: never[]) => T): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(type);
  return error as T;
}

describe('client: calls', () => {
  it('callStart + callEnd + callRead round-trip one call', async () => {
    const id = nextSpanId();
    const started = await client.callStart({ start: (startItem(id) as Extract<UpsertItem, { mode: 'start' }>).req.start });
    expect(started).toEqual({ id, trace_id: traceId });
    expect(await client.callEnd({ end: (endItem(id) as Extract<UpsertItem, { mode: 'end' }>).req.end })).toEqual({});
    const { call } = await client.callRead({ project_id: project, id });
    expect(call).toMatchObject({ id, op_name: 'op.test', inputs: { question: 'why?' }, output: 'because', wb_user_id: 'dev' });
    expect(call?.summary.weave).toMatchObject({ status: 'success', latency_ms: 1500 });
  });

  it('callRead of an unknown id is {call: null}, not an error', async () => {
    expect(await client.callRead({ project_id: project, id: 'f'.repeat(16) })).toEqual({ call: null });
  });

  it('callUpsertBatch answers one entry per item, in order', async () => {
    const id = nextSpanId();
    const answer = await client.callUpsertBatch({ batch: [startItem(id), endItem(id)] });
    expect(answer).toEqual({ res: [{ id, trace_id: traceId }, {}] });
  });

  it('a bad call id is a RequestRejectedError with the server reason', async () => {
    const error = await expectRejection(client.callUpsertBatch({ batch: [startItem('NOT-AN-ID')] }), RequestRejectedError);
    expect(error.status).toBe(400);
    expect(error.code).toBe('CALLBRIDGE_REQUEST_REJECTED');
    expect(error.url).toBe(`${server.url}/call/upsert_batch`);
    expect(error.reason).not.toBe('');
    expect(error.retryable).toBe(false);
  });

  it('an unknown envelope key is a 422 RequestRejectedError carrying the detail list', async () => {
    const hostile = { batch: [{ ...startItem(nextSpanId()), extra: true }] } as never;
    const error = await expectRejection(client.callUpsertBatch(hostile), RequestRejectedError);
    expect(error.status).toBe(422);
    expect(Array.isArray(error.detail)).toBe(true);
    expect((error.detail as Array<{ loc: unknown[] }>)[0]?.loc[0]).toBe('body');
  });

  it('a body JSON cannot carry (a cycle, a bigint) rejects with a CallbridgeError naming the endpoint, without sending', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const error = await expectRejection(client.callRead(cyclic as never), CallbridgeError);
    expect(error).toMatchObject({ code: 'CALLBRIDGE_INVALID_REQUEST' });
    expect(error.message).toContain(`${server.url}/call/read cannot be sent as JSON`);
    const big = await expectRejection(client.objCreate({ obj: { project_id: project, object_id: 'o', val: { n: 1n } } } as never), CallbridgeError);
    expect(big.code).toBe('CALLBRIDGE_INVALID_REQUEST');
    const streamed = await expectRejection(client.callsQuery(cyclic as never), CallbridgeError);
    expect(streamed.code).toBe('CALLBRIDGE_INVALID_REQUEST');
  });

  it('callsStreamQuery streams calls; callsQuery collects them; filters and sort apply', async () => {
    const ids = [nextSpanId(), nextSpanId(), nextSpanId()];
    await client.callUpsertBatch({ batch: ids.flatMap((id) => [startItem(id, 'op.streamed'), endItem(id)]) });
    const streamed: string[] = [];
    for await (const call of client.callsStreamQuery({ project_id: project, filter: { op_names: ['op.streamed'] } })) {
      streamed.push(call.id);
    }
    expect(streamed).toEqual(ids);
    const descending = await client.callsQuery({
      project_id: project,
      filter: { op_names: ['op.streamed'] },
      sort_by: [{ field: 'id', direction: 'desc' }],
      limit: 2,
    });
    expect(descending.map((call) => call.id)).toEqual([ids[2], ids[1]]);
  });

  it('types the calls a query answers by its columns, as the server answers them', async () => {
    const id = nextSpanId();
    await client.callUpsertBatch({ batch: [startItem(id, 'op.columns'), endItem(id)] });
    const filter = { op_names: ['op.columns'] };
    const [picked] = await client.callsQuery({ project_id: project, filter, columns: ['inputs.question', 'output'] });
    type Picked = Pick<Call, 'id' | 'project_id' | 'op_name' | 'trace_id' | 'started_at' | 'inputs' | 'output'>;
    expectTypeOf(picked!).toEqualTypeOf<Picked>();
    expect(picked).toMatchObject({ inputs: { question: 'why?' }, output: 'because' });
    // @ts-expect-error: not among the columns, so only its default (null) is in the answer
    expect(picked!.summary).toBeNull();
    for await (const call of client.callsStreamQuery({ project_id: project, filter, columns: ['summary.weave.status'] })) {
      expectTypeOf(call.summary).toEqualTypeOf<Call['summary']>();
      expect(call.summary.weave.status).toBe('success');
    }
    // No columns, or an empty list: whole calls. Columns known only as strings: maybe any field.
    expectTypeOf((await client.callsQuery({ project_id: project, filter }))[0]!).toEqualTypeOf<Call>();
    expectTypeOf((await client.callsQuery({ project_id: project, filter, columns: [] }))[0]!).toEqualTypeOf<Call>();
    // The method's type without arguments (the demo types its calls this way) gives whole calls too.
    expectTypeOf<Awaited<ReturnType<CallbridgeClient['callsQuery']>>[number]>().toEqualTypeOf<Call>();
    const named: string[] = ['output'];
    const [loose] = await client.callsQuery({ project_id: project, filter, columns: named });
    expectTypeOf(loose!.id).toEqualTypeOf<string>();
    expectTypeOf(loose!.output).toEqualTypeOf<unknown>();
    expect(loose!.output).toBe('because');
  });

  it('breaking out of a stream early releases the connection and the client stays usable', async () => {
    const ids = [nextSpanId(), nextSpanId(), nextSpanId()];
    await client.callUpsertBatch({ batch: ids.flatMap((id) => [startItem(id, 'op.early'), endItem(id)]) });
    for await (const call of client.callsStreamQuery({ project_id: project, filter: { op_names: ['op.early'] } })) {
      expect(call.id).toBe(ids[0]);
      break;
    }
    expect(await client.callsQuery({ project_id: project, filter: { op_names: ['op.early'] } })).toHaveLength(3);
  });

  it('a query on an unknown field is a 400; a broken $expr is a 422 — both before the first call', async () => {
    const unknownField = { project_id: project, query: { $expr: { $eq: [{ $getField: 'no_such_field' }, { $literal: 1 }] } } };
    const bad = await expectRejection(client.callsQuery(unknownField), RequestRejectedError);
    expect(bad.status).toBe(400);
    const broken = { project_id: project, query: { $expr: { $bogus: [] } } };
    const invalid = await expectRejection(client.callsQuery(broken), RequestRejectedError);
    expect(invalid.status).toBe(422);
  });

  it('callsDelete deletes; the call then reads as null', async () => {
    const id = nextSpanId();
    await client.callUpsertBatch({ batch: [startItem(id), endItem(id)] });
    expect(await client.callsDelete({ project_id: project, call_ids: [id] })).toEqual({ num_deleted: 1 });
    expect(await client.callRead({ project_id: project, id })).toEqual({ call: null });
  });

  it('callUpdate renames a call', async () => {
    const id = nextSpanId();
    await client.callUpsertBatch({ batch: [startItem(id), endItem(id)] });
    expect(await client.callUpdate({ project_id: project, call_id: id, display_name: 'Renamed ✓' })).toEqual({});
    expect((await client.callRead({ project_id: project, id })).call?.display_name).toBe('Renamed ✓');
  });

  it('callsComplete takes its path from project_id and rejects one that is not entity/project', async () => {
    const id = nextSpanId();
    const completed = {
      project_id: project,
      id,
      trace_id: traceId,
      op_name: 'op.complete',
      started_at: '2026-01-02T03:04:05.000000Z',
      ended_at: '2026-01-02T03:04:05.250000Z',
      attributes: {},
      inputs: {},
      output: 1,
      summary: {},
    };
    expect(await client.callsComplete({ project_id: project, batch: [completed] })).toEqual({});
    expect((await client.callRead({ project_id: project, id })).call).toMatchObject({ op_name: 'op.complete', output: 1 });
    for (const projectId of ['nope', 'a/b/c', '/b', 'a/', 'a b/c', undefined, 5]) {
      const error = await expectRejection(client.callsComplete({ project_id: projectId, batch: [] } as never), CallbridgeError);
      expect(error.code).toBe('CALLBRIDGE_INVALID_PROJECT_ID');
    }
  });
});

describe('client: complete mode', () => {
  it('v1 writes are rejected with errorCode CALLS_COMPLETE_MODE_REQUIRED; callsComplete works', async () => {
    const completeServer = await startTestServer({ completeMode: true });
    const completeClient = createClient({ baseUrl: completeServer.url, username: 'dev', password: 'pw' });
    try {
      const id = nextSpanId();
      const error = await expectRejection(completeClient.callUpsertBatch({ batch: [startItem(id)] }), RequestRejectedError);
      expect(error).toMatchObject({ status: 400, errorCode: 'CALLS_COMPLETE_MODE_REQUIRED' });
      const completed = {
        project_id: project,
        id,
        trace_id: traceId,
        op_name: 'op.v2',
        started_at: '2026-01-02T03:04:05.000000Z',
        ended_at: '2026-01-02T03:04:06.000000Z',
        attributes: {},
        inputs: {},
      };
      expect(await completeClient.callsComplete({ project_id: project, batch: [completed] })).toEqual({});
      expect((await completeClient.callRead({ project_id: project, id })).call?.op_name).toBe('op.v2');
    } finally {
      await completeClient.close();
      await completeServer.close();
    }
  });
});

describe('client: objects', () => {
  it('objCreate, objRead (by digest, latest, v0), objsQuery', async () => {
    const created = await client.objCreate({ obj: { project_id: project, object_id: 'prompt', val: { text: 'hi', n: 1 } } });
    expect(created.object_id).toBe('prompt');
    expect(created.digest).toMatch(/^[A-Za-z0-9]{43}$/);
    const again = await client.objCreate({ obj: { project_id: project, object_id: 'prompt', val: { n: 1, text: 'hi' } } });
    expect(again.digest).toBe(created.digest);
    for (const digest of [created.digest, 'latest', 'v0']) {
      const { obj } = await client.objRead({ project_id: project, object_id: 'prompt', digest });
      expect(obj).toMatchObject({ digest: created.digest, val: { text: 'hi', n: 1 }, version_index: 0, is_latest: 1 });
    }
    const { objs } = await client.objsQuery({ project_id: project, filter: { object_ids: ['prompt'] } });
    expect(objs.map((obj) => obj.digest)).toEqual([created.digest]);
  });

  it('objRead of an absent object is a NotFoundError', async () => {
    const error = await expectRejection(
      client.objRead({ project_id: project, object_id: 'absent', digest: 'latest' }),
      NotFoundError,
    );
    expect(error).toBeInstanceOf(RequestRejectedError);
    expect(error).toMatchObject({ status: 404, code: 'CALLBRIDGE_NOT_FOUND', url: `${server.url}/obj/read` });
  });

  it('an invalid object_id is a 422 RequestRejectedError', async () => {
    const error = await expectRejection(
      client.objCreate({ obj: { project_id: project, object_id: 'has space/slash', val: 1 } }),
      RequestRejectedError,
    );
    expect(error.status).toBe(422);
  });
});

describe('client: feedback', () => {
  it('feedbackCreate, feedbackQuery with fields, feedbackPurge', async () => {
    const id = nextSpanId();
    await client.callUpsertBatch({ batch: [startItem(id), endItem(id)] });
    const weaveRef = `weave:///${project}/call/${id}`;
    const created = await client.feedbackCreate({
      project_id: project,
      weave_ref: weaveRef,
      feedback_type: 'note',
      payload: { note: 'good', score: 3 },
    });
    expect(created).toMatchObject({ wb_user_id: 'dev', payload: { note: 'good', score: 3 } });
    const query = { $expr: { $eq: [{ $getField: 'id' }, { $literal: created.id }] } };
    const { result } = await client.feedbackQuery({ project_id: project, query, fields: ['id', 'payload.score'] });
    expect(result).toEqual([{ id: created.id, 'payload.score': 3 }]);
    expect(await client.feedbackPurge({ project_id: project, query })).toEqual({});
    expect((await client.feedbackQuery({ project_id: project, query })).result).toEqual([]);
  });

  it('feedbackCreateBatch stores every record, and feedbackReplace puts a new record in place of one', async () => {
    const id = nextSpanId();
    await client.callUpsertBatch({ batch: [startItem(id), endItem(id)] });
    const weaveRef = `weave:///${project}/call/${id}`;
    const { res } = await client.feedbackCreateBatch({
      batch: [
        { project_id: project, weave_ref: weaveRef, feedback_type: 'wandb.reaction.1', payload: { emoji: '👍' } },
        { project_id: project, weave_ref: weaveRef, feedback_type: 'wandb.note.1', payload: { note: 'first' } },
      ],
    });
    expect(res.map((created) => created.payload)).toEqual([{ emoji: '👍' }, { note: 'first' }]);
    const replaced = await client.feedbackReplace({
      project_id: project,
      weave_ref: weaveRef,
      feedback_type: 'wandb.note.1',
      payload: { note: 'second' },
      feedback_id: res[1]!.id,
    });
    expect(replaced.id).not.toBe(res[1]!.id);
    const onCall = { $expr: { $eq: [{ $getField: 'weave_ref' }, { $literal: weaveRef }] } };
    const { result } = await client.feedbackQuery({ project_id: project, query: onCall, fields: ['id', 'payload'] });
    expect(result).toEqual([
      { id: res[0]!.id, payload: { emoji: '👍' } },
      { id: replaced.id, payload: { note: 'second' } },
    ]);
  });

  it('a weave_ref into another project is a 400 RequestRejectedError', async () => {
    const error = await expectRejection(
      client.feedbackCreate({
        project_id: project,
        weave_ref: `weave:///other/place/call/${'1'.repeat(16)}`,
        feedback_type: 'note',
        payload: {},
      }),
      RequestRejectedError,
    );
    expect(error.status).toBe(400);
  });
});

describe('client: token prices', () => {
  it('costCreate, costQuery with fields, costPurge', async () => {
    const { ids } = await client.costCreate({
      project_id: project,
      costs: { 'client-model': { prompt_token_cost: 0.25, completion_token_cost: 0.5, effective_date: '2020-01-01T00:00:00Z' } },
    });
    expect(ids).toEqual([[expect.any(String), 'client-model']]);
    const { results } = await client.costQuery({ project_id: project, fields: ['id', 'llm_id', 'prompt_token_cost'] });
    expect(results).toContainEqual(expect.objectContaining({ id: ids[0]![0], llm_id: 'client-model', prompt_token_cost: 0.25, effective_date: null }));
    expect(await client.costPurge({ project_id: project, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: ids[0]![0] }] } } })).toEqual({});
    expect((await client.costQuery({ project_id: project })).results.filter((r) => r.llm_id === 'client-model')).toEqual([]);
  });
});

describe('client: files', () => {
  it('fileCreate (multipart) and fileContent return the same bytes', async () => {
    const bytes = Uint8Array.from({ length: 70_000 }, (_value, index) => index % 256);
    const { digest } = await client.fileCreate({ project_id: project, name: 'blob.bin', content: bytes });
    expect(digest).toMatch(/^[A-Za-z0-9]{43}$/);
    const read = await client.fileContent({ project_id: project, digest });
    expect(Buffer.from(read).equals(Buffer.from(bytes))).toBe(true);
    const text = await client.fileCreate({ project_id: project, content: 'héllo' });
    expect(Buffer.from(await client.fileContent({ project_id: project, digest: text.digest })).toString('utf8')).toBe('héllo');
  });

  it('fileContent of an absent digest is a NotFoundError', async () => {
    await expectRejection(client.fileContent({ project_id: project, digest: 'A'.repeat(43) }), NotFoundError);
  });
});

describe('client: malformed requests to every endpoint', () => {
  const id = '0'.repeat(15) + 'a';
  const cases: Array<[string, (c: CallbridgeClient) => Promise<unknown>, number]> = [
    ['callStart with an over-long op_name', (c) => c.callStart({ start: { ...startedCall(id), op_name: 'x'.repeat(129) } }), 400],
    ['callEnd without summary', (c) => c.callEnd({ end: { project_id: project, id, ended_at: '2026-01-02T03:04:05Z' } as never }), 422],
    ['callRead without id', (c) => c.callRead({ project_id: project } as never), 422],
    ['callsQuery with a negative limit', (c) => c.callsQuery({ project_id: project, limit: -1 }), 422],
    ['callsDelete with call_ids not a list', (c) => c.callsDelete({ project_id: project, call_ids: 'all' as never }), 422],
    ['callUpdate without display_name', (c) => c.callUpdate({ project_id: project, call_id: id }), 400],
    ['callsComplete with an item missing ended_at', (c) => c.callsComplete({ project_id: project, batch: [startedCall(id) as never] }), 422],
    ['objRead with a bad object_id', (c) => c.objRead({ project_id: project, object_id: '../etc', digest: 'latest' }), 422],
    ['objsQuery with a bad sort direction', (c) => c.objsQuery({ project_id: project, sort_by: [{ field: 'created_at', direction: 'up' as never }] }), 422],
    ['feedbackQuery on an unknown field', (c) => c.feedbackQuery({ project_id: project, fields: ['no_such_field'] }), 400],
    ['feedbackCreateBatch with a record missing payload', (c) => c.feedbackCreateBatch({ batch: [{ project_id: project, weave_ref: 'x', feedback_type: 'note' } as never] }), 422],
    ['feedbackReplace without feedback_id', (c) => c.feedbackReplace({ project_id: project, weave_ref: `weave:///${project}/call/${id}`, feedback_type: 'note', payload: {} } as never), 422],
    ['costCreate with a negative price', (c) => c.costCreate({ project_id: project, costs: { m: { prompt_token_cost: -1, completion_token_cost: 0 } } }), 400],
    ['costQuery with an unknown field', (c) => c.costQuery({ project_id: project, fields: ['nope'] }), 400],
    ['costPurge without a query', (c) => c.costPurge({ project_id: project } as never), 422],
    ['feedbackPurge with a query that is not by id', (c) => c.feedbackPurge({ project_id: project, query: { $expr: { $eq: [{ $getField: 'feedback_type' }, { $literal: 'x' }] } } }), 400],
    ['fileContent without digest', (c) => c.fileContent({ project_id: project } as never), 422],
  ];

  it.each(cases)('%s is a RequestRejectedError', async (_name, call, status) => {
    const error = await expectRejection(call(client), RequestRejectedError);
    expect(error.status).toBe(status);
    expect(error.reason).not.toBe('');
  });

  it('fileCreate for a project_id that is not "entity/project" is a RequestRejectedError', async () => {
    const error = await expectRejection(client.fileCreate({ project_id: 'no-slash', content: 'x' }), RequestRejectedError);
    expect(error.status).toBeGreaterThanOrEqual(400);
    expect(error.status).toBeLessThan(500);
  });
});

function startedCall(id: string) {
  return (startItem(id) as Extract<UpsertItem, { mode: 'start' }>).req.start;
}

describe('client: health, server info, auth', () => {
  it('health answers without credentials; serverInfo with them', async () => {
    const anonymous = createClient({ baseUrl: server.url, username: 'nobody', password: 'wrong' });
    try {
      expect(await anonymous.health()).toEqual({ status: 'ok' });
    } finally {
      await anonymous.close();
    }
    expect(typeof (await client.serverInfo()).trace_server_version).toBe('string');
  });

  it('wrong credentials are an AuthError (401) naming the URL and user, never the password', async () => {
    const wrong = createClient({ baseUrl: server.url, username: 'dev', password: 'not-the-password' });
    try {
      const error = await expectRejection(wrong.callRead({ project_id: project, id: nextSpanId() }), AuthError);
      expect(error).toMatchObject({ status: 401, code: 'CALLBRIDGE_AUTH', url: `${server.url}/call/read` });
      expect(error.message).toContain(`${server.url}/call/read`);
      expect(error.message).toContain('"dev"');
      expect(error.message).not.toContain('not-the-password');
    } finally {
      await wrong.close();
    }
  });

  it('a project outside the user’s entities is an AuthError (403)', async () => {
    const outsider = createClient({ baseUrl: server.url, username: 'outsider', password: 'pw2' });
    try {
      const error = await expectRejection(outsider.callRead({ project_id: project, id: nextSpanId() }), AuthError);
      expect(error.status).toBe(403);
    } finally {
      await outsider.close();
    }
  });

  it('resolves the connection from the environment when no option is given', async () => {
    vi.stubEnv('CALLBRIDGE_BASE_URL', server.url);
    vi.stubEnv('CALLBRIDGE_USERNAME', 'dev');
    vi.stubEnv('CALLBRIDGE_PASSWORD', 'pw');
    const fromEnv = createClient();
    try {
      expect(fromEnv.baseUrl).toBe(server.url);
      expect(await fromEnv.callRead({ project_id: project, id: nextSpanId() })).toEqual({ call: null });
    } finally {
      await fromEnv.close();
    }
  });
});

describe('client: transport failures as error classes', () => {
  it('a refused connection is a retryable NetworkError with the socket error as cause', async () => {
    const scripted = await startScriptedServer(() => {});
    await scripted.close();
    const offline = createClient({ baseUrl: scripted.url });
    try {
      const error = await expectRejection(offline.health(), NetworkError);
      expect(error).toMatchObject({ code: 'CALLBRIDGE_NETWORK', retryable: true, errorCode: 'ECONNREFUSED', status: undefined });
      expect(error.cause).toBeDefined();
    } finally {
      await offline.close();
    }
  });

  it('no answer within requestTimeoutMs is a TimeoutError', async () => {
    const scripted = await startScriptedServer(() => {});
    const slow = createClient({ baseUrl: scripted.url, requestTimeoutMs: 200 });
    try {
      const error = await expectRejection(slow.serverInfo(), TimeoutError);
      expect(error).toBeInstanceOf(NetworkError);
      expect(error).toMatchObject({ code: 'CALLBRIDGE_TIMEOUT', retryable: true });
    } finally {
      await slow.close();
      await scripted.close();
    }
  });

  it('a stream whose body stalls past requestTimeoutMs is a TimeoutError, with the rows read before it', async () => {
    const scripted = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.write(`${JSON.stringify({ id: 'a' })}\n`);
      // ...then nothing more, the connection left open.
    });
    const stalled = createClient({ baseUrl: scripted.url, requestTimeoutMs: 200 });
    const seen: string[] = [];
    try {
      const reading = (async () => {
        for await (const call of stalled.callsStreamQuery({ project_id: 'acme/demo' })) seen.push(call.id);
      })();
      const error = await expectRejection(reading, TimeoutError);
      expect(error).toMatchObject({ retryable: true, errorCode: 'UND_ERR_BODY_TIMEOUT' });
      expect(seen).toEqual(['a']);
    } finally {
      await stalled.close();
      await scripted.close();
    }
  });

  it('a 503 is a retryable ServerError with retryAfterMs; a 501 is a ServerError that is not', async () => {
    let status = 503;
    const scripted = await startScriptedServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json', 'retry-after': '4' });
      res.end('{"reason":"down for a bit"}');
    });
    const flaky = createClient({ baseUrl: scripted.url });
    try {
      const unavailable = await expectRejection(flaky.serverInfo(), ServerError);
      expect(unavailable).toMatchObject({ status: 503, retryable: true, retryAfterMs: 4000, reason: 'down for a bit' });
      status = 501;
      const unimplemented = await expectRejection(flaky.serverInfo(), ServerError);
      expect(unimplemented).toMatchObject({ status: 501, retryable: false });
    } finally {
      await flaky.close();
      await scripted.close();
    }
  });

  it('a 2xx that is not JSON, or a JSON lines stream with a broken line, is an UnexpectedResponseError', async () => {
    const scripted = await startScriptedServer((req, res) => {
      if (req.url === '/calls/stream_query') {
        res.writeHead(200, { 'content-type': 'application/jsonl' });
        res.end('{"id":"0000000000000001"}\n{"id": broken\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<html>captive portal</html>');
    });
    const confused = createClient({ baseUrl: scripted.url });
    try {
      const error = await expectRejection(confused.serverInfo(), UnexpectedResponseError);
      expect(error).toBeInstanceOf(CallbridgeHttpError);
      expect(error.reason).toContain('captive portal');
      const seen: unknown[] = [];
      const streamError = await expectRejection(
        (async () => {
          for await (const call of confused.callsStreamQuery({ project_id: project })) seen.push(call.id);
        })(),
        UnexpectedResponseError,
      );
      expect(seen).toEqual(['0000000000000001']);
      expect(streamError.reason).toContain('line 2');
    } finally {
      await confused.close();
      await scripted.close();
    }
  });

  it('a stream cut off mid-body is a NetworkError after the calls that did arrive', async () => {
    const scripted = await startScriptedServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.write('{"id":"0000000000000001"}\n{"id":"00', () => req.socket.destroy());
    });
    const cut = createClient({ baseUrl: scripted.url });
    try {
      const seen: unknown[] = [];
      const error = await expectRejection(
        (async () => {
          for await (const call of cut.callsStreamQuery({ project_id: project })) seen.push(call.id);
        })(),
        CallbridgeHttpError,
      );
      expect(seen).toEqual(['0000000000000001']);
      expect(error).toBeInstanceOf(NetworkError);
      expect(error.status).toBe(200);
    } finally {
      await cut.close();
      await scripted.close();
    }
  });

  it('the caller’s signal cancels a stream mid-body', async () => {
    const scripted = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.write('{"id":"0000000000000001"}\n');
    });
    const streaming = createClient({ baseUrl: scripted.url });
    const controller = new AbortController();
    try {
      const seen: unknown[] = [];
      const error = await expectRejection(
        (async () => {
          for await (const call of streaming.callsStreamQuery({ project_id: project }, { signal: controller.signal })) {
            seen.push(call.id);
            controller.abort();
          }
        })(),
        NetworkError,
      );
      expect(seen).toEqual(['0000000000000001']);
      expect(error.errorCode).toBe('CALLBRIDGE_ABORTED');
      // The caller cancelled it: not a failure that advises sending again.
      expect(error.retryable).toBe(false);
    } finally {
      await streaming.close();
      await scripted.close();
    }
  });

  it('a closed client rejects with a NetworkError that is not retryable', async () => {
    const closed = createClient({ baseUrl: server.url, username: 'dev', password: 'pw' });
    await closed.close();
    await closed.close();
    const error = await expectRejection(closed.health(), NetworkError);
    expect(error.retryable).toBe(false);
  });
});
