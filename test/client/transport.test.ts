import { getEventListeners } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { TIMEOUT_CODE } from '../../src/client/classify.js';
import { createTransport, type HttpTransport } from '../../src/client/transport.js';
import { resolveConnection, type ConnectionOptions } from '../../src/options.js';
import { startTestServer } from '../helpers/server.js';
import { startRawServer, startScriptedServer, type ScriptedServer } from './scripted-server.js';

const MiB = 1024 * 1024;
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function track(server: ScriptedServer): ScriptedServer {
  cleanups.push(() => server.close());
  return server;
}

function transportFor(server: ScriptedServer | string, options: ConnectionOptions = {}): HttpTransport {
  const baseUrl = typeof server === 'string' ? server : server.url;
  const transport = createTransport(resolveConnection({ username: 'dev', password: 'pw', ...options, baseUrl }, {}));
  cleanups.push(() => transport.close());
  return transport;
}

function json(res: import('node:http').ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

describe('transport: the request it sends', () => {
  it('POSTs the body as application/json with Basic auth and returns the parsed answer', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, { res: [{ id: 'a' }] })));
    const transport = transportFor(server);
    const outcome = await transport.post('/call/upsert_batch', '{"batch":[]}');
    expect(outcome).toEqual({ kind: 'ok', status: 200, body: { res: [{ id: 'a' }] } });
    const [request] = server.received;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/call/upsert_batch');
    expect(request?.headers['content-type']).toBe('application/json');
    expect(request?.headers.authorization).toBe(`Basic ${Buffer.from('dev:pw').toString('base64')}`);
    expect(request?.body.toString()).toBe('{"batch":[]}');
  });

  it('sends Uint8Array bodies byte for byte', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    const bytes = new TextEncoder().encode('{"text":"héllo ✓ 😀"}');
    await transportFor(server).post('/call/end', bytes);
    expect(server.received[0]?.body.equals(Buffer.from(bytes))).toBe(true);
    expect(server.received[0]?.headers['content-length']).toBe(String(bytes.byteLength));
  });

  it('puts the base URL path in front of every request path', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    await transportFor(`${server.url}/traces/`).post('/call/read', '{}');
    expect(server.received[0]?.url).toBe('/traces/call/read');
  });

  it('encodes credentials as UTF-8 and keeps colons in the password', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    await transportFor(server, { username: 'zoë', password: 'a:b:ç' }).post('/x', '{}');
    const header = server.received[0]?.headers.authorization ?? '';
    expect(Buffer.from(header.replace(/^Basic /, ''), 'base64').toString('utf8')).toBe('zoë:a:b:ç');
  });

  it('sends no Authorization header when no credentials are configured', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    const transport = createTransport(resolveConnection({ baseUrl: server.url }, {}));
    cleanups.push(() => transport.close());
    await transport.post('/x', '{}');
    expect(server.received[0]?.headers.authorization).toBeUndefined();
  });

  it('takes credentials from the environment (API key -> user "api")', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    const transport = createTransport(resolveConnection({}, { CALLBRIDGE_BASE_URL: server.url, CALLBRIDGE_API_KEY: 'k-123' }));
    cleanups.push(() => transport.close());
    await transport.post('/x', '{}');
    expect(server.received[0]?.headers.authorization).toBe(`Basic ${Buffer.from('api:k-123').toString('base64')}`);
  });

  it('keeps the connection alive between requests', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    const transport = transportFor(server, { connections: 1 });
    for (let i = 0; i < 5; i += 1) expect((await transport.post('/x', '{}')).kind).toBe('ok');
    expect(server.connections()).toBe(1);
  });
});

describe('transport: discardBody (the batcher does not read upsert_batch replies)', () => {
  it('reads a 2xx reply to its end without parsing it, and the connection is reused', async () => {
    // Bigger than undici's dump() limit (128 KiB), past which it would close the socket instead.
    const reply = JSON.stringify({ res: Array.from({ length: 5000 }, (_, index) => ({ id: `${index}`.padStart(16, '0'), trace_id: 'f'.repeat(32) })) });
    let answer = 0;
    const server = track(
      await startScriptedServer((_req, res) => {
        answer += 1;
        const text = answer === 2 ? 'not json at all' : reply;
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
        res.end(text);
      }),
    );
    const transport = transportFor(server, { connections: 1 });
    for (let i = 0; i < 3; i += 1) {
      expect(await transport.post('/call/upsert_batch', '{"batch":[]}', { discardBody: true })).toEqual({ kind: 'ok', status: 200, body: undefined });
    }
    expect(server.connections()).toBe(1);
    // Without the option the same reply is parsed, as before.
    const parsed = await transport.post('/call/upsert_batch', '{"batch":[]}');
    expect(parsed.kind === 'ok' && (parsed.body as { res: unknown[] }).res).toHaveLength(5000);
  });

  it('takes a 2xx whose body is then cut short as ok (the write was committed before the answer), and error bodies as before', async () => {
    const cut = track(
      await startScriptedServer((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"res": [', () => req.socket.destroy());
      }),
    );
    // Retrying would only write the same records again, and could end a stored batch as retries_exhausted.
    expect(await transportFor(cut).post('/x', '{}', { discardBody: true })).toMatchObject({ kind: 'ok', status: 200, body: undefined, bodyError: expect.any(String) });
    // A reply that is read (the typed client) still fails: its caller wanted the body.
    expect(await transportFor(cut).post('/x', '{}')).toMatchObject({ kind: 'retry', status: 200 });
    const refused = track(await startScriptedServer((_req, res) => json(res, 400, { reason: 'bad batch', error_code: 'X' })));
    expect(await transportFor(refused).post('/x', '{}', { discardBody: true })).toMatchObject({
      kind: 'reject',
      status: 400,
      reason: 'bad batch',
      errorCode: 'X',
    });
  });
});

describe('transport: failures become outcomes', () => {
  it('503 with Retry-After is retry with status and afterMs', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 503, { reason: 'overloaded' }, { 'retry-after': '3' })));
    expect(await transportFor(server).post('/x', '{}')).toEqual({ kind: 'retry', status: 503, afterMs: 3000, reason: 'overloaded' });
  });

  it('429 with an HTTP-date Retry-After is retry with a bounded afterMs', async () => {
    const server = track(
      await startScriptedServer((_req, res) =>
        json(res, 429, { reason: 'slow down' }, { 'retry-after': new Date(Date.now() + 60_000).toUTCString() }),
      ),
    );
    const outcome = await transportFor(server).post('/x', '{}');
    expect(outcome).toMatchObject({ kind: 'retry', status: 429, reason: 'slow down' });
    expect(outcome.kind === 'retry' && outcome.afterMs).toBeGreaterThan(0);
    expect(outcome.kind === 'retry' && outcome.afterMs).toBeLessThanOrEqual(60_000);
  });

  it('a socket destroyed mid-request is retry without a status', async () => {
    const server = track(await startScriptedServer((req) => req.socket.destroy(), { readBody: false }));
    const outcome = await transportFor(server).post('/x', 'x'.repeat(MiB));
    expect(outcome.kind).toBe('retry');
    expect(outcome.status).toBeUndefined();
    expect(outcome.kind === 'retry' && outcome.code).toMatch(/^(UND_ERR_SOCKET|ECONNRESET|EPIPE)$/);
  });

  it('a socket destroyed after a 200 head but before its body ends is retry with status 200', async () => {
    const server = track(
      await startScriptedServer((req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"res": [', () => req.socket.destroy());
      }),
    );
    expect(await transportFor(server).post('/x', '{}')).toMatchObject({ kind: 'retry', status: 200 });
  });

  it('a connection refused is retry', async () => {
    const server = await startScriptedServer(() => {});
    const url = server.url;
    await server.close();
    expect(await transportFor(url).post('/x', '{}')).toMatchObject({ kind: 'retry', code: 'ECONNREFUSED' });
  });

  it('a server that never answers is retry after requestTimeoutMs', async () => {
    const server = track(await startScriptedServer(() => {}));
    const outcome = await transportFor(server, { requestTimeoutMs: 200 }).post('/x', '{}');
    expect(outcome).toMatchObject({ kind: 'retry', code: TIMEOUT_CODE });
    expect(outcome.status).toBeUndefined();
  });

  it('the timeout covers the body too: headers then silence is retry with the status', async () => {
    const server = track(
      await startScriptedServer((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
        res.write('{');
      }),
    );
    const outcome = await transportFor(server, { requestTimeoutMs: 200 }).post('/x', '{}');
    expect(outcome).toMatchObject({ kind: 'retry', status: 200 });
    expect(outcome.kind === 'retry' && outcome.code).toMatch(new RegExp(`^(${TIMEOUT_CODE}|UND_ERR_BODY_TIMEOUT)$`));
  });

  it('an abort through the caller’s signal is retry, not a throw', async () => {
    const server = track(await startScriptedServer(() => {}));
    const controller = new AbortController();
    const pending = transportFor(server).post('/x', '{}', { signal: controller.signal });
    setTimeout(() => controller.abort(), 20);
    expect(await pending).toMatchObject({ kind: 'retry', code: 'CALLBRIDGE_ABORTED' });
    const already = AbortSignal.abort();
    expect(await transportFor(server).post('/x', '{}', { signal: already })).toMatchObject({ kind: 'retry', code: 'CALLBRIDGE_ABORTED' });
  });

  it('a long-lived caller signal keeps no listener once requests are done', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    const transport = transportFor(server);
    const shutdown = new AbortController();
    for (let i = 0; i < 20; i += 1) await transport.post('/x', '{}', { signal: shutdown.signal });
    await transport.post('/x', '{', { signal: shutdown.signal });
    expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
  });

  it('many requests sharing one caller signal add one listener to it, and none once done', async () => {
    const server = track(await startScriptedServer((_req, res) => setTimeout(() => json(res, 200, {}), 20)));
    const transport = transportFor(server, { connections: 32 });
    const shutdown = new AbortController();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const pending = Array.from({ length: 30 }, () => transport.post('/x', '{}', { signal: shutdown.signal }));
      expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(1);
      expect((await Promise.all(pending)).every((outcome) => outcome.kind === 'ok')).toBe(true);
      expect(getEventListeners(shutdown.signal, 'abort')).toHaveLength(0);
      // Aborting reaches every request under way.
      const aborted = Array.from({ length: 12 }, () => transport.post('/x', '{}', { signal: shutdown.signal }));
      shutdown.abort();
      for (const outcome of await Promise.all(aborted)) expect(outcome).toMatchObject({ kind: 'retry', code: 'CALLBRIDGE_ABORTED' });
      await new Promise((resolve) => setImmediate(resolve));
      expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  describe('a request waiting for a connection (every one busy with a response left unread)', () => {
    /** A server streaming a long JSONL answer on /stream, and `{}` to anything else. */
    const streamingServer = () =>
      startScriptedServer((req, res) => {
        if (req.url !== '/stream') return json(res, 200, {});
        res.writeHead(200, { 'content-type': 'application/jsonl' });
        const line = `${JSON.stringify({ pad: 'p'.repeat(1000) })}\n`;
        let written = 0;
        const pump = (): void => {
          while (written < 5000) {
            written += 1;
            if (!res.write(line)) return void res.once('drain', pump);
          }
          res.end();
        };
        pump();
      });
    /** Opens the stream on the pool's only connection and reads one chunk of it, then leaves it. */
    const occupy = async (transport: HttpTransport) => {
      const opened = await transport.exchange({ path: '/stream' }, (body) => body);
      expect(opened.kind).toBe('ok');
      return opened;
    };

    it('ends at requestTimeoutMs instead of waiting for the connection', async () => {
      const server = track(await streamingServer());
      const transport = transportFor(server, { connections: 1, requestTimeoutMs: 300 });
      await occupy(transport);
      const started = performance.now();
      expect(await transport.post('/x', '{}')).toMatchObject({ kind: 'retry', code: TIMEOUT_CODE });
      // Not a timing assertion: without the fix this waits until the stream is closed (never).
      expect(performance.now() - started).toBeLessThan(10_000);
    });

    it("ends when the caller's signal aborts", async () => {
      const server = track(await streamingServer());
      const transport = transportFor(server, { connections: 1, requestTimeoutMs: 60_000 });
      await occupy(transport);
      const controller = new AbortController();
      const pending = transport.post('/x', '{}', { signal: controller.signal });
      setTimeout(() => controller.abort(), 50);
      expect(await pending).toMatchObject({ kind: 'retry', code: 'CALLBRIDGE_ABORTED' });
    });

    it('close() lets a response being read to its end finish: only streams left unread are destroyed', async () => {
      let headersSent!: () => void;
      const sent = new Promise<void>((resolve) => (headersSent = resolve));
      const server = track(
        await startScriptedServer((_req, res) => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.write('{"call":');
          headersSent();
          setTimeout(() => res.end('null}'), 200);
        }),
      );
      const transport = createTransport(resolveConnection({ baseUrl: server.url, requestTimeoutMs: 60_000 }, {}));
      const reading = transport.post('/call/read', '{}');
      await sent;
      await new Promise((resolve) => setTimeout(resolve, 20));
      await transport.close();
      expect(await reading).toEqual({ kind: 'ok', status: 200, body: { call: null } });
    });

    it('close() also ends a stream whose answer comes after it was called', async () => {
      const server = track(await streamingServer());
      const transport = createTransport(resolveConnection({ baseUrl: server.url, requestTimeoutMs: 60_000 }, {}));
      const opening = transport.exchange({ path: '/stream' }, (body) => body);
      const closing = transport.close();
      const opened = await opening;
      // Handed back already destroyed: reading it fails, and the pool's close does not wait for it.
      expect(opened.kind === 'ok' && opened.value.destroyed).toBe(true);
      await closing;
    });

    it('close() destroys the unread response and resolves; what was queued ends too', async () => {
      const server = track(await streamingServer());
      const transport = createTransport(resolveConnection({ baseUrl: server.url, connections: 1, requestTimeoutMs: 60_000 }, {}));
      const opened = await occupy(transport);
      const queued = transport.post('/x', '{}');
      await transport.close();
      expect(opened.kind === 'ok' && opened.value.destroyed).toBe(true);
      expect((await queued).kind).toBe('ok');
    });
  });

  it('401 is auth naming the URL and the user, never the password', async () => {
    const server = track(
      await startScriptedServer((_req, res) => json(res, 401, { reason: 'Unauthorized' }, { 'www-authenticate': 'Basic realm="callbridge"' })),
    );
    const outcome = await transportFor(server, { password: 'sekret-pw' }).post('/call/upsert_batch', '{}');
    expect(outcome.kind).toBe('auth');
    expect(outcome.kind === 'auth' && outcome.reason).toContain(`${server.url}/call/upsert_batch`);
    expect(outcome.kind === 'auth' && outcome.reason).toContain('"dev"');
    expect(JSON.stringify(outcome)).not.toContain('sekret-pw');
  });

  it('400 with error_code is reject carrying it', async () => {
    const server = track(
      await startScriptedServer((_req, res) => json(res, 400, { reason: 'complete mode', error_code: 'CALLS_COMPLETE_MODE_REQUIRED' })),
    );
    expect(await transportFor(server).post('/x', '{}')).toEqual({
      kind: 'reject',
      status: 400,
      reason: 'complete mode',
      errorCode: 'CALLS_COMPLETE_MODE_REQUIRED',
    });
  });

  it('a huge error body is read only up to a cap', async () => {
    const server = track(
      await startScriptedServer((_req, res) => {
        res.writeHead(400, { 'content-type': 'text/plain' });
        res.end('e'.repeat(8 * MiB));
      }),
    );
    const outcome = await transportFor(server).post('/x', '{}');
    expect(outcome).toMatchObject({ kind: 'reject', status: 400 });
    expect(outcome.kind === 'reject' && outcome.reason.length).toBeLessThan(1000);
  });

  it('after close(), post is reject (no retry can help) and close() stays idempotent', async () => {
    const server = track(await startScriptedServer((_req, res) => json(res, 200, {})));
    const transport = transportFor(server);
    await transport.close();
    await transport.close();
    const outcome = await transport.post('/x', '{}');
    expect(outcome).toMatchObject({ kind: 'reject', status: 0 });
    expect(outcome.kind === 'reject' && outcome.code).toMatch(/^UND_ERR_(CLOSED|DESTROYED)$/);
  });
});

describe('transport: the early 413 (SPEC §4.6)', () => {
  const tooLarge = '{"reason":"Request too large"}';

  it('reads a 413 written on the headers, before the body, as split (raw socket destroyed)', async () => {
    const server = track(
      await startRawServer((socket) => {
        socket.write(
          `HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: ${tooLarge.length}\r\n` +
            `Connection: close\r\n\r\n${tooLarge}`,
        );
        socket.destroy();
      }),
    );
    const transport = transportFor(server);
    const body = new Uint8Array(8 * MiB).fill(0x20);
    // Several rounds: the race between our write and their close must go the same way every time.
    for (let round = 0; round < 5; round += 1) {
      expect(await transport.post('/call/upsert_batch', body)).toEqual({ kind: 'split', status: 413, reason: 'Request too large' });
    }
  });

  it('also without Content-Length or Connection: close, and with a string body', async () => {
    const server = track(
      await startRawServer((socket) => {
        socket.write(`HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\n\r\n${tooLarge}`);
        socket.destroy();
      }),
    );
    const transport = transportFor(server);
    for (let round = 0; round < 3; round += 1) {
      expect(await transport.post('/call/upsert_batch', ' '.repeat(6 * MiB))).toMatchObject({ kind: 'split', status: 413 });
    }
  });

  it('reads a node:http 413 followed by req.socket.destroy() as split', async () => {
    const server = track(
      await startScriptedServer(
        (req, res) => {
          res.writeHead(413, { 'content-type': 'application/json', 'content-length': tooLarge.length });
          res.end(tooLarge);
          req.socket.destroy();
        },
        { readBody: false },
      ),
    );
    const transport = transportFor(server);
    for (let round = 0; round < 3; round += 1) {
      expect(await transport.post('/call/upsert_batch', new Uint8Array(5 * MiB))).toMatchObject({ kind: 'split', status: 413 });
    }
  });

  it('a 413 whose body the close cut short is still split', async () => {
    const server = track(
      await startRawServer((socket) => {
        socket.write('HTTP/1.1 413 Payload Too Large\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"reas');
        socket.destroy();
      }),
    );
    expect(await transportFor(server).post('/x', new Uint8Array(4 * MiB))).toMatchObject({ kind: 'split', status: 413 });
  });
});

describe('transport: against the local server', () => {
  it('a body over the server limit is split, and the next request on the pool still works', async () => {
    const local = await startTestServer({ maxBodyBytes: 1 * MiB });
    cleanups.push(() => local.close());
    const transport = transportFor(local.url);
    const oversized = JSON.stringify({ batch: [], padding: 'x'.repeat(6 * MiB) });
    for (let round = 0; round < 3; round += 1) {
      expect(await transport.post('/call/upsert_batch', oversized)).toMatchObject({ kind: 'split', status: 413 });
    }
    expect(await transport.post('/call/upsert_batch', '{"batch":[]}')).toEqual({ kind: 'ok', status: 200, body: { res: [] } });
  });
});
