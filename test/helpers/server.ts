/**
 * A real local server for tests: port 0, a SQLite file in a fresh temp dir (removed on close),
 * and user `dev`/`pw` granted every entity.
 *
 * @example
 * const server = await startTestServer();
 * const res = await post(server.url, '/call/read', { project_id: 'acme/demo', id }, server);
 * await server.close();
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '../../src/client/index.js';
import type { ConnectionOptions } from '../../src/options.js';
import { startServer, type ServerOptions, type ServerUser } from '../../src/server/index.js';

export interface TestServer {
  readonly url: string;
  readonly dbPath: string;
  readonly username: 'dev';
  readonly password: 'pw';
  close(): Promise<void>;
}

export interface TestServerOptions extends Omit<ServerOptions, 'port' | 'host' | 'dbPath' | 'users'> {
  /** Users besides `dev`/`pw` (which is always there, with entities `['*']`). */
  readonly users?: readonly ServerUser[];
  /** Use this database file instead of a fresh one (e.g. to reopen after close). */
  readonly dbPath?: string;
}

const DEV_USER: ServerUser = { username: 'dev', password: 'pw', entities: ['*'] };

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dir = await mkdtemp(join(tmpdir(), 'callbridge-test-'));
  const dbPath = options.dbPath ?? join(dir, 'test.db');
  let server;
  try {
    server = await startServer({ ...options, port: 0, host: '127.0.0.1', dbPath, users: [DEV_USER, ...(options.users ?? [])] });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  const running = server;
  return {
    url: running.url,
    dbPath,
    username: 'dev',
    password: 'pw',
    async close() {
      await running.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface Credentials {
  readonly username: string;
  readonly password: string;
}

/** `Authorization` header value for HTTP Basic credentials. */
export function basicAuth({ username, password }: Credentials): string {
  return `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;
}

/**
 * POST `body` as JSON to `url + path` with Basic credentials; resolves to the status, headers and
 * the parsed JSON body (or the raw text when it is not JSON).
 */
export async function post(
  url: string,
  path: string,
  body: unknown,
  credentials: Credentials = DEV_USER,
): Promise<{ status: number; headers: Headers; body: any; text: string }> {
  const response = await fetch(url + path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: basicAuth(credentials) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON (jsonl streams, bytes): callers read `text`.
  }
  return { status: response.status, headers: response.headers, body: parsed, text };
}

/**
 * One `serverInfo()` through a fresh client of `options`, as user `dev`/`pw`, closed afterwards:
 * for tests of how the client reaches a service (TLS, proxies) rather than of what it reads.
 */
export async function serverInfoVia(options: ConnectionOptions): Promise<unknown> {
  const client = createClient({ username: DEV_USER.username, password: DEV_USER.password, ...options });
  try {
    return await client.serverInfo();
  } finally {
    await client.close();
  }
}
