/**
 * Proxies with base-URL path prefixes, Basic auth through a forwarding proxy, and
 * no_proxy entries written differently from the URL.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { resolveProxy } from '../../src/client/proxy.js';
import { startTestProxy, type TestProxy } from '../helpers/http-proxy.js';
import { startScriptedServer, type ScriptedServer } from './scripted-server.js';

let proxy: TestProxy;
let service: ScriptedServer;
beforeAll(async () => {
  proxy = await startTestProxy({ username: 'p', password: 'q' });
  service = await startScriptedServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/jsonl' });
    res.end('{"id":"a"}\n{"id":"b"}\n');
  });
});
afterAll(async () => {
  await service.close();
  await proxy.close();
});

describe('forwarding through an http proxy', () => {
  it('keeps the base URL path prefix and the service credentials, and streams JSON lines', async () => {
    const client = createClient({
      baseUrl: `${service.url}/prefix/`,
      username: 'jörg',
      password: 'a:b',
      proxy: proxy.url.replace('http://', 'http://p:q@'),
    });
    try {
      expect(await client.callsQuery({ project_id: 'acme/demo' })).toEqual([{ id: 'a' }, { id: 'b' }]);
    } finally {
      await client.close();
    }
    expect(proxy.forwarded.at(-1)).toBe(`${service.url}/prefix/calls/stream_query`);
    const received = service.received.at(-1);
    expect(received?.url).toBe('/prefix/calls/stream_query');
    expect(received?.headers.authorization).toBe(`Basic ${Buffer.from('jörg:a:b', 'utf8').toString('base64')}`);
    // The proxy's credentials are for the proxy only.
    expect(received?.headers['proxy-authorization']).toBeUndefined();
  });
});

describe('no_proxy entries', () => {
  const env = { HTTPS_PROXY: 'http://proxy.corp:3128' };
  it('an IPv6 address written in another valid form than the URL host (fd00::0001 vs [fd00::1]) is the same host', () => {
    expect(resolveProxy(new URL('https://[fd00::1]/'), undefined, { ...env, NO_PROXY: 'fd00::0001' })).toBeUndefined();
  });
  it('matches bracketed with port, CIDR, mapped IPv4, case, star-dot, trailing dot', () => {
    expect(resolveProxy(new URL('https://[fd00::1]/'), undefined, { ...env, NO_PROXY: '[fd00::1]:443' })).toBeUndefined();
    expect(resolveProxy(new URL('https://[::ffff:10.1.2.3]/'), undefined, { ...env, NO_PROXY: '10.0.0.0/8' })).toBeUndefined();
    expect(resolveProxy(new URL('https://Api.Example.com/'), undefined, { ...env, NO_PROXY: 'EXAMPLE.COM.' })).toBeUndefined();
    expect(resolveProxy(new URL('https://example.com/'), undefined, { ...env, NO_PROXY: '*.example.com' })).toBeUndefined();
    expect(resolveProxy(new URL('https://xample.com/'), undefined, { ...env, NO_PROXY: 'example.com' })).toBe('http://proxy.corp:3128/');
    expect(resolveProxy(new URL('http://[::ffff:127.0.0.1]:6345/'), undefined, { HTTP_PROXY: 'http://proxy.corp:3128' })).toBeUndefined();
  });
});
