/**
 * Errors surfacing from the typed client at its edges: an error the caller throws into a stream,
 * a stream cut by close(), the caller's abort reason, and a forwarding proxy's own answers.
 */
import { describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { CallbridgeHttpError, NetworkError } from '../../src/errors.js';
import { startScriptedServer } from './scripted-server.js';

const project = 'acme/demo';

describe('errors thrown into a calls stream', () => {
  it('an error the caller throws into callsStreamQuery (gen.throw) comes back unchanged, not as a retryable NetworkError', async () => {
    const server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.end('{"id":"0000000000000001"}\n{"id":"0000000000000002"}\n');
    });
    const client = createClient({ baseUrl: server.url });
    try {
      const stream = client.callsStreamQuery({ project_id: project });
      expect((await stream.next()).value).toMatchObject({ id: '0000000000000001' });
      const consumerFailure = new Error('disk full while writing the export');
      const thrown = await stream.throw(consumerFailure).then(
        () => undefined,
        (error: unknown) => error,
      );
      // Generator semantics (and what Readable.from / iterator helpers rely on): the caller's own
      // error propagates as is, not wrapped as "Request to .../calls/stream_query failed".
      expect(thrown).toBe(consumerFailure);
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe('close() under an open stream', () => {
  it('a stream ended by close() rejects with a NetworkError that is not retryable (the client is closed)', async () => {
    const server = await startScriptedServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/jsonl' });
      res.write('{"id":"0000000000000001"}\n'); // and never ends
    });
    const client = createClient({ baseUrl: server.url });
    try {
      let closing: Promise<void> | undefined;
      const error = await (async () => {
        for await (const _call of client.callsStreamQuery({ project_id: project })) closing ??= client.close();
      })().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      await closing;
      expect(error).toBeInstanceOf(NetworkError);
      // Same as any call after close() (client.test.ts: "a closed client rejects with a NetworkError
      // that is not retryable"): retrying on this client can never succeed.
      expect((error as NetworkError).retryable).toBe(false);
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe('the caller’s abort reason', () => {
  it('a request cancelled by AbortSignal.timeout() keeps the signal’s reason as its cause', async () => {
    const server = await startScriptedServer(() => {
      // Never answers.
    });
    const client = createClient({ baseUrl: server.url });
    try {
      const signal = AbortSignal.timeout(50);
      const error = await client.serverInfo({ signal }).then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(error).toBeInstanceOf(NetworkError);
      expect((error as NetworkError).errorCode).toBe('CALLBRIDGE_ABORTED');
      // So a caller can tell its own timeout (a TimeoutError DOMException) from a user's cancel.
      expect((error as Error).cause).toBe(signal.reason);
    } finally {
      await client.close();
      await server.close();
    }
  });
});

describe('a forwarding proxy that fails', () => {
  it('a 502 from the proxy in front of an http service names the proxy, as the README promises', async () => {
    // An http proxy (forwarding, no CONNECT) that cannot reach the service answers 502 itself.
    const proxy = await startScriptedServer((_req, res) => {
      res.writeHead(502, { 'content-type': 'text/plain' });
      res.end('Bad Gateway');
    });
    const client = createClient({ baseUrl: 'http://trace.example.com', username: 'dev', password: 'pw', proxy: proxy.url });
    try {
      const error = await client.serverInfo().then(
        () => undefined,
        (caught: unknown) => caught,
      );
      expect(proxy.received[0]?.url).toBe('http://trace.example.com/server_info');
      expect(error).toBeInstanceOf(CallbridgeHttpError);
      // README, `proxy` option: "a proxy that refuses (407, 403) or fails is named in the error".
      // Forwarded (an http service), the proxy's 502 or 403 must not read as the service's own.
      expect((error as Error).message).toContain(proxy.url);
    } finally {
      await client.close();
      await proxy.close();
    }
  });
});
