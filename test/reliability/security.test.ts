/**
 * Security promises of SPEC §2.5 tried as an attacker would: every route but `/health` behind
 * credentials (the routes enumerated from the app itself, so a new route is covered the day it is
 * added), no way for a user into another entity's project (any endpoint, `$expr`, `weave_ref`,
 * `call_ref`, the `calls/complete` path), error bodies without internals, and a server that listens
 * on 127.0.0.1 unless told otherwise.
 */
import { mkdtemp } from 'node:fs/promises';
import { connect } from 'node:net';
import { join } from 'node:path';
import { networkInterfaces, tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/server/app.js';
import { CLOSE_GRACE_MS, startServer } from '../../src/server/index.js';
import { openDatabase } from '../../src/server/store/db.js';
import { basicAuth, startTestServer, type TestServer } from '../helpers/server.js';
import { databaseDigest, expectCleanErrorBody, postScanned } from './support.js';

const SECRET = 'other/secret';
const OWN = 'acme/demo';
const SECRET_CALL = '5ec7e7000000000a';
const OWN_CALL = '0a0a0a0a0a0a0a0a';
const alice = { username: 'alice', password: 'alice-pw' };
const dev = { username: 'dev', password: 'pw' };

let server: TestServer;
let secretFeedbackId: string;
let secretFileDigest: string;

const startOf = (projectId: string, id: string) => ({
  project_id: projectId,
  id,
  trace_id: `${id}${id}`,
  op_name: 'op',
  started_at: '2026-01-01T00:00:00Z',
  attributes: {},
  inputs: { secret: projectId === SECRET },
});
const endOf = (projectId: string, id: string) => ({ project_id: projectId, id, ended_at: '2026-01-01T00:00:01Z', summary: {}, output: 'done' });

async function uploadFile(projectId: string, credentials: typeof dev): Promise<{ status: number; text: string }> {
  const form = new FormData();
  form.set('project_id', projectId);
  form.set('file', new Blob([Buffer.from(`bytes of ${projectId}`)]), 'f.txt');
  const response = await fetch(`${server.url}/file/create`, { method: 'POST', headers: { authorization: basicAuth(credentials) }, body: form });
  const text = await response.text();
  expectCleanErrorBody(response.status, text, projectId);
  return { status: response.status, text };
}

beforeAll(async () => {
  server = await startTestServer({ users: [{ ...alice, entities: ['acme'] }] });
  // The secret project, written by a user granted every entity.
  for (const projectId of [SECRET, OWN]) {
    const id = projectId === SECRET ? SECRET_CALL : OWN_CALL;
    const written = await postScanned(server.url, '/call/upsert_batch', {
      batch: [{ mode: 'start', req: { start: startOf(projectId, id) } }, { mode: 'end', req: { end: endOf(projectId, id) } }],
    }, dev);
    expect(written.status).toBe(200);
  }
  expect((await postScanned(server.url, '/obj/create', { obj: { project_id: SECRET, object_id: 'secret-obj', val: { k: 'v' } } }, dev)).status).toBe(200);
  const feedback = await postScanned(server.url, '/feedback/create', {
    project_id: SECRET,
    weave_ref: `weave:///${SECRET}/call/${SECRET_CALL}`,
    feedback_type: 'note',
    payload: { note: 'secret' },
  }, dev);
  secretFeedbackId = feedback.body.id;
  const file = await uploadFile(SECRET, dev);
  secretFileDigest = JSON.parse(file.text).digest;
});
afterAll(async () => server.close());

/** Every route of the app, read from Fastify's own table (not a list kept by hand). */
async function appRoutes(): Promise<Array<{ method: string; path: string }>> {
  const db = openDatabase(':memory:');
  const app = buildApp({ db, users: [], completeMode: false, maxBodyBytes: 1024, logger: false, maxConcurrentStreams: 1,
    idleTimeoutMs: 60_000, requestTimeoutMs: 120_000 });
  await app.ready();
  const table = app.printRoutes({ commonPrefix: false });
  await app.close();
  db.close();
  return [...table.matchAll(/(\/\S*) \(([^)]+)\)/g)].flatMap((match) =>
    (match[2] as string).split(',').map((method) => ({ method: method.trim(), path: match[1] as string })),
  );
}

describe('authentication on every route', () => {
  it('answers 401 with WWW-Authenticate on every route but GET /health, without or with wrong credentials', async () => {
    const routes = await appRoutes();
    const paths = new Set(routes.map((route) => route.path));
    // The enumeration did read the table: the known routes are all there.
    for (const known of ['/call/upsert_batch', '/calls/stream_query', '/obj/create', '/feedback/purge', '/file/create', '/server_info', '/v2/:entity/:project/calls/complete']) {
      expect(paths.has(known), known).toBe(true);
    }
    const checked: string[] = [];
    for (const { method, path } of routes) {
      const url = server.url + path.replace(':entity', 'acme').replace(':project', 'demo');
      if (path === '/health') {
        expect((await fetch(url, { method })).status).toBe(200);
        continue;
      }
      for (const authorization of [undefined, basicAuth({ username: 'alice', password: 'wrong' }), basicAuth({ username: 'nobody', password: 'alice-pw' })]) {
        const headers: Record<string, string> = { 'content-type': 'application/json' };
        if (authorization !== undefined) headers.authorization = authorization;
        const body = method === 'POST' ? JSON.stringify({ project_id: OWN }) : undefined;
        const response = await fetch(url, { method, headers, body });
        const text = await response.text();
        expect(response.status, `${method} ${path}`).toBe(401);
        expect(response.headers.get('www-authenticate')).toBe('Basic realm="callbridge"');
        if (method !== 'HEAD') expect(JSON.parse(text)).toEqual({ reason: 'Unauthorized' });
      }
      checked.push(`${method} ${path}`);
    }
    expect(checked.length).toBeGreaterThanOrEqual(17);
  });
});

describe("no way into another entity's project", () => {
  /** Bodies naming the secret project, one per JSON endpoint. */
  const INTO_SECRET: Array<[string, unknown]> = [
    ['/call/start', { start: startOf(SECRET, 'aaaaaaaaaaaaaaa1') }],
    ['/call/end', { end: endOf(SECRET, SECRET_CALL) }],
    ['/call/upsert_batch', { batch: [{ mode: 'end', req: { end: endOf(SECRET, SECRET_CALL) } }] }],
    [`/v2/${SECRET}/calls/complete`, { batch: [{ ...startOf(SECRET, 'aaaaaaaaaaaaaaa2'), ...endOf(SECRET, 'aaaaaaaaaaaaaaa2') }] }],
    ['/call/read', { project_id: SECRET, id: SECRET_CALL }],
    ['/calls/stream_query', { project_id: SECRET }],
    ['/calls/delete', { project_id: SECRET, call_ids: [SECRET_CALL] }],
    ['/call/update', { project_id: SECRET, call_id: SECRET_CALL, display_name: 'pwned' }],
    ['/obj/create', { obj: { project_id: SECRET, object_id: 'secret-obj', val: { k: 'overwritten' } } }],
    ['/obj/read', { project_id: SECRET, object_id: 'secret-obj', digest: 'latest' }],
    ['/objs/query', { project_id: SECRET }],
    ['/feedback/create', { project_id: SECRET, weave_ref: `weave:///${SECRET}/call/${SECRET_CALL}`, feedback_type: 'note', payload: {} }],
    ['/feedback/query', { project_id: SECRET }],
    ['/feedback/purge', { project_id: SECRET, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: 'x' }] } } }],
    ['/file/content', { project_id: SECRET, digest: 'x' }],
  ];

  it('answers 403 on every endpoint that names the project, including multipart and mixed batches; nothing changes', async () => {
    const before = databaseDigest(server.dbPath);
    for (const [path, body] of INTO_SECRET) {
      const response = await postScanned(server.url, path, body, alice);
      expect(response.status, path).toBe(403);
      expect(response.body).toEqual({ reason: 'Forbidden' });
    }
    expect((await uploadFile(SECRET, alice)).status).toBe(403);
    // A batch that starts in the user's own project and ends in the secret one: refused whole.
    const mixed = await postScanned(server.url, '/call/upsert_batch', {
      batch: [{ mode: 'start', req: { start: startOf(OWN, 'aaaaaaaaaaaaaaa3') } }, { mode: 'end', req: { end: endOf(SECRET, SECRET_CALL) } }],
    }, alice);
    expect(mixed.status).toBe(403);
    expect(databaseDigest(server.dbPath)).toBe(before);
  });

  it('refuses a calls/complete body whose project differs from the path, and a path into the project', async () => {
    const before = databaseDigest(server.dbPath);
    const call = { ...startOf(SECRET, 'aaaaaaaaaaaaaaa4'), ...endOf(SECRET, 'aaaaaaaaaaaaaaa4') };
    const smuggled = await postScanned(server.url, `/v2/${OWN}/calls/complete`, { batch: [call] }, alice);
    expect(smuggled.status).toBe(400);
    expect(smuggled.body.reason).toMatch(/does not match the project in the path/);
    // The same with the path percent-encoded to look like the secret project from inside the user's entity.
    const encoded = await postScanned(server.url, '/v2/acme/..%2F..%2Fother%2Fsecret/calls/complete', { batch: [call] }, alice);
    expect(encoded.status).toBeGreaterThanOrEqual(400);
    expect(encoded.status).toBeLessThan(500);
    expect(databaseDigest(server.dbPath)).toBe(before);
  });

  it('keeps $expr inside the project: always-true $or, project_id comparisons, purge by a foreign id', async () => {
    const alwaysTrue = { $eq: [{ $literal: 1 }, { $literal: 1 }] };
    const escapes = [
      { $or: [alwaysTrue, alwaysTrue] },
      { $or: [{ $eq: [{ $getField: 'project_id' }, { $literal: SECRET }] }, alwaysTrue] },
      { $not: [{ $eq: [{ $getField: 'project_id' }, { $literal: OWN }] }] },
      { $in: [{ $getField: 'project_id' }, [{ $literal: SECRET }, { $literal: OWN }]] },
      { $contains: { input: { $getField: 'project_id' }, substr: { $literal: '/' } } },
    ];
    for (const expr of escapes) {
      const calls = await postScanned(server.url, '/calls/stream_query', { project_id: OWN, query: { $expr: expr } }, alice);
      expect(calls.status).toBe(200);
      const projects = calls.text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line).project_id);
      expect(projects.every((project) => project === OWN), JSON.stringify(expr)).toBe(true);
      const feedback = await postScanned(server.url, '/feedback/query', { project_id: OWN, query: { $expr: expr } }, alice);
      expect(feedback.status).toBe(200);
      expect(feedback.body.result.every((record: { project_id: string }) => record.project_id === OWN)).toBe(true);
    }
    const before = databaseDigest(server.dbPath);
    const purge = await postScanned(server.url, '/feedback/purge', { project_id: OWN, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: secretFeedbackId }] } } }, alice);
    expect(purge.status).toBe(200);
    expect(databaseDigest(server.dbPath)).toBe(before);
  });

  it('does not reach foreign records by id from the own project: read, delete, update, object, file', async () => {
    const before = databaseDigest(server.dbPath);
    expect((await postScanned(server.url, '/call/read', { project_id: OWN, id: SECRET_CALL }, alice)).body).toEqual({ call: null });
    expect((await postScanned(server.url, '/obj/read', { project_id: OWN, object_id: 'secret-obj', digest: 'latest' }, alice)).status).toBe(404);
    expect((await postScanned(server.url, '/file/content', { project_id: OWN, digest: secretFileDigest }, alice)).status).toBe(404);
    const filter = { call_ids: [SECRET_CALL], trace_ids: [`${SECRET_CALL}${SECRET_CALL}`] };
    expect((await postScanned(server.url, '/calls/stream_query', { project_id: OWN, filter }, alice)).text).toBe('');
    expect(databaseDigest(server.dbPath)).toBe(before);
    // A delete or a rename of an id the own project has no call for is kept for the own project's
    // call of that id, should its parts arrive later (SPEC §2.1: any order); the foreign call of
    // that id is not touched, and nothing of it shows in the own project.
    expect((await postScanned(server.url, '/calls/delete', { project_id: OWN, call_ids: [SECRET_CALL] }, alice)).body).toEqual({ num_deleted: 0 });
    expect((await postScanned(server.url, '/call/update', { project_id: OWN, call_id: SECRET_CALL, display_name: 'pwned' }, alice)).body).toEqual({});
    expect((await postScanned(server.url, '/calls/stream_query', { project_id: OWN, filter }, alice)).text).toBe('');
    const secret = await postScanned(server.url, '/call/read', { project_id: SECRET, id: SECRET_CALL }, dev);
    expect(secret.body.call).toMatchObject({ id: SECRET_CALL, display_name: null, deleted_at: null });
  });

  it('refuses feedback whose weave_ref or call_ref points into another project', async () => {
    const before = databaseDigest(server.dbPath);
    const foreignRef = `weave:///${SECRET}/call/${SECRET_CALL}`;
    const ownRef = `weave:///${OWN}/call/${OWN_CALL}`;
    for (const body of [
      { project_id: OWN, weave_ref: foreignRef, feedback_type: 'note', payload: {} },
      { project_id: OWN, weave_ref: ownRef, call_ref: foreignRef, feedback_type: 'note', payload: {} },
      { project_id: OWN, weave_ref: ownRef, annotation_ref: `weave:///${SECRET}/object/secret-obj:latest`, feedback_type: 'note', payload: {} },
      { project_id: OWN, weave_ref: `weave:///ACME/demo/call/${OWN_CALL}`, feedback_type: 'note', payload: {} },
    ]) {
      const response = await postScanned(server.url, '/feedback/create', body, alice);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect(response.body.reason).toMatch(/points outside project|must be/);
    }
    expect(databaseDigest(server.dbPath)).toBe(before);
  });
});

describe('where the server listens', () => {
  it('binds 127.0.0.1 when no host is given, so other interfaces are refused', async () => {
    const running = await startServer({ port: 0, dbPath: ':memory:', users: [{ ...dev, entities: ['*'] }] });
    try {
      const url = new URL(running.url);
      expect(url.hostname).toBe('127.0.0.1');
      expect((await fetch(`${running.url}/health`)).status).toBe(200);
      const external = Object.values(networkInterfaces())
        .flat()
        .find((address) => address !== undefined && address.family === 'IPv4' && !address.internal);
      if (external !== undefined) {
        const refused = await new Promise<string>((resolve) => {
          const socket = connect({ host: external.address, port: Number(url.port) });
          socket.once('connect', () => {
            socket.destroy();
            resolve('connected');
          });
          socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
        });
        expect(refused).toBe('ECONNREFUSED');
      }
    } finally {
      await running.close();
    }
  });
});

/**
 * A raw connection that sends `head` (and nothing more, or what `then` sends) and reports how it
 * ends: the response's first line and whether the server closed the socket within `withinMs`.
 */
async function holdConnection(url: string, head: string, withinMs: number): Promise<{ status: string; closedByServer: boolean }> {
  const { hostname, port } = new URL(url);
  const socket = connect({ host: hostname, port: Number(port) });
  let received = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {});
  socket.write(head);
  const closedByServer = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), withinMs);
    socket.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
  socket.destroy();
  return { status: received.split('\r\n', 1)[0] ?? '', closedByServer };
}

describe('connections a client holds (slow bodies, stalled readers)', () => {
  it('answers a request without credentials 401 and closes the connection, without reading the body it announced', async () => {
    const held = await holdConnection(server.url, 'POST /call/start HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{', 2000);
    expect(held).toEqual({ status: 'HTTP/1.1 401 Unauthorized', closedByServer: true });
  });

  it('reads a body within the limit after a 401, so a client still sending sees the 401, not a reset', async () => {
    const body = JSON.stringify({ batch: [], padding: 'x'.repeat(8 * 1024 * 1024) });
    for (const credentials of [undefined, basicAuth({ username: 'dev', password: 'wrong' })]) {
      const response = await fetch(`${server.url}/call/upsert_batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(credentials === undefined ? {} : { authorization: credentials }) },
        body,
      });
      expect(response.status).toBe(401);
      await response.arrayBuffer();
    }
  });

  it('ends a request whose body trickles past requestTimeoutMs (408), and an idle connection after idleTimeoutMs', async () => {
    // The idle timeout far above the drip's pace, so a busy machine's pauses cannot close it first.
    const running = await startServer({ port: 0, dbPath: ':memory:', users: [{ ...dev, entities: ['*'] }], requestTimeoutMs: 1000, idleTimeoutMs: 10_000 });
    const idle = await startServer({ port: 0, dbPath: ':memory:', users: [{ ...dev, entities: ['*'] }], idleTimeoutMs: 600 });
    try {
      const head = `POST /call/start HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicAuth(dev)}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`;
      const { hostname, port } = new URL(running.url);
      const trickler = connect({ host: hostname, port: Number(port) });
      trickler.on('error', () => {});
      let received = '';
      trickler.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
      trickler.write(head);
      // A byte every 300 ms keeps the socket from going idle; the request still takes too long.
      const drip = setInterval(() => trickler.write(' '), 300);
      await new Promise<void>((resolve) => trickler.once('close', () => resolve()));
      clearInterval(drip);
      expect(received.split('\r\n', 1)[0]).toBe('HTTP/1.1 408 Request Timeout');

      expect(await holdConnection(idle.url, '', 5000)).toEqual({ status: '', closedByServer: true });
    } finally {
      await Promise.all([running.close(), idle.close()]);
    }
  });

  it('frees the stream slot of a client that stops reading a calls/stream_query answer, after idleTimeoutMs', async () => {
    const running = await startServer({
      port: 0,
      dbPath: join(await mkdtemp(join(tmpdir(), 'callbridge-stall-')), 'stall.db'),
      users: [{ ...dev, entities: ['*'] }],
      maxConcurrentStreams: 1,
      idleTimeoutMs: 1000,
    });
    try {
      // Enough rows (~40 MB of answer) that the stream stalls in the socket's buffers.
      const inputs = { text: 'x'.repeat(20_000) };
      for (let round = 0; round < 20; round++) {
        const batch = Array.from({ length: 100 }, (_, index) => {
          const id = (round * 100 + index + 1).toString(16).padStart(16, '0');
          return { mode: 'start', req: { start: { ...startOf(OWN, id), inputs } } };
        });
        const written = await fetch(`${running.url}/call/upsert_batch`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: basicAuth(dev) },
          body: JSON.stringify({ batch }),
        });
        expect(written.status).toBe(200);
      }
      // A client that sends its query and never reads a byte of the answer.
      const body = JSON.stringify({ project_id: OWN });
      const { hostname, port } = new URL(running.url);
      const stalled = connect({ host: hostname, port: Number(port) });
      stalled.on('error', () => {});
      stalled.pause();
      stalled.write(
        `POST /calls/stream_query HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicAuth(dev)}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      const query = () =>
        fetch(`${running.url}/calls/stream_query`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: basicAuth(dev) },
          body: JSON.stringify({ project_id: OWN, limit: 1 }),
        }).then(async (response) => {
          await response.arrayBuffer();
          return response.status;
        });
      await vi.waitFor(async () => expect(await query()).toBe(503), { timeout: 5_000, interval: 100 });
      // Once the stalled connection has been idle for idleTimeoutMs it is closed, and its slot freed.
      await vi.waitFor(async () => expect(await query()).toBe(200), { timeout: 10_000, interval: 250 });
      stalled.destroy();
    } finally {
      await running.close();
    }
  }, 30_000);

  it('closes the connections still open CLOSE_GRACE_MS after close(), so a stalled client cannot keep the server open', async () => {
    const running = await startServer({ port: 0, dbPath: ':memory:', users: [{ ...dev, entities: ['*'] }] });
    const head = `POST /call/start HTTP/1.1\r\nHost: x\r\nAuthorization: ${basicAuth(dev)}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`;
    const held = holdConnection(running.url, head, CLOSE_GRACE_MS + 5000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const closed = running.close().then(() => 'closed');
    expect(await held).toEqual({ status: '', closedByServer: true });
    expect(await closed).toBe('closed');
  }, 20_000);
});
