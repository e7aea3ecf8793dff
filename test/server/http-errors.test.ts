/**
 * The HTTP layer: every error answer is SPEC §2.5-shaped JSON with a `reason`, including
 * the ones Node's HTTP parser raises before Fastify routes the request (timeouts, malformed
 * requests, oversized headers), and the routing edges (404, methods, HEAD/OPTIONS).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { basicAuth, startTestServer, type TestServer } from '../helpers/server.js';

let server: TestServer;
let port: number;
const AUTH = basicAuth({ username: 'dev', password: 'pw' });

beforeAll(async () => {
  server = await startTestServer({ requestTimeoutMs: 400, idleTimeoutMs: 10_000, maxBodyBytes: 64 * 1024 });
  port = Number(new URL(server.url).port);
});
afterAll(async () => {
  await server.close();
});

/** Send raw bytes, collect everything until the server closes (or `waitMs` passes after the last byte). */
function rawExchange(chunks: (string | Buffer)[], waitMs = 3000): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    let timer = setTimeout(() => socket.destroy(), waitMs);
    socket.on('data', (data) => {
      received += data.toString('latin1');
      clearTimeout(timer);
      timer = setTimeout(() => socket.destroy(), 500);
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

/** The status and JSON body of the first response in `raw`. */
function firstResponse(raw: string): { status: number; headers: string; body: any } {
  const headEnd = raw.indexOf('\r\n\r\n');
  const head = raw.slice(0, headEnd);
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]);
  const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
  const text = raw.slice(headEnd + 4, headEnd + 4 + length);
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status, headers: head, body };
}

const BODY = JSON.stringify({ project_id: 'acme/demo', id: '00000000000000a1' });

describe('errors raised before routing (Node HTTP parser / client errors)', () => {
  it('answers a body that stalls past requestTimeoutMs with 408 and a {"reason"} body', async () => {
    const raw = await rawExchange([
      `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n`,
      BODY.slice(0, 5),
    ]);
    const response = firstResponse(raw);
    expect(response.status).toBe(408);
    expect(response.headers).toMatch(/content-type: application\/json/i);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers a malformed request line with 400 and a {"reason"} body', async () => {
    const response = firstResponse(await rawExchange(['GARBAGE\r\n\r\n']));
    expect(response.status).toBe(400);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers a request with both Content-Length and Transfer-Encoding with 400 and a {"reason"} body', async () => {
    const response = firstResponse(
      await rawExchange([
        `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\nTransfer-Encoding: chunked\r\n\r\n${BODY.length.toString(16)}\r\n${BODY}\r\n0\r\n\r\n`,
      ]),
    );
    expect(response.status).toBe(400);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers malformed chunked framing with 400 and a {"reason"} body', async () => {
    const response = firstResponse(
      await rawExchange([
        `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n${BODY}\r\n0\r\n\r\n`,
      ]),
    );
    expect(response.status).toBe(400);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers headers past Node\'s header size limit with 431 and a {"reason"} body', async () => {
    const response = firstResponse(
      await rawExchange([`GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ${'a'.repeat(20_000)}\r\n\r\n`]),
    );
    expect(response.status).toBe(431);
    expect(typeof response.body.reason).toBe('string');
  });

  it('answers bytes past an under-stated Content-Length (read as a next request) with a {"reason"} 400', async () => {
    const raw = await rawExchange([
      `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}{"x":1}`,
    ]);
    const responses = raw.split(/(?=HTTP\/1\.1 )/).map(firstResponse);
    const refusal = responses.find((response) => response.status === 400);
    expect(refusal).toBeDefined();
    expect(typeof refusal!.body.reason).toBe('string');
  });
});

describe('Expect: 100-continue', () => {
  it('invites a GET of a route without credentials (GET /health) as without the header', async () => {
    const raw = await rawExchange(['GET /health HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n'], 1500);
    expect(raw).toMatch(/HTTP\/1\.1 200 OK/);
    expect(raw).toContain('"status":"ok"');
  });

  it('answers 401 to a request with wrong credentials instead of inviting its body with 100 Continue', async () => {
    const raw = await rawExchange([
      `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: Basic eDp5\r\nContent-Type: application/json\r\nContent-Length: ${BODY.length}\r\nExpect: 100-continue\r\n\r\n`,
    ], 1500);
    expect(raw.split('\r\n', 1)[0]).toBe('HTTP/1.1 401 Unauthorized');
  });

  it('answers 413 to a declared body past the limit instead of inviting it with 100 Continue', async () => {
    const raw = await rawExchange([
      `POST /call/read HTTP/1.1\r\nHost: x\r\nAuthorization: ${AUTH}\r\nContent-Type: application/json\r\nContent-Length: ${10 * 1024 * 1024}\r\nExpect: 100-continue\r\n\r\n`,
    ], 1500);
    expect(raw.split('\r\n', 1)[0]).toBe('HTTP/1.1 413 Payload Too Large');
  });
});

describe('routing edges', () => {
  it('answers an unknown route with 404, a JSON content type and a reason', async () => {
    const response = await fetch(`${server.url}/no/such/route`, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body: '{}' });
    expect(response.status).toBe(404);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(typeof ((await response.json()) as { reason?: unknown }).reason).toBe('string');
  });

  it('answers HEAD /health like GET /health, without a body and without credentials', async () => {
    const response = await fetch(`${server.url}/health`, { method: 'HEAD' });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('');
  });

  it('answers OPTIONS with a {"reason"} body, never a bare or framework-shaped one', async () => {
    for (const path of ['/health', '/call/read', '/nope']) {
      const response = await fetch(`${server.url}${path}`, { method: 'OPTIONS', headers: { authorization: AUTH } });
      expect(response.status).toBeGreaterThanOrEqual(400);
      const body = (await response.json()) as any;
      expect(typeof body.reason).toBe('string');
    }
  });

  it('answers a URL that does not decode with a {"reason"} 400', async () => {
    const response = await fetch(`${server.url}/call/%zz`, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body: BODY });
    expect([400, 404]).toContain(response.status);
    expect(typeof ((await response.json()) as { reason?: unknown }).reason).toBe('string');
  });

  it('does not echo an arbitrarily long unknown path back in the 404 reason', async () => {
    const path = `/${'x'.repeat(12_000)}`;
    const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { authorization: AUTH, 'content-type': 'application/json' }, body: '{}' });
    expect(response.status).toBe(404);
    const body = (await response.json()) as any;
    expect(body.reason.length).toBeLessThan(1000);
  });

  it('answers GET /server_info with its version and a JSON type', async () => {
    const response = await fetch(`${server.url}/server_info`, { headers: { authorization: AUTH } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    expect(typeof ((await response.json()) as { trace_server_version?: unknown }).trace_server_version).toBe('string');
  });

  it('answers GET /health with {"status":"ok"} even with wrong credentials attached', async () => {
    const response = await fetch(`${server.url}/health`, { headers: { authorization: 'Basic Zm9vOmJhcg==' } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });
});
