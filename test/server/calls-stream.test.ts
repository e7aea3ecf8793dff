/**
 * `calls/stream_query` streams its answer (one JSONL line per call) from its own read
 * connection: the answer is never built whole in memory, writes go on while it streams, and a
 * client that goes away releases the read snapshot.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { openSqlite } from '../../src/server/store/sqlite.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer } from '../../src/server/index.js';
import { basicAuth, post, startTestServer, type TestServer } from '../helpers/server.js';

const PROJECT = 'acme/stream';
const TRACE = 'cccccccccccccccccccccccccccccccc';
const CALLS = 3000;
const PADDING = 'x'.repeat(2000);
const callId = (n: number): string => (0x100000 + n).toString(16).padStart(16, '0');

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
  for (let first = 0; first < CALLS; first += 500) {
    const batch = [];
    for (let n = first; n < first + 500; n++) {
      const startedAt = new Date(Date.UTC(2026, 0, 1) + n * 1000).toISOString();
      batch.push({
        mode: 'start',
        req: { start: { project_id: PROJECT, id: callId(n), trace_id: TRACE, op_name: 'op', started_at: startedAt, attributes: {}, inputs: { n, PADDING } } },
      });
    }
    const response = await post(server.url, '/call/upsert_batch', { batch });
    expect(response.status, response.text).toBe(200);
  }
});
afterAll(async () => {
  await server.close();
});

/** Open a stream_query and resolve with the response once its first bytes have arrived, paused. */
function openPausedStream(body: object): Promise<{ response: IncomingMessage; first: Buffer; abort(): void }> {
  return new Promise((resolve, reject) => {
    const url = new URL('/calls/stream_query', server.url);
    const req = httpRequest(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basicAuth({ username: 'dev', password: 'pw' }) },
    });
    req.on('error', () => {}); // the abort below
    req.on('response', (response) => {
      response.once('data', (first: Buffer) => {
        response.pause();
        resolve({ response, first, abort: () => req.destroy() });
      });
      response.on('error', () => {});
    });
    req.once('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Whether a TRUNCATE checkpoint is held off by a reader's open snapshot (1) or completes (0). */
function checkpointBlocked(): number {
  // timeout 0: report a blocked checkpoint at once instead of waiting for the reader.
  const db = openSqlite(server.dbPath, { timeout: 0 });
  try {
    const [result] = db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
    return result?.busy ?? -1;
  } finally {
    db.close();
  }
}

describe('calls/stream_query streaming', () => {
  it('sends every call, in order, as a chunked stream rather than one sized body', async () => {
    const response = await fetch(`${server.url}/calls/stream_query`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: basicAuth({ username: 'dev', password: 'pw' }) },
      body: JSON.stringify({ project_id: PROJECT, columns: ['inputs'] }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/jsonl/);
    expect(response.headers.get('transfer-encoding')).toBe('chunked');
    expect(response.headers.get('content-length')).toBeNull();
    const text = await response.text();
    expect(text.endsWith('\n')).toBe(true);
    const lines = text.slice(0, -1).split('\n').map((line) => JSON.parse(line));
    expect(lines).toHaveLength(CALLS);
    expect(lines.map((call) => call.inputs.n)).toEqual(Array.from({ length: CALLS }, (_, n) => n));
  });

  it('answers an empty body for no matches, and keeps 4xx statuses for bad requests', async () => {
    const empty = await post(server.url, '/calls/stream_query', { project_id: 'acme/nothing-here' });
    expect(empty.status).toBe(200);
    expect(empty.text).toBe('');
    const unknown = await post(server.url, '/calls/stream_query', { project_id: PROJECT, sort_by: [{ field: 'nope', direction: 'asc' }] });
    expect(unknown.status).toBe(400);
  });

  it('lets writes through while a stream is paused mid-way, and a client that leaves releases the snapshot', async () => {
    const stream = await openPausedStream({ project_id: PROJECT });
    expect(stream.response.statusCode).toBe(200);
    expect(stream.first.length).toBeGreaterThan(0);

    // The stream holds a read snapshot on its own connection; the writer is not blocked.
    const id = callId(CALLS + 1);
    const write = await post(server.url, '/call/start', {
      start: { project_id: PROJECT, id, trace_id: TRACE, op_name: 'late', started_at: '2027-01-01T00:00:00Z', attributes: {}, inputs: {} },
    });
    expect(write.status, write.text).toBe(200);
    const read = await post(server.url, '/call/read', { project_id: PROJECT, id });
    expect(read.body.call.op_name).toBe('late');
    expect(checkpointBlocked()).toBe(1);

    stream.abort();
    let blocked = 1;
    for (let attempt = 0; attempt < 100 && blocked !== 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      blocked = checkpointBlocked();
    }
    expect(blocked).toBe(0);

    const after = await post(server.url, '/calls/stream_query', { project_id: PROJECT, filter: { call_ids: [id] } });
    expect(after.text.trim().split('\n')).toHaveLength(1);
  });

  it('caps the streams served at once: past 16 a query answers 503 with Retry-After, and a freed slot serves again', async () => {
    const streams = await Promise.all(Array.from({ length: 16 }, () => openPausedStream({ project_id: PROJECT })));
    try {
      expect(streams.every((stream) => stream.response.statusCode === 200)).toBe(true);
      const refused = await post(server.url, '/calls/stream_query', { project_id: PROJECT, limit: 1 });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(refused.body.reason).toBe('Too many query answers streaming at once (16); retry shortly');
      // Other reads and writes are not affected by the cap.
      const read = await post(server.url, '/call/read', { project_id: PROJECT, id: callId(3) });
      expect(read.status).toBe(200);

      streams.pop()!.abort();
      let status = 503;
      for (let attempt = 0; attempt < 100 && status === 503; attempt++) {
        await new Promise((resolve) => setTimeout(resolve, 20));
        status = (await post(server.url, '/calls/stream_query', { project_id: PROJECT, limit: 1 })).status;
      }
      expect(status).toBe(200);
    } finally {
      for (const stream of streams) stream.abort();
    }
  });

  it('serves several streams at once', async () => {
    const bodies = [{ project_id: PROJECT, limit: 5 }, { project_id: PROJECT, limit: 3, offset: 10 }, { project_id: PROJECT, filter: { call_ids: [callId(7)] } }];
    const answers = await Promise.all(bodies.map((body) => post(server.url, '/calls/stream_query', body)));
    expect(answers.map((answer) => answer.text.trim().split('\n').length)).toEqual([5, 3, 1]);
  });
});

describe('maxConcurrentStreams', () => {
  it('refuses a value that is not a positive integer when the server starts', async () => {
    for (const value of [0, -1, 1.5, Number.NaN, '4' as unknown as number]) {
      await expect(startServer({ port: 0, dbPath: ':memory:', maxConcurrentStreams: value })).rejects.toThrow(/maxConcurrentStreams/);
    }
  });
});

describe('calls/stream_query on an in-memory database', () => {
  it('answers from the one connection there is', async () => {
    const memory = await startTestServer({ dbPath: ':memory:' });
    try {
      await post(memory.url, '/call/start', {
        start: { project_id: PROJECT, id: callId(1), trace_id: TRACE, op_name: 'op', started_at: '2026-01-01T00:00:00Z', attributes: {}, inputs: {} },
      });
      const answer = await post(memory.url, '/calls/stream_query', { project_id: PROJECT });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.text.trim()).id).toBe(callId(1));
    } finally {
      await memory.close();
    }
  });
});
