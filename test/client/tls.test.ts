/**
 * The `ca` option: an `https` service whose certificate is signed by a CA Node does not know (a
 * company CA, a self-signed set-up). The real local server sits behind a TLS front
 * (`helpers/tls-front.ts`) whose certificate is signed by the test CA.
 */
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { InvalidOptionError, NetworkError } from '../../src/errors.js';
import { CallbridgeExporter } from '../../src/exporter/index.js';
import { resolveConnection, type ConnectionOptions } from '../../src/options.js';
import { readAllCalls } from '../exporter/fault-proxy.js';
import { emitSpans, providerFor } from '../exporter/spans.js';
import { flushAll } from '../exporter/test-exporter.js';
import { killSpawned } from '../helpers/node-process.js';
import { runPackageScript } from '../helpers/package-script.js';
import { serverInfoVia, startTestServer, type TestServer } from '../helpers/server.js';
import { startTlsFront, TLS_FIXTURES as fixtures, tlsFixture as fixture, type TlsFront } from '../helpers/tls-front.js';

const testCa = fixture('ca.pem');
const otherCa = fixture('other-ca.pem');

let server: TestServer;
let front: TlsFront;
const credentials = { username: 'dev', password: 'pw' };

beforeAll(async () => {
  server = await startTestServer();
  front = await startTlsFront(server.url);
});
afterAll(async () => {
  await front.close();
  await server.close();
});
afterEach(() => killSpawned());

const serverInfoWith = (options: ConnectionOptions) => serverInfoVia({ baseUrl: front.url, ...options });

describe('the ca option', () => {
  it('without it, a certificate from an unknown CA is refused with a clear error, not retried', async () => {
    const failure = await serverInfoWith({}).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(NetworkError);
    expect((failure as NetworkError).errorCode).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
    expect((failure as NetworkError).message).toContain(front.url);
  });

  it('an https:// URL on a plain-HTTP port is refused at once with a hint, not retried', async () => {
    const plain = server.url.replace(/^http:/, 'https:');
    const failure = await serverInfoVia({ baseUrl: plain }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(NetworkError);
    expect(failure).toMatchObject({ errorCode: 'ERR_SSL_WRONG_VERSION_NUMBER', retryable: false });
    expect((failure as NetworkError).message).toContain('use http:// in baseUrl');
  });

  it("trusts the given CA, as PEM text, bytes, in a list, in a bundle, or in OpenSSL's trusted form", async () => {
    const bundle = `subject=CN = other\r\n${otherCa.replaceAll('\n', '\r\n')}\nsome notes - with dashes\n${testCa}`;
    const pooled = Buffer.concat([Buffer.from('xx'), Buffer.from(testCa)]).subarray(2);
    for (const ca of [testCa, Buffer.from(testCa), pooled, [otherCa, testCa], bundle, fixture('ca-trusted.pem')]) {
      expect(await serverInfoWith({ ca })).toHaveProperty('trace_server_version');
    }
  });

  it('does not trust a certificate from a CA it was not given', async () => {
    const failure = await serverInfoWith({ ca: otherCa }).catch((error: unknown) => error);
    expect((failure as NetworkError).errorCode).toBe('UNABLE_TO_VERIFY_LEAF_SIGNATURE');
  });

  it('adds to the CAs Node trusts instead of replacing them (NODE_EXTRA_CA_CERTS stays trusted)', async () => {
    const script = `
      const { createClient } = await import(process.env.CALLBRIDGE_ENTRY);
      const client = createClient({ baseUrl: process.env.FRONT, username: 'dev', password: 'pw', ca: process.env.OTHER_CA });
      const info = await client.serverInfo();
      await client.close();
      console.log('ok', typeof info);
    `;
    const run = await runPackageScript(script, {
      NODE_EXTRA_CA_CERTS: join(fixtures, 'ca.pem'),
      FRONT: front.url,
      OTHER_CA: otherCa,
    });
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('ok object');
  });

  it('keeps the system store chosen with --use-openssl-ca', async () => {
    const script = `
      const { createClient } = await import(process.env.CALLBRIDGE_ENTRY);
      const client = createClient({ baseUrl: process.env.FRONT, username: 'dev', password: 'pw', ca: process.env.OTHER_CA });
      await client.serverInfo();
      await client.close();
      console.log('ok');
    `;
    const run = await runPackageScript(script, { SSL_CERT_FILE: join(fixtures, 'ca.pem'), FRONT: front.url, OTHER_CA: otherCa }, ['--use-openssl-ca']);
    expect(run.stderr).toBe('');
    expect(run.stdout.trim()).toBe('ok');
  });

  it.each(['main', 'worker'] as const)('lets the exporter deliver over TLS (%s thread)', async (deliveryThread) => {
    const projectId = `acme/tls-${deliveryThread}`;
    const exporter = new CallbridgeExporter({ baseUrl: front.url, projectId, ...credentials, ca: testCa, deliveryThread });
    const provider = providerFor(exporter);
    try {
      const emitted = emitSpans(provider, 20);
      await flushAll(provider, exporter);
      expect(exporter.stats()).toMatchObject({ delivered: 20, dropped: {} });
      const calls = await readAllCalls(server.url, projectId, credentials);
      expect(calls.map((call) => call.id).sort()).toEqual(emitted.map((span) => span.spanId).sort());
    } finally {
      await provider.shutdown();
    }
  });

  const keyPem = fixture('server-key.pem');
  const keyBody = keyPem.split('\n')[1]!;
  it.each([
    ['a number', 42, 'got 42'],
    ['an object', { cert: testCa }, 'got object [object Object]'],
    ['an empty list', [], 'got object [object Array]'],
    ['text with no certificate', 'not a certificate', 'got text of 17 characters with no PEM block'],
    ['a path instead of the file', '/etc/ssl/company-ca.pem', `got the file path "/etc/ssl/company-ca.pem" (pass the file's content: readFileSync(path))`],
    ['a private key (never quoted)', keyPem, 'got PEM with no certificate (blocks: PRIVATE KEY)'],
    ['DER bytes', Buffer.from([0x30, 0x82, 0x01, 0x0a]), 'got 4 bytes with no PEM block (a DER file?'],
    ['a list with a bad entry', [testCa, 7], 'got 7'],
    ['a certificate whose body is damaged', testCa.replace(/\n[A-Za-z0-9+/]{20}/, '\nAAAAAAAAAAAAAAAAAAAA'), 'got certificate 1 of 1 that does not parse'],
  ])('refuses %s at construction, naming the option and what it got', (_, ca, got) => {
    const attempt = () => resolveConnection({ baseUrl: front.url, ca: ca as string });
    expect(attempt).toThrow(InvalidOptionError);
    let message = '';
    try {
      attempt();
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toMatch(/^Expected `ca` to be PEM certificates/);
    expect(message).toContain(got);
    expect(message).not.toContain(keyBody.slice(0, 16));
    expect(message.length).toBeLessThan(400);
  });

  it('builds no TLS context for an http service (ca is for https)', async () => {
    const client = createClient({ baseUrl: server.url, ...credentials, ca: testCa });
    expect(await client.serverInfo()).toHaveProperty('trace_server_version');
    await client.close();
  });

  it('refuses a bad ca in the exporter and the client too', () => {
    expect(() => new CallbridgeExporter({ projectId: 'acme/x', ca: 'nope' })).toThrow(InvalidOptionError);
    expect(() => createClient({ ca: 'nope' })).toThrow(InvalidOptionError);
  });
});
