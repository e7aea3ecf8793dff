/**
 * The `proxy` option and the proxy environment variables: requests to an `http` service are
 * forwarded through the proxy, to an `https` one tunnelled (`CONNECT`), with the proxy's
 * credentials; a proxy that refuses or is down is said so by name, without its password. The
 * service is the real local server (behind a TLS front for `https`), the proxy a small real one.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { bypassedByNoProxy, resolveProxy } from '../../src/client/proxy.js';
import { classify } from '../../src/client/classify.js';
import { InvalidOptionError, NetworkError, TimeoutError } from '../../src/errors.js';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { resolveConnection } from '../../src/options.js';
import { readAllCalls } from '../exporter/fault-proxy.js';
import { emitSpans, providerFor } from '../exporter/spans.js';
import { flushAll } from '../exporter/test-exporter.js';
import { startTestProxy, type TestProxy } from '../helpers/http-proxy.js';
import { serverInfoVia, startTestServer, type TestServer } from '../helpers/server.js';
import { startTlsFront, tlsFixture, type TlsFront } from '../helpers/tls-front.js';

const credentials = { username: 'dev', password: 'pw' };
const ca = tlsFixture('ca.pem');
let server: TestServer;
let front: TlsFront;
let proxy: TestProxy;

beforeAll(async () => {
  server = await startTestServer();
  front = await startTlsFront(server.url);
  proxy = await startTestProxy();
});
afterAll(async () => {
  await proxy.close();
  await front.close();
  await server.close();
});
afterEach(() => {
  vi.unstubAllEnvs();
  proxy.tunnels.length = 0;
  proxy.forwarded.length = 0;
  proxy.credentials.length = 0;
});

describe('requests through a proxy', () => {
  it('forwards requests to an http service', async () => {
    expect(await serverInfoVia({ baseUrl: server.url, proxy: proxy.url })).toHaveProperty('trace_server_version');
    expect(proxy.forwarded).toEqual([`${server.url}/server_info`]);
    expect(proxy.tunnels).toEqual([]);
  });

  it('keeps to connections, forwarding or tunnelling', async () => {
    for (const baseUrl of [server.url, front.url]) {
      const counted = await startTestProxy();
      const client = createClient({ baseUrl, ...credentials, ca, proxy: counted.url, connections: 1 });
      try {
        await Promise.all(Array.from({ length: 8 }, () => client.serverInfo()));
        expect(counted.sockets()).toBe(1);
      } finally {
        await client.close();
        await counted.close();
      }
    }
  });

  it('tunnels to an https service, whose certificate is checked against ca', async () => {
    expect(await serverInfoVia({ baseUrl: front.url, proxy: proxy.url, ca })).toHaveProperty('trace_server_version');
    expect(proxy.tunnels).toEqual([new URL(front.url).host]);
    const untrusted = await serverInfoVia({ baseUrl: front.url, proxy: proxy.url }).catch((error: unknown) => error);
    expect((untrusted as NetworkError).errorCode).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });

  it("sends the proxy's credentials from its URL, and says by name when it refuses them", async () => {
    const guarded = await startTestProxy({ username: 'corp', password: 's3cret' });
    try {
      const withCredentials = guarded.url.replace('http://', 'http://corp:s3cret@');
      expect(await serverInfoVia({ baseUrl: front.url, proxy: withCredentials, ca })).toHaveProperty('trace_server_version');
      expect(guarded.credentials).toEqual([`Basic ${Buffer.from('corp:s3cret').toString('base64')}`]);

      const wrong = guarded.url.replace('http://', 'http://corp:wrong@');
      const refused = await serverInfoVia({ baseUrl: front.url, proxy: wrong, ca }).catch((error: unknown) => error);
      expect(refused).toBeInstanceOf(NetworkError);
      expect((refused as NetworkError).errorCode).toBe('CALLBRIDGE_PROXY_REFUSED');
      expect((refused as Error).message).toContain(`the proxy ${guarded.url.replace('http://', 'http://***@')}/ refused the request to the service: 407 Proxy Authentication Required`);
      expect((refused as Error).message).not.toContain('wrong');

      // Forwarded to an http service: the same words.
      const forwarded = await serverInfoVia({ baseUrl: server.url, proxy: wrong }).catch((error: unknown) => error);
      expect((forwarded as NetworkError).errorCode).toBe('CALLBRIDGE_PROXY_REFUSED');
      expect((forwarded as Error).message).toContain('refused the request to the service: 407 Proxy Authentication Required');
    } finally {
      await guarded.close();
    }
  });

  it('names the proxy when it cannot be reached', async () => {
    const down = await startTestProxy();
    await down.close();
    const failure = await serverInfoVia({ baseUrl: front.url, proxy: down.url, ca, requestTimeoutMs: 2000 }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(NetworkError);
    expect((failure as NetworkError).errorCode).toBe('ECONNREFUSED');
    expect((failure as Error).message).toContain(`(through the proxy ${down.url}/)`);
  });

  it.each(['main', 'worker'] as const)('lets the exporter deliver through the proxy (%s thread)', async (deliveryThread) => {
    const projectId = `acme/proxied-${deliveryThread}`;
    const exporter = new CallbridgeExporter({ baseUrl: front.url, projectId, ...credentials, ca, proxy: proxy.url, deliveryThread });
    const provider = providerFor(exporter);
    try {
      const emitted = emitSpans(provider, 20);
      await flushAll(provider, exporter);
      expect(exporter.stats()).toMatchObject({ delivered: 20, dropped: {} });
      expect(proxy.tunnels.length).toBeGreaterThan(0);
      const calls = await readAllCalls(server.url, projectId, credentials);
      expect(calls.map((call) => call.id).sort()).toEqual(emitted.map((span) => span.spanId).sort());
    } finally {
      await provider.shutdown();
    }
  });

  it.each(['https', 'http'] as const)('fails at requestTimeoutMs, and closes, when the proxy never answers (%s service)', async (scheme) => {
    const silent = createNetServer(() => {
      // Accepts the connection, never answers: the tunnel request or the forwarded one hangs.
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}`;
    const client = createClient({ baseUrl: `${scheme}://trace.example.com`, ...credentials, proxy: silentUrl, requestTimeoutMs: 300 });
    try {
      const failure = await client.serverInfo().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(TimeoutError);
      expect((failure as Error).message).toContain(`(through the proxy ${silentUrl}/)`);
    } finally {
      await client.close();
      silent.close();
    }
  }, 15_000);

  it('sends a lone user name (a token) as curl does, user:', async () => {
    const guarded = await startTestProxy({ username: 'tok3n', password: '' });
    try {
      const proxied = guarded.url.replace('http://', 'http://tok3n@');
      expect(await serverInfoVia({ baseUrl: front.url, proxy: proxied, ca })).toHaveProperty('trace_server_version');
      expect(guarded.credentials).toEqual([`Basic ${Buffer.from('tok3n:').toString('base64')}`]);
    } finally {
      await guarded.close();
    }
  });

  it('takes the proxy from the environment, and proxy: false turns it off', async () => {
    for (const name of ['http_proxy', 'https_proxy', 'no_proxy', 'HTTPS_PROXY', 'NO_PROXY']) vi.stubEnv(name, '');
    vi.stubEnv('HTTP_PROXY', proxy.url);
    // Loopback is never proxied from the environment: the local server stays reachable.
    expect(await serverInfoVia({ baseUrl: server.url })).toHaveProperty('trace_server_version');
    expect(proxy.forwarded).toEqual([]);
    expect(resolveConnection({ baseUrl: 'http://trace.example.com' }).proxy).toBe(`${proxy.url}/`);
    expect(resolveConnection({ baseUrl: 'http://trace.example.com', proxy: false }).proxy).toBeUndefined();
  });
});

describe('resolveProxy', () => {
  const https = new URL('https://trace.wandb.ai');
  const http = new URL('http://trace.example.com:8080');

  it('reads the variables as undici and curl do', () => {
    expect(resolveProxy(https, undefined, { HTTPS_PROXY: 'http://secure:1' })).toBe('http://secure:1/');
    expect(resolveProxy(https, undefined, { https_proxy: 'http://lower:1', HTTPS_PROXY: 'http://upper:1' })).toBe('http://lower:1/');
    expect(resolveProxy(https, undefined, { HTTP_PROXY: 'http://plain:1' })).toBe('http://plain:1/');
    expect(resolveProxy(http, undefined, { HTTPS_PROXY: 'http://secure:1' })).toBeUndefined();
    expect(resolveProxy(http, undefined, { http_proxy: 'proxy.corp:3128' })).toBe('http://proxy.corp:3128/');
    expect(resolveProxy(http, undefined, { HTTP_PROXY: '  ' })).toBeUndefined();
    expect(resolveProxy(http, 'https://explicit:443', { HTTP_PROXY: 'http://env:1' })).toBe('https://explicit/');
    expect(resolveProxy(http, false, { HTTP_PROXY: 'http://env:1' })).toBeUndefined();
  });

  it('goes direct to loopback hosts when the proxy comes from the environment, not when it is the option', () => {
    const env = { HTTP_PROXY: 'http://proxy:1', HTTPS_PROXY: 'http://proxy:1' };
    const loopback = ['http://localhost:6345', 'http://127.0.0.1:6345', 'http://127.1.2.3', 'https://[::1]:443', 'http://app.localhost', 'http://[::ffff:127.0.0.1]:6345'];
    for (const host of loopback) expect(resolveProxy(new URL(host), undefined, env)).toBeUndefined();
    expect(resolveProxy(new URL('http://[::ffff:128.0.0.1]'), undefined, env)).toBe('http://proxy:1/');
    expect(resolveProxy(new URL('http://127.0.0.1:6345'), 'http://proxy:1', {})).toBe('http://proxy:1/');
  });

  it('follows no_proxy: hosts and subdomains, leading dots and stars, ports, IPv6, IP ranges, *', () => {
    expect(bypassedByNoProxy('trace.wandb.ai', '443', 'wandb.ai')).toBe(true);
    expect(bypassedByNoProxy('trace.wandb.ai', '443', '.wandb.ai')).toBe(true);
    expect(bypassedByNoProxy('trace.wandb.ai', '443', '*.wandb.ai')).toBe(true);
    expect(bypassedByNoProxy('notwandb.ai', '443', 'wandb.ai')).toBe(false);
    expect(bypassedByNoProxy('trace.wandb.ai', '443', 'example.com, wandb.ai:443')).toBe(true);
    expect(bypassedByNoProxy('trace.wandb.ai', '443', 'wandb.ai:8443')).toBe(false);
    expect(bypassedByNoProxy('fd00::1', '80', '[fd00::1]')).toBe(true);
    expect(bypassedByNoProxy('fd00::1', '80', 'fd00::1')).toBe(true);
    expect(bypassedByNoProxy('anything', '80', 'x.org *')).toBe(true);
    expect(bypassedByNoProxy('anything', '80', '')).toBe(false);
    expect(bypassedByNoProxy('10.1.2.3', '80', '10.0.0.0/8')).toBe(true);
    expect(bypassedByNoProxy('11.1.2.3', '80', '10.0.0.0/8')).toBe(false);
    expect(bypassedByNoProxy('fd00::1', '80', 'fd00::/8')).toBe(true);
    expect(bypassedByNoProxy('10.1.2.3', '80', 'fd00::/8, 10.0.0.0/99, example.com/8')).toBe(false);
    expect(bypassedByNoProxy('tenant.example.com', '80', '10.0.0.0/8')).toBe(false);
    // An IPv4 address written IPv4-mapped is the same address, as a URL writes it and as given.
    expect(resolveProxy(new URL('http://[::ffff:10.1.2.3]:8080'), undefined, { HTTP_PROXY: 'http://p:1', no_proxy: '10.0.0.0/8' })).toBeUndefined();
    expect(bypassedByNoProxy('::ffff:10.1.2.3', '80', '10.0.0.0/8')).toBe(true);
    expect(bypassedByNoProxy('::ffff:11.1.2.3', '80', '10.0.0.0/8')).toBe(false);
    expect(bypassedByNoProxy('10.1.2.3', '80', '::ffff:10.0.0.0/104')).toBe(true);
    expect(bypassedByNoProxy('fd00::1', '80', '10.0.0.0/8')).toBe(false);
    expect(resolveProxy(new URL('https://trace.wandb.ai'), undefined, { HTTPS_PROXY: 'http://p:1', no_proxy: 'WANDB.AI' })).toBeUndefined();
    // Trailing dots name the same host; an empty no_proxy does not hide NO_PROXY.
    expect(resolveProxy(new URL('https://trace.wandb.ai.'), undefined, { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'wandb.ai.' })).toBeUndefined();
    expect(resolveProxy(new URL('http://localhost.:6345'), undefined, { HTTP_PROXY: 'http://p:1' })).toBeUndefined();
    expect(resolveProxy(new URL('https://trace.wandb.ai'), undefined, { HTTPS_PROXY: 'http://p:1', no_proxy: '', NO_PROXY: 'wandb.ai' })).toBeUndefined();
  });

  it('refuses a proxy that is not an http(s) URL, never quoting its password', () => {
    const bad = [
      'socks5://user:hunter2@proxy:1080',
      'http://user:hunter2@',
      'http://user:hun/ter2@proxy:3128',
      'user:hun/ter2@proxy:3128',
      'http://hunter2@',
      'http://corp:50%hunter2@proxy:3128',
      'ftp://proxy',
      '::::',
    ];
    for (const value of bad) {
      let message = '';
      try {
        resolveProxy(new URL('https://trace.wandb.ai'), value, {});
      } catch (error) {
        expect(error).toBeInstanceOf(InvalidOptionError);
        message = (error as Error).message;
      }
      expect(message).toMatch(/^Expected `proxy` to be an http\(s\) proxy URL/);
      expect(message).not.toContain('hunter2');
    }
    expect(() => resolveProxy(new URL('https://x.org'), 42 as unknown as string, {})).toThrow(InvalidOptionError);
    expect(() => resolveProxy(new URL('https://x.org'), undefined, { HTTPS_PROXY: 'socks5://p:1080' })).toThrow(/in HTTPS_PROXY/);
    expect(() => resolveProxy(new URL('https://x.org'), 'http://corp:50%off@proxy:1', {})).toThrow(/percent-encoded/);
  });

  it("refuses an https proxy whose certificate fails for good, as it refuses a service's", () => {
    const tlsFailure = Object.assign(new Error('Secure Proxy Connection failed'), {
      code: 'UND_ERR_PRX_TLS',
      cause: Object.assign(new Error("Hostname/IP does not match certificate's altnames"), { code: 'ERR_TLS_CERT_ALTNAME_INVALID' }),
    });
    const outcome = classify({ error: tlsFailure }, { url: 'https://x.org/call/upsert_batch', username: 'u', proxy: 'https://proxy:443/' });
    expect(outcome).toMatchObject({ kind: 'reject', status: 0, code: 'ERR_TLS_CERT_ALTNAME_INVALID' });
    expect(outcome.reason).toContain('(through the proxy https://proxy:443/)');
  });
});
