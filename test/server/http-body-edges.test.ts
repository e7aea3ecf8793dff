/**
 * The HTTP layer: body limits, Content-Encoding and the README's promises about requests
 * refused before their body is read.
 */
import { connect } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, startTestServer, type TestServer } from '../helpers/server.js';

const LIMIT = 64 * 1024;
let server: TestServer;
let port: number;
const AUTH = basicAuth({ username: 'dev', password: 'pw' });

beforeAll(async () => {
  server = await startTestServer({ maxBodyBytes: LIMIT });
  port = Number(new URL(server.url).port);
});
afterAll(async () => {
  await server.close();
});

const READ = JSON.stringify({ project_id: 'acme/demo', id: '00000000000000a1' });
/** A valid /call/read body of exactly `length` bytes (padded with JSON whitespace). */
const readBodyOf = (length: number): string => READ + ' '.repeat(length - READ.length);

async function send(body: string | Uint8Array | ReadableStream, headers: Record<string, string> = {}, path = '/call/read'): Promise<{ status: number; body: any; headers: Headers }> {
  const response = await fetch(server.url + path, {
    method: 'POST',
    headers: { authorization: AUTH, 'content-type': 'application/json', ...headers },
    body,
    ...(body instanceof ReadableStream ? { duplex: 'half' } : {}),
  } as RequestInit);
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

describe('body limit', () => {
  it('accepts a body of exactly maxBodyBytes and refuses one byte more with 413', async () => {
    expect((await send(readBodyOf(LIMIT))).status).toBe(200);
    const over = await send(readBodyOf(LIMIT + 1));
    expect(over).toMatchObject({ status: 413, body: { reason: 'Request too large' } });
  });

  it('accepts a chunked body (no Content-Length) within the limit', async () => {
    const bytes = new TextEncoder().encode(readBodyOf(LIMIT));
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(bytes.subarray(0, 1000));
        controller.enqueue(bytes.subarray(1000));
        controller.close();
      },
    });
    const response = await send(stream, {}, '/call/read');
    expect(response.status).toBe(200);
  });

  it('applies the limit to the inflated bytes: exactly maxBodyBytes inflated is read, one more is 413', async () => {
    const exact = await send(gzipSync(readBodyOf(LIMIT)), { 'content-encoding': 'gzip' });
    expect(exact.status).toBe(200);
    const over = await send(gzipSync(readBodyOf(LIMIT + 1)), { 'content-encoding': 'gzip' });
    expect(over).toMatchObject({ status: 413, body: { reason: 'Request too large' } });
  });
});

describe('Content-Encoding', () => {
  it.each(['identity', 'IDENTITY', ' identity '])('reads a body sent with Content-Encoding %j', async (coding) => {
    expect((await send(READ, { 'content-encoding': coding })).status).toBe(200);
  });

  it.each(['gzip', 'GZip', 'x-gzip'])('reads a gzipped body sent with Content-Encoding %j', async (coding) => {
    expect((await send(gzipSync(READ), { 'content-encoding': coding })).status).toBe(200);
  });

  it.each(['deflate', 'br', 'zstd', 'gzip, gzip', 'identity, gzip', 'gzip;q=1', 'bogus'])(
    'answers 415 naming Content-Encoding %j (README: other codings get a 415 naming them)',
    async (coding) => {
      const response = await send(coding === 'deflate' ? deflateSync(READ) : READ, { 'content-encoding': coding });
      expect(response.status).toBe(415);
      expect(response.body.reason).toContain(JSON.stringify(coding.toLowerCase()));
    },
  );

  it('answers 400 {"reason"} for a truncated gzip body', async () => {
    const whole = gzipSync(READ);
    const response = await send(whole.subarray(0, whole.length - 6), { 'content-encoding': 'gzip' });
    expect(response).toMatchObject({ status: 400, body: { reason: 'Malformed gzip body' } });
  });

  it('answers 400 for a gzip body followed by bytes that are not gzip (trailing garbage)', async () => {
    const response = await send(Buffer.concat([gzipSync(READ), Buffer.from('trailing garbage')]), { 'content-encoding': 'gzip' });
    expect(response.status).toBe(400);
  });

  it('answers 400 for an empty body labelled gzip', async () => {
    const response = await send(Buffer.alloc(0), { 'content-encoding': 'gzip' });
    expect(response.status).toBe(400);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers 413 for a gzip bomb on the OTLP/JSON route, naming the limit', async () => {
    const bomb = gzipSync(Buffer.alloc(LIMIT * 8, 0x20));
    const response = await send(bomb, { 'content-encoding': 'gzip' }, '/otel/v1/traces');
    expect(response.status).toBe(413);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers 415 for an unknown coding on the OTLP route too', async () => {
    const response = await send('{}', { 'content-encoding': 'br' }, '/otel/v1/traces');
    expect(response.status).toBe(415);
    expect(typeof response.body.reason).toBe('string');
  });
});

/** Write `chunks` on one connection; resolve with every byte received until the server closes or 1.5 s pass. */
function rawExchange(chunks: string[]): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const timer = setTimeout(() => socket.destroy(), 1500);
    socket.on('data', (data) => {
      received += data.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(received);
    });
    socket.on('connect', () => {
      for (const chunk of chunks) socket.write(chunk);
    });
  });
}

describe('requests refused before their body is read (README: "has the rest read and discarded")', () => {
  it('keeps a connection usable after a 401 whose declared body is within the limit', async () => {
    const received = await rawExchange([
      `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: Basic eDp5\r\nContent-Type: application/json\r\nContent-Length: ${READ.length}\r\n\r\n${READ}`,
      `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${READ.length}\r\nConnection: close\r\n\r\n${READ}`,
    ]);
    const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1]));
    expect(statuses).toEqual([401, 200]);
  });

  it('closes the connection after a 401 to a chunked body (no declared length)', async () => {
    const received = await rawExchange([
      `POST /call/read HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${READ.length.toString(16)}\r\n${READ}\r\n`,
    ]);
    expect(received).toMatch(/^HTTP\/1\.1 401/);
    expect(received).toMatch(/\r\nconnection: close\r\n/i);
  });
});
