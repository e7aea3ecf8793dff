/**
 * `startServer()` refuses bad options when called, with a message naming the option, before it
 * opens a database or a port.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InvalidOptionError } from '../../src/errors.js';
import { startServer, type ServerOptions } from '../../src/server/index.js';

const dir = mkdtempSync(join(tmpdir(), 'callbridge-start-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const DEV = { username: 'dev', password: 'pw', entities: ['*'] };

describe('startServer() options', () => {
  const refused: Array<[string, ServerOptions, RegExp]> = [
    ['no users', {}, /Expected `users` to list at least one \{ username, password, entities \}.*no built-in user/],
    ['an empty users list', { users: [] }, /at least one/],
    ['users in the CLI form', { users: ['dev:pw' as never] }, /Expected each of `users` to be \{ username, password, entities \}, got "dev:pw"/],
    ['a user without entities', { users: [{ username: 'dev', password: 'pw' } as never] }, /`entities` of user "dev" to be a list of entity names or \['\*'\]/],
    ['a username with a colon', { users: [{ ...DEV, username: 'a:b' }] }, /`username` to be a non-empty string without ":"/],
    ['a port out of range', { users: [DEV], port: 70_000 }, /`port` to be an integer from 0 to 65535/],
    ['a body limit of 0', { users: [DEV], maxBodyBytes: 0 }, /`maxBodyBytes` to be a positive integer/],
    ['an idle timeout of 0', { users: [DEV], idleTimeoutMs: 0 }, /`idleTimeoutMs` to be an integer from 1 to 2147483647, got 0/],
    ['a request timeout past a timer', { users: [DEV], requestTimeoutMs: 2 ** 31 }, /`requestTimeoutMs` to be an integer from 1 to 2147483647/],
    ['a request timeout as text', { users: [DEV], requestTimeoutMs: '5000' as unknown as number }, /`requestTimeoutMs`.*got "5000"/],
    ['a port given as text', { users: [DEV], port: '0' as never }, /`port` to be an integer from 0 to 65535, got "0"$/],
    ['an unknown option', { users: [DEV], dbpath: 'x.db' } as ServerOptions, /^Unknown option `dbpath` \(did you mean `dbPath`\?\)$/],
    ['a shortened option name', { users: [DEV], db: 'x.db' } as ServerOptions, /^Unknown option `db` \(did you mean `dbPath`\?\)$/],
    ['an option of another entry point', { users: [DEV], baseUrl: 'http://x' } as ServerOptions, /^Unknown option `baseUrl` \(the options are `port`, `host`, `dbPath`/],
    ['a user that is a bigint', { users: [5n as never] }, /Expected each of `users` to be \{ username, password, entities \}, got 5n$/],
    ['a username that is a symbol', { users: [{ ...DEV, username: Symbol('dev') as never }] }, /`username` to be a non-empty string without ":", got Symbol\(dev\)$/],
    ['completeMode as text', { users: [DEV], completeMode: 'yes' as never }, /`completeMode` to be a boolean, got "yes"$/],
    ['an empty host', { users: [DEV], host: '' }, /`host` to be a non-empty string, got ""$/],
  ];
  for (const [what, options, message] of refused) {
    it(`refuses ${what}, opening nothing`, async () => {
      const dbPath = join(dir, `${what.replaceAll(' ', '-')}.db`);
      await expect(startServer({ port: 0, dbPath, ...options })).rejects.toThrow(message);
      expect(existsSync(dbPath)).toBe(false);
    });
  }

  it('refuses options that are not an object, with an InvalidOptionError', async () => {
    await expect(startServer(null as unknown as ServerOptions)).rejects.toThrow(InvalidOptionError);
    await expect(startServer(null as unknown as ServerOptions)).rejects.toThrow(/`options` to be an object, got null$/);
  });

  it('takes options left undefined as unset', async () => {
    const server = await startServer({ port: 0, dbPath: ':memory:', users: [DEV], host: undefined, logger: undefined, completeMode: undefined });
    await server.close();
  });

  it('starts with one user', async () => {
    const server = await startServer({ port: 0, dbPath: ':memory:', users: [DEV] });
    await server.close();
  });
});
