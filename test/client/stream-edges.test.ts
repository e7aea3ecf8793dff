/**
 * JSON-lines streams and socket-level failures of the typed client, against scripted
 * servers on 127.0.0.1.
 */
import http from 'node:http';
import { createServer as createTlsServer } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, type CallbridgeClient } from '../../src/client/index.js';
import { parseJsonLines } from '../../src/client/jsonl.js';
import { NetworkError, UnexpectedResponseError } from '../../src/errors.js';
import { tlsFixture } from '../helpers/tls-front.js';
import { startScriptedServer, type ScriptedServer } from './scripted-server.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function clientFor(url: string, extra: Record<string, unknown> = {}): CallbridgeClient {
  const client = createClient({ baseUrl: url, username: 'dev', password: 'pw', ...extra });
  cleanups.push(() => client.close());
  return client;
}
async function scripted(handler: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void): Promise<ScriptedServer> {
  const server = await startScriptedServer(handler);
  cleanups.push(() => server.close());
  return server;
}
async function* chunksOf(...parts: Array<string | Uint8Array>): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield typeof part === 'string' ? Buffer.from(part) : part;
}
async function collect(iterable: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const value of iterable) out.push(value);
  return out;
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('parseJsonLines edge cases', () => {
  it('a 4-byte character split byte by byte across four chunks, next to a newline', async () => {
    const bytes = Buffer.from('{"e":"🔑"}\n{"e":"é"}', 'utf8');
    const parts = [...bytes].map((byte) => Uint8Array.of(byte));
    expect(await collect(parseJsonLines(chunksOf(...parts)))).toEqual([{ e: '🔑' }, { e: 'é' }]);
  });

  it('a CR at the end of one chunk and its LF at the start of the next', async () => {
    expect(await collect(parseJsonLines(chunksOf('{"a":1}\r', '\n{"a":2}\r\n')))).toEqual([{ a: 1 }, { a: 2 }]);
  });

  it('a UTF-8 BOM before the first line, and U+2028 inside a string', async () => {
    expect(await collect(parseJsonLines(chunksOf('\uFEFF{"a":"x\u2028y"}\n')))).toEqual([{ a: 'x\u2028y' }]);
  });

  it('a body of blank lines only yields nothing', async () => {
    expect(await collect(parseJsonLines(chunksOf('\n\r\n  \n')))).toEqual([]);
  });
});

describe('callsStreamQuery against scripted servers', () => {
  it('a slow consumer of a long stream is not cut off by requestTimeoutMs (README: "a slow consumer ... is not cut off")', async () => {
    const line = `${JSON.stringify({ id: 'x', pad: 'p'.repeat(1000) })}\n`;
    const server = await scripted((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      // About 4 MB: far more than the socket buffers hold, sent as fast as the client reads.
      let left = 4000;
      const pump = (): void => {
        while (left > 0) {
          left -= 1;
          if (!res.write(line)) {
            res.once('drain', pump);
            return;
          }
        }
        res.end();
      };
      pump();
    });
    const client = clientFor(server.url, { requestTimeoutMs: 300 });
    let count = 0;
    for await (const _call of client.callsStreamQuery({ project_id: 'acme/demo' })) {
      count += 1;
      // The consumer works for longer than requestTimeoutMs on a few calls; the server is not pausing.
      if (count === 1 || count === 2000) await sleep(900);
    }
    expect(count).toBe(4000);
  });

  it('a server that ends the stream with a partial line and a clean end is an UnexpectedResponseError, not silent', async () => {
    const server = await scripted((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.end('{"id":"a"}\n{"id":"b"');
    });
    const client = clientFor(server.url);
    const seen: unknown[] = [];
    const failure = await (async () => {
      for await (const call of client.callsStreamQuery({ project_id: 'acme/demo' })) seen.push(call);
    })().catch((error: unknown) => error);
    expect(seen).toEqual([{ id: 'a' }]);
    expect(failure).toBeInstanceOf(UnexpectedResponseError);
  });

  it('an early break with connections: 1 releases the only connection, even while the server is still sending', async () => {
    let served = 0;
    const server = await scripted((req, res) => {
      served += 1;
      if (req.url === '/server_info') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"trace_server_version":"x"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.write('{"id":"a"}\n{"id":"b"}\n');
      // Never ends: the rest is "still coming".
    });
    const client = clientFor(server.url, { connections: 1, requestTimeoutMs: 5000 });
    for await (const _call of client.callsStreamQuery({ project_id: 'acme/demo' })) break;
    await expect(client.serverInfo()).resolves.toEqual({ trace_server_version: 'x' });
    expect(served).toBe(2);
  });
});

describe('TLS failures no retry can fix', () => {
  it('a service that requires a client certificate (TLS 1.2 handshake alert) is refused as not retryable (a TLS certificate problem)', async () => {
    const server = createTlsServer(
      { key: tlsFixture('server-key.pem'), cert: tlsFixture('server-cert.pem'), requestCert: true, rejectUnauthorized: true, ca: tlsFixture('ca.pem'), maxVersion: 'TLSv1.2' },
      (socket) => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}'),
    );
    server.on('tlsClientError', () => {});
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
    const client = clientFor(`https://127.0.0.1:${(server.address() as AddressInfo).port}`, { ca: tlsFixture('ca.pem') });
    const failure = await client.serverInfo().catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(NetworkError);
    // ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE under Node 20, ERR_SSL_SSL/TLS_ALERT_HANDSHAKE_FAILURE under Node 24.
    expect((failure as NetworkError).errorCode).toMatch(/^ERR_SSL_.*_ALERT_HANDSHAKE_FAILURE$/);
    expect((failure as NetworkError).retryable).toBe(false);
  });
});
