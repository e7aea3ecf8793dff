/**
 * The app shell over real HTTP: authentication, authorization, and every error status of
 * SPEC §2.5, including hostile input that must never produce a 500.
 */
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    users: [
      { username: 'alice', password: 'secret', entities: ['acme'] },
      { username: 'bob', password: 'pw2', entities: ['other', 'acme2'] },
    ],
    maxBodyBytes: 1024 * 1024,
  });
});
afterAll(async () => {
  await server.close();
});

const SPAN = '00000000000000a1';
const readBody = { project_id: 'acme/demo', id: SPAN };

async function raw(path: string, init: RequestInit & { auth?: boolean } = {}): Promise<{ status: number; headers: Headers; body: any }> {
  const headers = new Headers(init.headers);
  if (init.auth !== false) headers.set('authorization', basicAuth(server));
  const response = await fetch(server.url + path, { method: 'POST', ...init, headers });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // leave as text
  }
  return { status: response.status, headers: response.headers, body };
}

describe('authentication', () => {
  it('answers GET /health without credentials', async () => {
    const response = await fetch(`${server.url}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  it('answers GET /server_info with the version, only with credentials', async () => {
    const ok = await raw('/server_info', { method: 'GET' });
    expect(ok.status).toBe(200);
    expect(typeof ok.body.trace_server_version).toBe('string');
    expect((await raw('/server_info', { method: 'GET', auth: false })).status).toBe(401);
  });

  it.each([
    ['no header', undefined],
    ['wrong password', basicAuth({ username: 'dev', password: 'pwx' })],
    ['unknown user', basicAuth({ username: 'mallory', password: 'pw' })],
    ['password of another user', basicAuth({ username: 'alice', password: 'pw' })],
    ['empty credentials', basicAuth({ username: '', password: '' })],
    ['not Basic', 'Bearer abc'],
    ['not base64', 'Basic !!!!'],
    ['valid credentials followed by junk after the padding', `${basicAuth({ username: 'bob', password: 'pw2' })}AAAA`],
    ['valid credentials followed by more padding', `${basicAuth({ username: 'alice', password: 'secret' })}==`],
    ['valid credentials without their padding', basicAuth({ username: 'bob', password: 'pw2' }).replace(/=+$/, '')],
    ['no colon', `Basic ${Buffer.from('devpw').toString('base64')}`],
    ['long garbage', `Basic ${'A'.repeat(10_000)}`],
  ])('answers 401 with WWW-Authenticate for %s', async (_name, authorization) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (authorization !== undefined) headers.authorization = authorization;
    const response = await raw('/call/read', { headers, body: JSON.stringify(readBody), auth: false });
    expect(response.status).toBe(401);
    expect(response.body).toEqual({ reason: 'Unauthorized' });
    expect(response.headers.get('www-authenticate')).toBe('Basic realm="callbridge"');
  });

  it('checks credentials before reading the body (401 even for an oversized body)', async () => {
    const response = await raw('/call/upsert_batch', {
      auth: false,
      headers: { 'content-type': 'application/json' },
      body: 'x'.repeat(2 * 1024 * 1024),
    });
    expect(response.status).toBe(401);
  });

  it('accepts a password containing colons and non-ASCII text', async () => {
    const special = await startTestServer({ users: [{ username: 'zoë', password: 'a:b:ç', entities: ['*'] }] });
    try {
      const response = await post(special.url, '/call/read', readBody, { username: 'zoë', password: 'a:b:ç' });
      expect(response.status).toBe(200);
    } finally {
      await special.close();
    }
  });
});

describe('authorization', () => {
  it('lets a user use only the entities it is granted', async () => {
    const alice = { username: 'alice', password: 'secret' };
    expect((await post(server.url, '/call/read', readBody, alice)).status).toBe(200);
    const denied = await post(server.url, '/call/read', { ...readBody, project_id: 'other/demo' }, alice);
    expect(denied.status).toBe(403);
    expect(denied.body).toEqual({ reason: 'Forbidden' });
    const bob = { username: 'bob', password: 'pw2' };
    expect((await post(server.url, '/call/read', { ...readBody, project_id: 'acme2/x' }, bob)).status).toBe(200);
    expect((await post(server.url, '/call/read', readBody, bob)).status).toBe(403);
  });

  it.each(['acme', 'acme/', '/demo', 'acme/demo/x', 'acme demo/x', '', 'a/b c'])(
    'answers 400 for the malformed project_id %j',
    async (projectId) => {
      const response = await post(server.url, '/call/read', { ...readBody, project_id: projectId });
      expect(response.status).toBe(400);
      expect(typeof response.body.reason).toBe('string');
    },
  );
});

describe('errors', () => {
  it('answers 404 with a reason for an unknown route or method', async () => {
    const unknown = await post(server.url, '/no/such/route', {});
    expect(unknown.status).toBe(404);
    expect(typeof unknown.body.reason).toBe('string');
    expect((await raw('/call/read', { method: 'GET' })).status).toBe(404);
  });

  it('answers 413 for a body over the limit, by Content-Length or by bytes received', async () => {
    const big = JSON.stringify({ batch: [], pad: 'x'.repeat(1024 * 1024) });
    const response = await raw('/call/upsert_batch', { headers: { 'content-type': 'application/json' }, body: big });
    expect(response.status).toBe(413);
    expect(response.body).toEqual({ reason: 'Request too large' });
    // Chunked (no Content-Length): the limit is enforced while reading.
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(big));
        controller.close();
      },
    });
    const chunked = await raw('/call/upsert_batch', {
      headers: { 'content-type': 'application/json' },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
  });

  it.each([
    ['text/plain', 'hello'],
    ['application/xml', '<a/>'],
    ['application/x-www-form-urlencoded', 'a=1'],
    ['application/octet-stream', 'bytes'],
  ])('answers 415 for a %s body', async (contentType, body) => {
    const response = await raw('/call/read', { headers: { 'content-type': contentType }, body });
    expect(response.status).toBe(415);
    expect(typeof response.body.reason).toBe('string');
  });

  describe('Content-Encoding', () => {
    const gzipped = (value: unknown): Buffer => gzipSync(Buffer.from(JSON.stringify(value)));
    const json = { 'content-type': 'application/json' };

    it('reads a gzipped JSON body, on the verbatim upsert path and the parsed one', async () => {
      const id = '00000000000000c1';
      const start = { project_id: 'acme/gz', id, trace_id: '0'.repeat(31) + '2', op_name: 'zipped', started_at: '2026-01-02T03:04:05Z', attributes: {}, inputs: { x: 'é' } };
      const upsert = await raw('/call/upsert_batch', {
        headers: { ...json, 'content-encoding': 'gzip' },
        body: gzipped({ batch: [{ mode: 'start', req: { start } }] }),
      });
      expect(upsert.status).toBe(200);
      const read = await raw('/call/read', { headers: { ...json, 'content-encoding': 'GZIP' }, body: gzipped({ project_id: 'acme/gz', id }) });
      expect(read.status).toBe(200);
      expect(read.body.call).toMatchObject({ op_name: 'zipped', inputs: { x: 'é' } });
    });

    it('answers 400 for a malformed gzip body and for gzipped bytes that are not UTF-8', async () => {
      const malformed = await raw('/call/read', { headers: { ...json, 'content-encoding': 'gzip' }, body: Buffer.from([0x1f, 0x8b, 1, 2, 3]) });
      expect(malformed).toMatchObject({ status: 400, body: { reason: 'Malformed gzip body' } });
      const latin1 = await raw('/call/read', { headers: { ...json, 'content-encoding': 'gzip' }, body: gzipSync(Buffer.from([0x7b, 0xe9, 0x7d])) });
      expect(latin1).toMatchObject({ status: 400, body: { reason: 'Malformed JSON body: not valid UTF-8' } });
    });

    it('answers 413 for a gzipped body that inflates past the body limit (a gzip bomb)', async () => {
      const bomb = gzipSync(Buffer.from(`{"project_id":"acme/gz","pad":"${'a'.repeat(2 * 1024 * 1024)}"}`));
      expect(bomb.length).toBeLessThan(64 * 1024);
      const response = await raw('/call/read', { headers: { ...json, 'content-encoding': 'gzip' }, body: bomb });
      expect(response).toMatchObject({ status: 413, body: { reason: 'Request too large' } });
    });

    it.each(['br', 'deflate', 'gzip, br', 'compress'])('answers 415 for Content-Encoding %j, naming it', async (coding) => {
      const response = await raw('/call/read', { headers: { ...json, 'content-encoding': coding }, body: JSON.stringify(readBody) });
      expect(response.status).toBe(415);
      expect(response.body.reason).toBe(`Unsupported Content-Encoding ${JSON.stringify(coding)}: send gzip or no encoding`);
    });

    it('answers 415 for a gzipped multipart upload, which cannot be read', async () => {
      const form = new FormData();
      form.set('project_id', 'acme/gz');
      form.set('file', new Blob(['hello']), 'a.txt');
      const request = new Request(server.url + '/file/create', { method: 'POST', body: form });
      const response = await raw('/file/create', {
        headers: { 'content-type': request.headers.get('content-type')!, 'content-encoding': 'gzip' },
        body: gzipSync(Buffer.from(await request.arrayBuffer())),
      });
      expect(response.status).toBe(415);
      expect(response.body.reason).toMatch(/Content-Encoding for multipart/);
    });
  });

  it('accepts application/json with a charset', async () => {
    const response = await raw('/call/read', {
      headers: { 'content-type': 'application/json; charset=utf-8' },
      body: JSON.stringify(readBody),
    });
    expect(response.status).toBe(200);
  });

  it('accepts a body that starts with a UTF-8 byte order mark, and keeps one inside strings', async () => {
    const id = '00000000000000b2';
    const start = { project_id: 'acme/bom', id, trace_id: '0'.repeat(31) + '1', op_name: '\ufeffop', started_at: '2026-01-02T03:04:05Z', attributes: {}, inputs: {} };
    const bytes = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ batch: [{ mode: 'start', req: { start } }] }))]);
    const response = await raw('/call/upsert_batch', { headers: { 'content-type': 'application/json' }, body: bytes });
    expect(response.status).toBe(200);
    const read = await post(server.url, '/call/read', { project_id: 'acme/bom', id });
    expect(read.body.call.op_name).toBe('\ufeffop');
  });

  it.each(['{', '{"project_id": }', "{'a': 1}", '[1,2', '{"a":1}x', '\u0000'])('answers 400 for malformed JSON %j', async (text) => {
    const response = await post(server.url, '/call/read', text);
    expect(response.status).toBe(400);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers 400 for an empty JSON body, and 422 naming an unknown __proto__ key in a closed body', async () => {
    expect((await post(server.url, '/call/read', '')).status).toBe(400);
    const poisoned = await post(server.url, '/call/read', '{"project_id":"acme/demo","id":"00000000000000a1","__proto__":{"x":1}}');
    expect(poisoned.status).toBe(422);
    expect(poisoned.body.detail[0]).toMatchObject({ type: 'extra_forbidden', loc: ['body', '__proto__'] });
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it('answers 422 in pydantic shape for a body that breaks the schema', async () => {
    const response = await post(server.url, '/call/read', { project_id: 5 });
    expect(response.status).toBe(422);
    expect(response.body.detail).toEqual(
      expect.arrayContaining([
        { type: 'string_type', loc: ['body', 'project_id'], msg: 'Input should be a valid string', input: 5 },
        { type: 'missing', loc: ['body', 'id'], msg: 'Field required', input: { project_id: 5 } },
      ]),
    );
  });

  it('answers 422 for a JSON body that is not an object', async () => {
    for (const body of ['[]', '"text"', '42', 'null']) {
      const response = await post(server.url, '/call/read', body);
      expect(response.status).toBe(422);
      expect(response.body.detail[0].loc[0]).toBe('body');
    }
  });

  it('never answers 500 or leaks internals for hostile values', async () => {
    const hostile: unknown[] = [
      { project_id: "acme/demo'; DROP TABLE calls; --", id: SPAN },
      { project_id: 'acme/demo', id: "' OR 1=1 --" },
      { project_id: 'acme/demo', id: SPAN, include_costs: 'yes' },
      { project_id: ['acme/demo'], id: { $ne: null } },
      { project_id: 'acme/demo', id: 'x'.repeat(100_000) },
      { project_id: 'acme/demo', id: '\ud800' },
    ];
    for (const body of hostile) {
      const response = await post(server.url, '/call/read', body);
      expect(response.status).toBeGreaterThanOrEqual(400);
      expect(response.status).toBeLessThan(500);
      expect(response.text).not.toMatch(/at .*\.(ts|js):\d+|SQLITE|sqlite|node_modules/);
      expect(response.text.length).toBeLessThan(10_000);
    }
    // The table is still there.
    expect((await post(server.url, '/call/read', readBody)).status).toBe(200);
  });

  it('answers 400, not 500, for values nested too deeply to store', async () => {
    const depth = 200_000;
    const nested = '['.repeat(depth) + ']'.repeat(depth);
    const text = `{"start":{"project_id":"acme/demo","op_name":"deep","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{"x":${nested}}}}`;
    const response = await post(server.url, '/call/start', text);
    expect(response.status).toBe(400);
    expect(response.body.reason).toMatch(/nested deeper than 500 levels/);
  });
});
