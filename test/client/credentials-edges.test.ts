/**
 * Credentials and base URLs as the typed client sends them.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { AuthError, InvalidOptionError } from '../../src/errors.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startScriptedServer, type ScriptedServer } from './scripted-server.js';

let server: TestServer;
let scripted: ScriptedServer;
beforeAll(async () => {
  server = await startTestServer({
    users: [
      { username: 'jörg', password: 'pä:ss 🔑 word', entities: ['*'] },
      { username: 'api', password: 'k-123', entities: ['*'] },
    ],
  });
  scripted = await startScriptedServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"trace_server_version":"x"}');
  });
});
afterAll(async () => {
  await scripted.close();
  await server.close();
});
afterEach(() => vi.unstubAllEnvs());

describe('credentials against the real local server', () => {
  it('a non-ASCII user name and a password with ":" and spaces authenticate', async () => {
    const client = createClient({ baseUrl: server.url, username: 'jörg', password: 'pä:ss 🔑 word' });
    try {
      await expect(client.serverInfo()).resolves.toHaveProperty('trace_server_version');
    } finally {
      await client.close();
    }
  });

  it('an API key with a trailing newline (read from a file) is sent trimmed as user "api"', async () => {
    const client = createClient({ baseUrl: server.url, apiKey: 'k-123\n' });
    try {
      await expect(client.serverInfo()).resolves.toHaveProperty('trace_server_version');
    } finally {
      await client.close();
    }
  });

  it('an empty CALLBRIDGE_API_KEY falls through to WANDB_API_KEY', async () => {
    vi.stubEnv('CALLBRIDGE_USERNAME', '');
    vi.stubEnv('CALLBRIDGE_PASSWORD', '');
    vi.stubEnv('CALLBRIDGE_API_KEY', '');
    vi.stubEnv('WANDB_API_KEY', 'k-123');
    const client = createClient({ baseUrl: server.url });
    try {
      await expect(client.serverInfo()).resolves.toHaveProperty('trace_server_version');
    } finally {
      await client.close();
    }
  });

  it('a wrong password is an AuthError that never shows the password', async () => {
    const client = createClient({ baseUrl: server.url, username: 'jörg', password: 'secret-guess' });
    try {
      const failure = await client.serverInfo().catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(AuthError);
      expect(String((failure as Error).message)).not.toContain('secret-guess');
      expect(String((failure as Error).message)).toContain('jörg');
    } finally {
      await client.close();
    }
  });

  it('a user name with ":" is refused at construction', () => {
    expect(() => createClient({ baseUrl: server.url, username: 'a:b', password: 'x' })).toThrow(InvalidOptionError);
  });
});

describe('base URLs', () => {
  it.each([
    ['/prefix', '/prefix/server_info'],
    ['/prefix/', '/prefix/server_info'],
    ['/prefix///', '/prefix/server_info'],
    ['/a%20b/c', '/a%20b/c/server_info'],
    ['/a b', '/a%20b/server_info'],
  ])('path prefix %j sends %j', async (prefix, expected) => {
    const client = createClient({ baseUrl: `${scripted.url}${prefix}`, username: 'dev', password: 'pw' });
    try {
      await client.serverInfo();
      expect(scripted.received.at(-1)?.url).toBe(expected);
    } finally {
      await client.close();
    }
  });

  it('a URL object with a trailing slash', async () => {
    const client = createClient({ baseUrl: new URL(`${scripted.url}/p/`), username: 'dev', password: 'pw' });
    try {
      expect(client.baseUrl).toBe(`${scripted.url}/p`);
      await client.serverInfo();
      expect(scripted.received.at(-1)?.url).toBe('/p/server_info');
    } finally {
      await client.close();
    }
  });

  it('refuses a query string or a fragment, and credentials in the URL', () => {
    expect(() => createClient({ baseUrl: `${scripted.url}/?x=1` })).toThrow(InvalidOptionError);
    expect(() => createClient({ baseUrl: `${scripted.url}/#x` })).toThrow(InvalidOptionError);
    expect(() => createClient({ baseUrl: scripted.url.replace('http://', 'http://u:p@') })).toThrow(InvalidOptionError);
  });
});
